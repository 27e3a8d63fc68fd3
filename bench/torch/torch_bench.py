# SPDX-License-Identifier: MIT
"""torch.distributed on kbthreads against its peers (make bench-torch, part
of make bench): a DDP training step and a 1 MiB all-reduce at N ranks, on

- kbthreads: kbthreads.torch.spawn, the kbthreads backend;
- threaded: PyTorch's own threaded test group
  (torch.testing._internal.distributed.multi_threaded_pg), N threads that
  race;
- gloo: torch.multiprocessing.spawn, N processes on loopback.

Each measurement is its own process, and the processes of one cell run
interleaved with the other implementations' (round r runs every
implementation once, in an order rotated per round), so a change of machine
load falls on all of them. Per step: rank 0's wall time over the timed
steps (after warm-up steps and a barrier) divided by their count. Whole
script: the wall time of the process, from exec to exit, for a script of
--script-steps steps (start-up, rendezvous and teardown included), at N = 4,
8 and 16. Intra-op threads: one (``torch.set_num_threads(1)``) in every
cell, and the DDP step of kbthreads and the threaded group again with
PyTorch's default (one per CPU): the threaded group's ranks can then overlap
their matrix products on the CPUs, which one rank at a time cannot.

The handoff cells (issue 53): a bare Python handoff (kbthreads.yield_) in a
kbthreads.torch spawn whose ranks use torch's generator, ``random`` and
numpy's legacy RandomState, at N = 2, 8, 64, with the per-rank process state
on (the default) and off (the bench-only switch
``kbthreads.torch._rank_process._set_enabled(False)``), side by side:
"yield" yields only (each rank drew from all three first); "draw+yield" draws
one value from each of the three, then yields, every turn. Per handoff:
rank 0's wall time over the timed turns divided by turns x N.

    python bench/torch/torch_bench.py [--ranks 2 4 8 16] [--reps 5] [--out results.json] [--report docs/bench-torch.md]
    python bench/torch/torch_bench.py --handoff    # only the handoff cells (state swap on against off)
    python bench/torch/torch_bench.py --groups script threads   # some groups of cells only (GROUPS)
    python bench/torch/torch_bench.py --smoke      # seconds: every cell once, tiny sizes (no time is judged)
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

IMPLS = ["kbthreads", "threaded", "gloo"]
TIMED = "kbthreads-timed"  # the DDP step with simulated time on (network engine, FLOP counting)
WORKLOADS = ["ddp", "allreduce"]
ALLREDUCE_ELEMS = (1 << 20) // 4  # 1 MiB of float32
HANDOFF_SIDES = ["state-on", "state-off"]  # kbthreads.torch's per-rank process state on / off
HANDOFF_WORKLOADS = ["yield", "draw+yield"]
HANDOFF_RANKS = [2, 8, 64]
HANDOFF_TOTAL = 100_000  # timed handoffs per measurement: turns = HANDOFF_TOTAL // N
SCRIPT_RANKS = [4, 8, 16]
THREAD_IMPLS = ["kbthreads", "threaded"]  # the DDP step again with PyTorch's default intra-op threads
DEFAULT_THREADS = "ddp-default-threads"  # those cells' workload name
# the groups of cells: per step (one intra-op thread), the DDP step with the
# default threads, the whole script, the handoff
GROUPS = ["step", "threads", "script", "handoff"]
THREADS_VAR = "KB_TORCH_BENCH_THREADS"  # "default": leave torch's intra-op threads as they are


def _set_threads() -> None:
    import torch

    if os.environ.get(THREADS_VAR) != "default":
        torch.set_num_threads(1)


# ---- the child: one measurement ------------------------------------------------------------------
def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))


def _body(rank: int, n: int, workload: str, warm: int, steps: int, res: dict) -> None:
    """What every implementation runs in a rank, after its group exists."""
    import torch
    import torch.distributed as dist

    if workload == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(rank)
        x, y = torch.randn(32, 256, generator=g), torch.randn(32, 256, generator=g)

        def step() -> None:
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    else:
        t = torch.ones(ALLREDUCE_ELEMS)

        def step() -> None:
            dist.all_reduce(t)

    for _ in range(warm):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    if rank == 0:
        res["per_step"] = (time.perf_counter() - t0) / steps


def _kbthreads(n: int, workload: str, warm: int, steps: int, out: str, timed: bool = False) -> None:
    import torch.distributed as dist

    import kbthreads.torch as kbt

    res: dict = {}

    def rank_main(rank: int) -> None:
        dist.init_process_group("gloo")
        _body(rank, n, workload, warm, steps, res)
        dist.destroy_process_group()

    if timed:  # simulated time: the network engine and FLOP counting in every rank
        kbt.spawn(rank_main, nprocs=n, network=kbt.Network(5e-6, 25e9), device_flops=1e12)
    else:
        kbt.spawn(rank_main, nprocs=n)
    Path(out).write_text(json.dumps(res))


def _kbthreads_timed(n: int, workload: str, warm: int, steps: int, out: str) -> None:
    _kbthreads(n, workload, warm, steps, out, timed=True)


def _threaded(n: int, workload: str, warm: int, steps: int, out: str) -> None:
    import threading

    import torch.distributed as dist

    from kbthreads.torch import _compat  # (PyTorch's private names go through it)

    exception_handle = _compat.install_threaded_test_group()
    store = dist.HashStore()
    res: dict = {}
    errors: list = []

    def rank_main(rank: int) -> None:
        try:
            dist.init_process_group("threaded", rank=rank, world_size=n, store=store)
            _body(rank, n, workload, warm, steps, res)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            exception_handle(e)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    Path(out).write_text(json.dumps(res))
    # exits normally, as a script would (its threads are done)


def _gloo_rank(rank: int, n: int, workload: str, warm: int, steps: int, out: str) -> None:
    import torch.distributed as dist

    _set_threads()
    dist.init_process_group("gloo", rank=rank, world_size=n)
    res: dict = {}
    _body(rank, n, workload, warm, steps, res)
    if rank == 0:
        Path(out).write_text(json.dumps(res))
    dist.barrier()
    # Teardown of gloo processes has hung here before (destroy_process_group
    # or interpreter exit); the launcher's exit ends it.
    os._exit(0)


def _gloo(n: int, workload: str, warm: int, steps: int, out: str) -> None:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    mp.spawn(_gloo_rank, args=(n, workload, warm, steps, out), nprocs=n, join=True)


def _handoff(n: int, workload: str, warm: int, turns: int, out: str, state: bool) -> None:
    import random

    import numpy
    import torch

    import kbthreads
    import kbthreads.torch as kbt
    from kbthreads.torch import _rank_process

    _rank_process._set_enabled(state)  # the bench's switch: off keeps nothing per rank
    res: dict = {}
    draw = workload == "draw+yield"

    def rank_main(rank: int) -> None:
        torch.manual_seed(rank)
        random.seed(rank)
        numpy.random.seed(rank)
        torch.rand(1), random.random(), numpy.random.rand()  # all three in use in every rank
        for _ in range(warm):
            kbthreads.yield_()
        t0 = time.perf_counter()
        for _ in range(turns):
            if draw:
                torch.rand(1), random.random(), numpy.random.rand()
            kbthreads.yield_()
        if rank == 0:
            res["per_handoff"] = (time.perf_counter() - t0) / (turns * n)

    kbt.spawn(rank_main, nprocs=n)
    Path(out).write_text(json.dumps(res))


def child(argv: list[str]) -> None:
    impl, n, workload, warm, steps, out = argv[0], int(argv[1]), argv[2], int(argv[3]), int(argv[4]), argv[5]
    _set_threads()
    if impl in HANDOFF_SIDES:
        _handoff(n, workload, warm, steps, out, impl == "state-on")
        return
    impls = {"kbthreads": _kbthreads, "threaded": _threaded, "gloo": _gloo, "kbthreads-timed": _kbthreads_timed}
    impls[impl](n, workload, warm, steps, out)


# ---- the parent: the matrix, interleaved ---------------------------------------------------------
def measure(impl: str, n: int, workload: str, warm: int, steps: int, tmp: Path, threads: str = "1") -> dict:
    out = tmp / f"{impl}-{n}-{workload}.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, **{THREADS_VAR: threads})
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, __file__, "--child", impl, str(n), workload, str(warm), str(steps), str(out)],
                       capture_output=True, text=True, timeout=900, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0 or not out.exists():
        return {"error": (r.stderr or r.stdout)[-2000:]}
    res = json.loads(out.read_text())
    res["script"] = wall
    return res


def loadavg() -> float:
    return os.getloadavg()[0]


def run_handoff(cells: dict, ranks: list[int], reps: int, total: int, tmp: Path) -> None:
    """The handoff cells: state on and off interleaved, the order rotated per round."""
    for rep in range(reps):
        for workload in HANDOFF_WORKLOADS:
            for n in ranks:
                order = HANDOFF_SIDES[rep % 2:] + HANDOFF_SIDES[: rep % 2]
                for side in order:
                    turns = max(1, total // n)
                    m = measure(side, n, workload, max(1, turns // 20), turns, tmp)
                    cells.setdefault(f"handoff/{workload}/{n}/{side}", []).append(m)
                    print(f"rep {rep} handoff {workload:10} N={n:<3} {side:9} "
                          + (f"{m['per_handoff'] * 1e6:8.2f} us" if "per_handoff" in m else "FAILED"), flush=True)


def run(ranks: list[int], reps: int, warm: int, steps: int, script_steps: int, tmp: Path,
        handoff_ranks: list[int], handoff_total: int, groups: list[str], script_ranks: list[int]) -> dict:
    cells: dict = {}
    start_load = loadavg()

    def interleaved(key: str, impls: list[str], rep: int, n: int, workload: str, w: int, st: int,
                    threads: str = "1") -> None:
        for impl in impls[rep % len(impls):] + impls[: rep % len(impls)]:
            m = measure(impl, n, workload, w, st, tmp, threads)
            cells.setdefault(f"{key}/{n}/{impl}", []).append(m)
            shown = (f"per step {m['per_step'] * 1e3:8.3f} ms" if key != "script" and "per_step" in m
                     else f"script {m['script']:.2f} s" if "script" in m else "FAILED")
            print(f"rep {rep} {key:19} N={n:<3} {impl:15} {shown}", flush=True)

    for rep in range(reps):
        for n in ranks:
            if "step" in groups:
                for workload in WORKLOADS:
                    interleaved(workload, IMPLS + [TIMED] if workload == "ddp" else IMPLS, rep, n, workload,
                                warm, steps)
            if "threads" in groups:
                interleaved(DEFAULT_THREADS, THREAD_IMPLS, rep, n, "ddp", warm, steps, "default")
    # the whole script: a DDP script of script_steps steps, start-up included
    if "script" in groups:
        for rep in range(reps):
            for n in script_ranks:
                interleaved("script", IMPLS, rep, n, "ddp", 0, script_steps)
    if "handoff" in groups:
        run_handoff(cells, handoff_ranks, reps, handoff_total, tmp)
    return {"load_start": start_load, "load_end": loadavg(), "reps": reps, "warm": warm, "steps": steps,
            "script_steps": script_steps, "cells": cells, "torch": _torch_version(), "ncpu": os.cpu_count()}


def _torch_version() -> str:
    import torch

    return torch.__version__


def _median(ms: list[dict], key: str) -> float | None:
    xs = [m[key] for m in ms if key in m]
    return statistics.median(xs) if xs else None


def report_handoff(data: dict) -> list[str]:
    """The handoff table (empty when the run had no handoff cells)."""
    cells = data["cells"]
    keys = [k for k in cells if k.startswith("handoff/")]
    if not keys:
        return []
    lines = [
        "",
        "A bare handoff (`kbthreads.yield_`) in a kbthreads.torch spawn whose ranks use torch's generator, `random` "
        "and numpy (docs/rank-state.md, *Process-wide state per rank*): the per-rank process state on (the default) "
        "and off (a bench-only switch), per handoff. *yield*: each rank drew from all three once, then only yields; "
        "*draw+yield*: every turn draws one value from each, then yields.",
        "",
        "| workload | N | off us | on us | on / off |",
        "|---|---|---|---|---|",
    ]
    ranks = sorted({int(k.split("/")[2]) for k in keys})
    for workload in HANDOFF_WORKLOADS:
        for n in ranks:
            on = _median(cells.get(f"handoff/{workload}/{n}/state-on", []), "per_handoff")
            off = _median(cells.get(f"handoff/{workload}/{n}/state-off", []), "per_handoff")
            if on is None and off is None:
                continue
            lines.append(f"| {workload} | {n} | {'failed' if off is None else f'{off * 1e6:.2f}'} | "
                         f"{'failed' if on is None else f'{on * 1e6:.2f}'} | "
                         f"{'-' if on is None or off is None else f'{on / off:.2f}x'} |")
    return lines


def _ms(x: float | None) -> str:
    return "failed" if x is None else f"{x * 1e3:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def _ranks(cells: dict, key: str) -> list[int]:
    return sorted({int(k.split("/")[1]) for k in cells if k.startswith(key + "/")})


def report_steps(data: dict) -> list[str]:
    """Per step, one intra-op thread: the three implementations, and what simulated time costs."""
    cells = data["cells"]
    ranks = sorted(set(_ranks(cells, "ddp")) | set(_ranks(cells, "allreduce")))
    if not ranks:
        return []
    lines = [
        "",
        "## Per step",
        "",
        f"Rank 0's wall time over {data['steps']} steps after {data['warm']} warm-up steps, one intra-op thread "
        "(`torch.set_num_threads(1)`). The DDP step trains a 256-1024-256 MLP (0.5 M parameters, batch 32 per "
        "rank); the all-reduce sums 1 MiB of float32.",
        "",
        "| workload | N | kbthreads ms | threaded ms | gloo ms | kbthreads / threaded | gloo / kbthreads |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload in WORKLOADS:
        for n in ranks:
            v = {i: _median(cells.get(f"{workload}/{n}/{i}", []), "per_step") for i in IMPLS}
            lines.append(f"| {workload} | {n} | {_ms(v['kbthreads'])} | {_ms(v['threaded'])} | {_ms(v['gloo'])} | "
                         f"{_ratio(v['kbthreads'], v['threaded'])} | {_ratio(v['gloo'], v['kbthreads'])} |")
    lines += [
        "",
        "What simulated time costs (`network=`, FLOP counting in every rank): the same DDP step with and without it.",
        "",
        "| N | kbthreads ms | with simulated time ms | ratio |",
        "|---|---|---|---|",
    ]
    for n in ranks:
        a = _median(cells.get(f"ddp/{n}/kbthreads", []), "per_step")
        b = _median(cells.get(f"ddp/{n}/{TIMED}", []), "per_step")
        lines.append(f"| {n} | {_ms(a)} | {_ms(b)} | {_ratio(b, a)} |")
    return lines


def report_threads(data: dict) -> list[str]:
    """The DDP step against the threaded group with one intra-op thread and with PyTorch's default."""
    cells = data["cells"]
    ranks = _ranks(cells, DEFAULT_THREADS)
    if not ranks:
        return []
    lines = [
        "",
        "## The DDP step against PyTorch's threaded group, by intra-op threads",
        "",
        f"The DDP step per step with one intra-op thread (the cells above) and with PyTorch's default "
        f"({data.get('ncpu', '?')} here, one per CPU). Target: kbthreads within 1.5x of the threaded group with "
        "the default, at every N.",
        "",
        "| N | kbthreads ms, 1 | threaded ms, 1 | ratio, 1 | kbthreads ms, default | threaded ms, default "
        "| ratio, default |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in ranks:
        k1 = _median(cells.get(f"ddp/{n}/kbthreads", []), "per_step")
        t1 = _median(cells.get(f"ddp/{n}/threaded", []), "per_step")
        kd = _median(cells.get(f"{DEFAULT_THREADS}/{n}/kbthreads", []), "per_step")
        td = _median(cells.get(f"{DEFAULT_THREADS}/{n}/threaded", []), "per_step")
        lines.append(f"| {n} | {_ms(k1)} | {_ms(t1)} | {_ratio(k1, t1)} | {_ms(kd)} | {_ms(td)} | {_ratio(kd, td)} |")
    return lines


def report_script(data: dict) -> list[str]:
    """The whole script, from exec to exit, at each N."""
    cells = data["cells"]
    ranks = _ranks(cells, "script")
    if not ranks:
        return []
    lines = [
        "",
        "## The whole script",
        "",
        f"A DDP script of {data['script_steps']} steps, from exec to exit: interpreter and torch start-up, "
        "rendezvous, training, teardown (one process for kbthreads and the threaded group, N + 1 for gloo). "
        "Target: gloo processes at least 3x slower than kbthreads at N = 8 and 16.",
        "",
        "| N | kbthreads s | threaded s | gloo s | gloo / kbthreads |",
        "|---|---|---|---|---|",
    ]
    for n in ranks:
        v = {i: _median(cells.get(f"script/{n}/{i}", []), "script") for i in IMPLS}
        lines.append(f"| {n} | " + " | ".join("failed" if v[i] is None else f"{v[i]:.2f}" for i in IMPLS)
                     + f" | {_ratio(v['gloo'], v['kbthreads'])} |")
    return lines


def report(data: dict) -> str:
    cells = data["cells"]
    if not any(not k.startswith("handoff/") for k in cells):  # a --handoff run
        return "\n".join(["# A handoff with the per-rank process state on and off", "",
                           f"PyTorch {data['torch']}; medians of {data['reps']} processes per cell, on and off "
                           f"interleaved. Load average {data['load_start']:.2f} at the start, "
                           f"{data['load_end']:.2f} at the end.", *report_handoff(data), ""])
    lines = [
        "# torch.distributed on kbthreads and its peers",
        "",
        "Made by `make bench-torch` (part of `make bench`; `bench/torch/torch_bench.py`). Medians of "
        f"{data['reps']} processes per cell, the implementations interleaved (each round runs all of them, in an "
        f"order rotated per round); PyTorch {data['torch']}, CPU, {data.get('ncpu', '?')} CPUs. Load average "
        f"{data['load_start']:.2f} at the start, {data['load_end']:.2f} at the end.",
        "",
        "- **kbthreads**: `kbthreads.torch.spawn`, one rank running at a time, deterministic.",
        "- **threaded**: PyTorch's threaded test group (`multi_threaded_pg`), N threads racing for the GIL.",
        "- **gloo**: `torch.multiprocessing.spawn`, N processes on loopback.",
        *report_steps(data),
        *report_threads(data),
        *report_script(data),
        *report_handoff(data),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--script-steps", type=int, default=20)
    p.add_argument("--out", default=None, help="the results as JSON")
    p.add_argument("--report", default=None, help="write the markdown report here")
    p.add_argument("--from-json", default=None, help="report from an earlier --out without running")
    p.add_argument("--smoke", action="store_true", help="every cell once with tiny sizes: proves it runs")
    p.add_argument("--groups", nargs="+", choices=GROUPS, default=GROUPS, help="which groups of cells to run")
    p.add_argument("--script-ranks", type=int, nargs="+", default=SCRIPT_RANKS)
    p.add_argument("--handoff", action="store_true",
                   help="only the handoff cells: a bare handoff with the per-rank process state on and off")
    p.add_argument("--handoff-ranks", type=int, nargs="+", default=HANDOFF_RANKS)
    p.add_argument("--handoff-total", type=int, default=HANDOFF_TOTAL, help="timed handoffs per measurement")
    a = p.parse_args()
    if a.from_json:
        data = json.loads(Path(a.from_json).read_text())
    else:
        if a.smoke:
            a.ranks, a.reps, a.warm, a.steps, a.script_steps, a.script_ranks = [2], 1, 1, 2, 2, [2]
            a.handoff_ranks, a.handoff_total = [2], 200
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            data = run(a.ranks, a.reps, a.warm, a.steps, a.script_steps, Path(tmp), a.handoff_ranks,
                       a.handoff_total, ["handoff"] if a.handoff else a.groups, a.script_ranks)
        if a.out:
            Path(a.out).write_text(json.dumps(data, indent=1))
    failed = [k for k, ms in data["cells"].items() if any("error" in m for m in ms)]
    text = report(data)
    if a.report:
        Path(a.report).write_text(text)
    print(text)
    for k in failed:
        print(f"torch_bench: {k} failed:\n" + next(m["error"] for m in data["cells"][k] if "error" in m),
              file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
