# SPDX-License-Identifier: MIT
"""Data-parallel training of a small PyTorch MLP over N kbthreads ranks.

Every rank is a real OS thread, so torch's per-thread state (grad mode, the
autograd engine's per-thread queue) belongs to the rank that set it, even
while the rank is suspended deep inside torch. Two places show it:

- gradients are all-reduced from autograd hooks, the way DistributedDataParallel
  does it: the rank waits for each all-reduce *inside* ``loss.backward()``,
  where autograd has turned grad mode off for that thread only;
- an evaluation waits for a simulated kernel *inside* ``torch.no_grad()``;
  the next rank to run still has grad mode on.

Time is simulated by a small discrete-event engine: kernels and all-reduces
have durations, completions are popped from a heap in time order. The
all-reduce is real: the engine averages the ranks' gradients when the
collective completes. At the end every rank must hold the same weights, bit
for bit equal to a sequential run of the same steps in one thread.

    make demo-torch DEMO_ARGS="--ranks N --steps S"

runs it in the test venv (build/venv: PyTorch 2.13, bindings/python/
requirements-test.txt) on the library built in build/; by hand, after make
build and make venv:

    PYTHONPATH=bindings/python KBTHREADS_LIBRARY=build/src/libkbthreads.so.0 build/venv/bin/python examples/torch_ddp.py

or with any python that has torch and the kbthreads package installed.

Exit status 0 when the check passes, 1 (with a message on stderr) when it
does not, 2 for a bad command line.
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import sys
from dataclasses import dataclass, field

import torch

import kbthreads

IN, HIDDEN, OUT, BATCH = 16, 32, 4, 8
LR = 0.05
FLOPS_PER_US = 1e3  # a simulated 1 GFLOP/s device: compute shows beside the links
ALLREDUCE_LATENCY_US, BYTES_PER_US = 5.0, 1e4  # 10 GB/s links


@dataclass
class Config:
    ranks: int = 4
    steps: int = 3
    seed: int = 1234


def make_model(cfg: Config) -> torch.nn.Module:
    # Every rank (and the sequential run) starts from the same weights. The
    # default generator is process-wide, but a rank seeds and initialises in
    # one turn (no wait in between), so no other rank draws from it meanwhile.
    torch.manual_seed(cfg.seed)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT))


def shard(cfg: Config, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s batch of step `step`: its own seed, so the data never
    depends on which thread asks or in which order."""
    g = torch.Generator().manual_seed(cfg.seed * 1000 + step * cfg.ranks + rank)
    return torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)


def average(grads: list[torch.Tensor]) -> torch.Tensor:
    """The all-reduce's arithmetic, in rank order. The engine and the
    sequential reference both call this, so equal inputs give equal bits."""
    total = grads[0].clone()
    for g in grads[1:]:
        total += g
    return total / len(grads)


class SimEngine:
    """A discrete-event engine. Each rank has a clock; a kernel starts at its
    rank's clock; an all-reduce starts when its last rank arrives. wait(h),
    called by the kbthreads drain on the driver thread, pops completions in
    time order until h is done."""

    def __init__(self, nranks: int) -> None:
        self.nranks = nranks
        self.now = 0.0
        self.clock = [0.0] * nranks
        self.heap: list[tuple[float, int, object]] = []
        self.seq = itertools.count()  # ties pop in issue order: deterministic
        self.owners: dict[object, list[int]] = {}  # handle -> ranks whose clock it moves
        self.done: set[object] = set()
        self.deposits: dict[object, dict[int, torch.Tensor]] = {}
        self.arrivals: dict[object, list[float]] = {}
        self.results: dict[object, torch.Tensor] = {}

    def kernel(self, rank: int, name: object, flops: float) -> object:
        h = ("kernel", rank, name)
        self.owners[h] = [rank]
        heapq.heappush(self.heap, (self.clock[rank] + flops / FLOPS_PER_US, next(self.seq), h))
        return h

    def all_reduce(self, rank: int, name: object, grad: torch.Tensor) -> object:
        """Deposit this rank's tensor; the last arrival schedules the collective."""
        h = ("allreduce", name)
        self.deposits.setdefault(h, {})[rank] = grad.detach().clone()
        self.arrivals.setdefault(h, []).append(self.clock[rank])
        if len(self.deposits[h]) == self.nranks:
            cost = ALLREDUCE_LATENCY_US + 2 * grad.numel() * grad.element_size() / BYTES_PER_US
            self.owners[h] = list(range(self.nranks))
            heapq.heappush(self.heap, (max(self.arrivals[h]) + cost, next(self.seq), h))
        return h

    def wait(self, h: object) -> None:
        # Every rank reaches its hook for a parameter in the same round (same
        # program, round-robin turns) and the drain runs after the round, so
        # all ranks have deposited when the drain asks for an all-reduce.
        if h not in self.owners:  # only an all-reduce can be waited for before it is issued
            got = sorted(self.deposits.get(h, {}))
            raise RuntimeError(f"{h}: waited for with only ranks {got} of {self.nranks} arrived")
        while h not in self.done:
            t, _, e = heapq.heappop(self.heap)
            self.now = t
            for r in self.owners[e]:
                self.clock[r] = max(self.clock[r], t)
            if e[0] == "allreduce":  # the reduction itself runs here, on the driver
                d = self.deposits.pop(e)
                self.results[e] = average([d[r] for r in range(self.nranks)])
            self.done.add(e)


@dataclass
class RankLog:
    """What one rank saw; the example checks it, the tests read it."""

    step_end: list[float] = field(default_factory=list)  # its clock after each step
    forward_requires_grad: list[bool] = field(default_factory=list)
    grad_mode_in_eval: list[bool] = field(default_factory=list)  # inside no_grad, after the wait
    grad_mode_after_eval: list[bool] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    weights: dict[str, torch.Tensor] = field(default_factory=dict)


def train_rank(rank: int, ctx: kbthreads.Context, engine: SimEngine, cfg: Config, logs: dict[int, RankLog]) -> None:
    log = logs[rank] = RankLog()
    model = make_model(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    params = list(model.named_parameters())
    step = 0

    def hook_for(name: str):
        def hook(grad: torch.Tensor) -> torch.Tensor:
            # Called by autograd inside loss.backward(), grad mode off. The rank
            # suspends here until the drain has run the all-reduce; other ranks
            # run their own backward (or forward) meanwhile on their threads.
            h = engine.all_reduce(rank, (step, name), grad)
            ctx.wait(h)
            return engine.results[h].clone()  # replaces this rank's gradient by the average

        return hook

    for name, p in params:
        p.register_hook(hook_for(name))

    for step in range(cfg.steps):
        x, y = shard(cfg, step, rank)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        log.forward_requires_grad.append(loss.requires_grad)
        # Straggler: higher ranks have slower devices, so the all-reduce waits.
        ctx.wait(engine.kernel(rank, ("fwd", step), 2 * BATCH * (IN * HIDDEN + HIDDEN * OUT) * (1 + 0.1 * rank)))
        loss.backward()  # the hooks wait for one all-reduce per parameter
        opt.step()
        ctx.wait(engine.kernel(rank, ("opt", step), sum(p.numel() for _, p in params)))

        # Evaluation on the rank's next shard, waiting inside no_grad: under
        # greenlet the mode is one global, and the next rank to run would
        # inherit grad mode off from the suspended one.
        ex, ey = shard(cfg, step + cfg.steps, rank)
        with torch.no_grad():
            eval_loss = torch.nn.functional.mse_loss(model(ex), ey)
            ctx.wait(engine.kernel(rank, ("eval", step), 2 * BATCH * (IN * HIDDEN + HIDDEN * OUT)))
            log.grad_mode_in_eval.append(torch.is_grad_enabled())
        log.grad_mode_after_eval.append(torch.is_grad_enabled())
        log.eval_loss.append(eval_loss.item())
        log.step_end.append(engine.clock[rank])

    log.weights = {n: p.detach().clone() for n, p in params}


def run(cfg: Config) -> dict[int, RankLog]:
    """Train on cfg.ranks kbthreads ranks; each rank's log."""
    engine = SimEngine(cfg.ranks)
    ctx = kbthreads.Context(engine)
    logs: dict[int, RankLog] = {}
    try:
        ctx.multiprocessing.spawn(train_rank, args=(ctx, engine, cfg, logs), nprocs=cfg.ranks)
    finally:
        ctx.close()
    return logs


def train_sequential(cfg: Config) -> dict[str, torch.Tensor]:
    """The same steps in one thread: each shard's gradient in rank order,
    averaged, one optimizer step. What every rank must end with."""
    model = make_model(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    params = list(model.named_parameters())
    for step in range(cfg.steps):
        grads: dict[str, list[torch.Tensor]] = {n: [] for n, _ in params}
        for rank in range(cfg.ranks):
            x, y = shard(cfg, step, rank)
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            for n, p in params:
                grads[n].append(p.grad.clone())
        for n, p in params:
            p.grad = average(grads[n])
        opt.step()
    return {n: p.detach().clone() for n, p in params}


def check(cfg: Config, logs: dict[int, RankLog]) -> list[str]:
    """What is wrong with a run, as messages (none: it passed)."""
    problems = []
    expected = train_sequential(cfg)
    for r in range(cfg.ranks):
        log = logs.get(r)
        if log is None or not log.weights:
            problems.append(f"rank {r} did not finish")
            continue
        if not all(log.forward_requires_grad):
            problems.append(f"rank {r}: a training forward ran with grad mode off")
        if any(log.grad_mode_in_eval) or not all(log.grad_mode_after_eval):
            problems.append(f"rank {r}: grad mode wrong in or after its no_grad evaluation")
        for n, w in expected.items():
            if not torch.equal(log.weights[n], w):
                problems.append(f"rank {r}: {n} differs from the sequential computation")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args(argv)
    if args.ranks < 1 or args.steps < 0:
        ap.error("--ranks must be at least 1 and --steps at least 0")  # exit status 2, as kbdemo's
    torch.set_num_threads(1)  # one intra-op thread: the reductions' order is fixed
    cfg = Config(ranks=args.ranks, steps=args.steps)
    try:
        logs = run(cfg)
    except kbthreads.SpawnException as e:  # a rank (or the engine, in a drain) raised
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    prev = 0.0
    for s in range(cfg.steps):
        end = max(logs[r].step_end[s] for r in range(cfg.ranks))
        print(f"step {s}: {end - prev:8.2f} us simulated, eval loss (rank 0) {logs[0].eval_loss[s]:.6f}")
        prev = end
    problems = check(cfg, logs)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"{cfg.ranks} ranks: same weights on every rank, equal to the sequential computation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
