# SPDX-License-Identifier: MIT
"""A 3-D parallel Llama-3-style training step (data x tensor x pipeline),
made parallel with PyTorch's own APIs and predicted on a simulated cluster.

    PYTHONPATH=bindings/python python examples/llama_dryrun.py --dp 32 --tp 8 --pp 4

runs 1,024 ranks as threads of this process, each holding its share of a
model with Llama 3 8B's layer shapes as fake tensors (no memory, no
arithmetic: every op computes only its output's shape), and prints the
predicted step time, the exposed communication, each pipeline stage's peak
memory and the pipeline bubble; ``--timeline`` and ``--plot`` write the
run's timeline (Chrome trace events) and a chart of it. ``--real`` runs
the same program on real tensors (use a tiny ``--dim``) and prints the
losses; tests/test_torch_llama_dryrun.py checks them against the unsplit
model.

How the model is made parallel, as torchtitan does it with PyTorch's APIs:

- ``init_device_mesh("cpu", (pp, dp, tp))``: the ranks as a 3-D mesh;
- tensor parallelism (``parallelize_module`` on the tp mesh): the
  attention's query/key/value and the feed forward's w1/w3 split by columns
  (``ColwiseParallel``), the attention's output and w2 by rows
  (``RowwiseParallel``), the norms sequence-parallel (``SequenceParallel``,
  activations between blocks split along the sequence), each sub-layer's
  input gathered first (``PrepareModuleInput``); the embedding row-wise, the
  head column-wise;
- data parallelism: ``fully_shard`` (FSDP2) on each block and on the stage,
  over the dp mesh;
- pipeline parallelism: each pp rank builds only its stage's blocks (the
  embedding with the first, the head with the last) and runs them as a
  ``torch.distributed.pipelining.PipelineStage`` under a schedule
  (``Schedule1F1B`` by default) over the pp mesh's group.

The model is in examples/llama_model.py.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as pp_schedules
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.nn import Module

sys.path.insert(0, __file__.rsplit("/", 1)[0])  # llama_model.py beside this file, however this one was found
from llama_fake_gaps import AnswerPipelineVote  # noqa: E402
from llama_model import LLAMA3_8B, Llama, LlamaConfig, cross_entropy  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402


@dataclass(frozen=True)
class Plan:
    """The run: the parallel layout, the model, the batch, the cluster."""

    dp: int
    tp: int
    pp: int
    model: LlamaConfig
    seq: int  # tokens per sequence
    microbatch: int  # sequences per microbatch
    microbatches: int  # per step, per data-parallel rank
    steps: int
    schedule: str
    real: bool  # real tensors (a check at a tiny size) or fake ones (a dry run at full size)
    dtype: torch.dtype
    optimizer: str = "adamw"  # or "sgd": its step moves by the gradient itself, so a check sees its scale
    seed: int = 0

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    def stage_layers(self, stage: int) -> range:
        """The global indices of the blocks stage ``stage`` holds: an even
        split, earlier stages taking one more when it does not divide."""
        base, extra = divmod(self.model.n_layers, self.pp)
        start = stage * base + min(stage, extra)
        return range(start, start + base + (1 if stage < extra else 0))

    def check(self) -> None:
        self.model.check()
        if min(self.dp, self.tp, self.pp, self.steps, self.microbatch, self.microbatches) < 1:
            raise ValueError("--dp, --tp, --pp, --steps, --microbatch and --microbatches must be at least 1")
        if self.model.n_layers < self.pp:
            raise ValueError(f"{self.model.n_layers} layers cannot fill {self.pp} pipeline stages")
        if self.model.n_kv_heads % self.tp or self.seq % self.tp:
            raise ValueError(f"--tp {self.tp} must divide the KV heads ({self.model.n_kv_heads}) and --seq ({self.seq})")
        if self.seq > self.model.max_seq:
            raise ValueError(f"--seq {self.seq} is beyond the model's {self.model.max_seq} positions")


def batch(plan: Plan, step: int, dp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Data-parallel rank ``dp_rank``'s share of step ``step``'s batch:
    token ids and their next-token targets. Real runs draw them from a
    generator seeded by the step and the share, so the unsplit model reads
    the same global batch; fake runs make them under the rank's fake mode."""
    rows = plan.microbatch * plan.microbatches
    shape = (rows, plan.seq + 1)
    if plan.real:
        g = torch.Generator().manual_seed(plan.seed * 7919 + step * plan.dp + dp_rank)
        ids = torch.randint(plan.model.vocab, shape, generator=g)
    else:
        ids = torch.randint(plan.model.vocab, shape)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def apply_tp(model: Llama, tp_mesh: DeviceMesh) -> None:
    """Tensor and sequence parallelism over ``tp_mesh``. Between blocks an
    activation is this rank's slice of the sequence (Shard(1)); each norm
    works on its slice, and each sub-layer gathers the whole sequence
    before its column-split projections and scatters it again after its
    row-split one. Every rank initialised the same weights from the same
    seed, so each keeps its own slice (src_data_rank=None: nothing is sent)."""
    top: dict[str, Any] = {}
    if model.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
    if model.norm is not None:
        top["norm"] = SequenceParallel()
        top["output"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    if top:
        parallelize_module(model, tp_mesh, top, src_data_rank=None)
    block_plan = {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(
            input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)
        ),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward.w3": ColwiseParallel(),
    }
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, block_plan, src_data_rank=None)


def apply_fsdp(model: Llama, dp_mesh: DeviceMesh, pipelined: bool) -> None:
    """FSDP2 over ``dp_mesh``: each block its own unit, then the rest of the
    stage. Under a pipeline a block stays gathered from its forward to its
    backward (reshard_after_forward=False), as torchtitan does: every
    microbatch would gather it again otherwise."""
    for block in model.layers.values():
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=not pipelined)
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=not pipelined)


def make_optimizer(plan: Plan, model: Module) -> torch.optim.Optimizer:
    if plan.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.5)
    return torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)


def rank_main(rank: int, plan: Plan, out: dict[str, Any]) -> None:
    dist.init_process_group("gloo")
    # The mesh before any fake mode: its setup reads real tensors.
    mesh = init_device_mesh("cpu", (plan.pp, plan.dp, plan.tp), mesh_dim_names=("pp", "dp", "tp"))
    stage, dp_rank = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    if plan.real:
        mode: Any = contextlib.nullcontext()
        model = Llama(plan.model, plan.stage_layers(stage), seed=plan.seed, dtype=plan.dtype)
    else:
        # A dry run: the stage is built under the rank's own FakeTensorMode, so
        # every tensor is a FakeTensor of that mode and every op computes only
        # its output's shape (no memory, no arithmetic). It is made parallel
        # outside the mode (an op on a fake tensor still runs in its mode)
        # because FSDP2 over a TP mesh makes a DeviceMesh, whose setup reads
        # real tensors.
        from torch._subclasses.fake_tensor import FakeTensorMode  # a public class at a private path

        mode = FakeTensorMode()
        with mode:
            model = Llama(plan.model, plan.stage_layers(stage), seed=plan.seed, dtype=plan.dtype)
    if plan.tp > 1:
        apply_tp(model, mesh["tp"])
    if plan.dp > 1:
        apply_fsdp(model, mesh["dp"], pipelined=plan.pp > 1)
    with mode, (contextlib.nullcontext() if plan.real else AnswerPipelineVote()):
        opt = make_optimizer(plan, model)
        schedule = None
        if plan.pp > 1:
            x, y = stage_io(plan, stage)  # the stage's shapes given, so the pipeline infers none at run time
            pstage = PipelineStage(
                model, stage, plan.pp, torch.device("cpu"), input_args=x, output_args=y, group=mesh["pp"].get_group()
            )
            schedule = getattr(pp_schedules, plan.schedule)(
                pstage, n_microbatches=plan.microbatches, loss_fn=cross_entropy
            )
        times, losses = [], []
        for step in range(plan.steps):
            tokens, targets = batch(plan, step, dp_rank)
            t0 = kbt.sim_time() if "timed" in out else 0.0
            step_losses = run_step(plan, model, schedule, stage, tokens, targets)
            opt.step()
            opt.zero_grad()
            if "timed" in out:
                times.append(kbt.sim_time() - t0)
            if plan.real and step_losses:
                losses.append(sum(float(x) for x in step_losses) / len(step_losses))
    out.setdefault("step_times", {})[rank] = times
    if losses:
        out.setdefault("losses", {})[rank] = (dp_rank, losses)
    dist.destroy_process_group()


def stage_io(plan: Plan, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Example tensors of one microbatch's input and output of ``stage``:
    token ids into the first stage, logits out of the last, this rank's
    slice of the sequence of hidden states between stages (sequence
    parallelism splits it over the tp ranks). Activations require grad: a
    gradient flows back across each stage boundary."""
    mb, cfg = plan.microbatch, plan.model
    hidden = torch.empty(mb, plan.seq // plan.tp, cfg.dim, dtype=plan.dtype, requires_grad=True)
    x = torch.empty(mb, plan.seq, dtype=torch.long) if stage == 0 else hidden
    y = torch.empty(mb, plan.seq, cfg.vocab, dtype=plan.dtype, requires_grad=True) if stage == plan.pp - 1 else hidden
    return x, y


def run_step(
    plan: Plan, model: Module, schedule: Any, stage: int, tokens: torch.Tensor, targets: torch.Tensor
) -> list[torch.Tensor]:
    """One forward and backward of this rank's share of the batch; the
    microbatches' losses where this rank computes them (the last stage)."""
    if schedule is None:  # no pipeline: the microbatches one after another, gradients accumulated
        losses = []
        for x, t in zip(tokens.chunk(plan.microbatches), targets.chunk(plan.microbatches)):
            loss = cross_entropy(model(x), t)
            (loss / plan.microbatches).backward()
            losses.append(loss.detach())
        return losses
    losses = []
    if stage == 0:
        schedule.step(tokens)
    elif stage == plan.pp - 1:
        schedule.step(target=targets, losses=losses, return_outputs=False)  # only the losses: no logits kept
    else:
        schedule.step()
    return [x.detach() for x in losses]


def unsplit_losses(plan: Plan) -> list[float]:
    """The same steps on one thread with the whole model and the whole
    batch (every data-parallel share, in order): what the parallel run's
    mean loss must equal at each step. The schedule and FSDP average the
    microbatches' and shares' gradients, equal in size, so the mean over
    them is this batch's mean."""
    model = Llama(plan.model, seed=plan.seed, dtype=plan.dtype)
    opt = make_optimizer(plan, model)
    losses = []
    for step in range(plan.steps):
        shares = [batch(plan, step, d) for d in range(plan.dp)]
        loss = cross_entropy(model(torch.cat([x for x, _ in shares])), torch.cat([t for _, t in shares]))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    return losses


def mean_losses(out: dict[str, Any]) -> list[float]:
    """Per step, the mean of the last-stage ranks' losses (each the mean of
    its microbatches'; tensor-parallel peers hold equal ones)."""
    by_step: dict[int, list[float]] = {}
    for _dp, ls in sorted(out.get("losses", {}).values()):
        for s, v in enumerate(ls):
            by_step.setdefault(s, []).append(v)
    return [sum(vs) / len(vs) for _s, vs in sorted(by_step.items())]


# ---- the command line ---------------------------------------------------------------------------
def parse(argv: list[str] | None) -> tuple[Plan, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--layers-per-stage", type=int, default=1, help="blocks per pipeline stage (Llama 3 8B: 32 in all)")
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--microbatch", type=int, default=1, help="sequences per microbatch")
    p.add_argument("--microbatches", type=int, default=None, help="per step (default: 2 x --pp)")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--schedule", default="Schedule1F1B", choices=["ScheduleGPipe", "Schedule1F1B"])
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    p.add_argument("--real", action="store_true", help="real tensors (use tiny shapes) and print the losses")
    p.add_argument("--dim", type=int, default=LLAMA3_8B.dim)
    p.add_argument("--heads", type=int, default=LLAMA3_8B.n_heads)
    p.add_argument("--kv-heads", type=int, default=LLAMA3_8B.n_kv_heads)
    p.add_argument("--ffn", type=int, default=LLAMA3_8B.ffn_dim)
    p.add_argument("--vocab", type=int, default=LLAMA3_8B.vocab)
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16"], help="default: bfloat16 fake, float32 real")
    p.add_argument("--device-tflops", type=float, default=400.0, help="the simulated device's rate, TFLOP/s")
    p.add_argument("--ranks-per-node", type=int, default=8)
    p.add_argument("--timeline", help="write the timeline here (Chrome trace events: open in Perfetto)")
    p.add_argument("--plot", help="write an SVG chart of the timeline here")
    p.add_argument("--no-memory", action="store_true", help="do not track each rank's memory (faster)")
    p.add_argument("--no-sim", action="store_true", help="no simulated time (the real check's speed)")
    a = p.parse_args(argv)
    cfg = replace(
        LLAMA3_8B,
        dim=a.dim,
        n_heads=a.heads,
        n_kv_heads=a.kv_heads,
        ffn_dim=a.ffn,
        vocab=a.vocab,
        n_layers=a.layers_per_stage * a.pp,
        max_seq=max(a.seq, 1),
    )
    dtype = torch.float32 if (a.dtype or ("float32" if a.real else "bfloat16")) == "float32" else torch.bfloat16
    plan = Plan(
        dp=a.dp,
        tp=a.tp,
        pp=a.pp,
        model=cfg,
        seq=a.seq,
        microbatch=a.microbatch,
        microbatches=a.microbatches if a.microbatches is not None else 2 * a.pp,
        steps=a.steps,
        schedule=a.schedule,
        real=a.real,
        dtype=dtype,
        optimizer=a.optimizer,
    )
    try:
        if a.layers_per_stage < 1:
            raise ValueError("--layers-per-stage must be at least 1")
        plan.check()
    except ValueError as e:
        p.error(str(e))
    if a.no_sim and (a.timeline or a.plot):
        p.error("--timeline and --plot need simulated time (leave out --no-sim)")
    return plan, a


def network(ranks_per_node: int) -> kbt.Network:
    """NVLink-class links inside a node of ``ranks_per_node`` devices,
    400 Gb/s InfiniBand-class links between nodes."""
    return kbt.Network(
        latency=2e-6,
        bandwidth=450e9,
        ranks_per_node=ranks_per_node,
        inter_latency=10e-6,
        inter_bandwidth=50e9,
    )


def run(plan: Plan, a: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """The spawn: what the ranks left in ``out``, and the SimRun (None with --no-sim)."""
    torch.set_num_threads(1)
    out: dict[str, Any] = {}
    if a.no_sim:
        kbt.spawn(rank_main, args=(plan, out), nprocs=plan.world)
        return out, None
    out["timed"] = True
    sim = kbt.spawn(
        rank_main,
        args=(plan, out),
        nprocs=plan.world,
        network=network(a.ranks_per_node),
        device_flops=a.device_tflops * 1e12,
        memory=not a.no_memory,
    )
    return out, sim



MEMORY_KINDS = ("parameters", "gradients", "optimizer_state", "activations", "temporaries")
LOSS_RTOL = 1e-5  # float32 sums in another order (tensor-parallel splits, microbatches) differ by rounding


def report(plan: Plan, a: argparse.Namespace, out: dict[str, Any], sim: Any) -> list[str]:
    """The printout: the layout, then (with simulated time) the step time,
    the exposed communication, per stage its peak memory and bubble."""
    stage_of = [r // (plan.dp * plan.tp) for r in range(plan.world)]  # the mesh (pp, dp, tp) in row-major order
    m = plan.model
    lines = [
        f"{plan.world} ranks: dp {plan.dp} x tp {plan.tp} x pp {plan.pp}; {m.n_layers} blocks "
        f"({len(plan.stage_layers(0))} per stage) of dim {m.dim}, {m.n_heads} heads ({m.n_kv_heads} KV), "
        f"ffn {m.ffn_dim}, vocab {m.vocab}; {'real' if plan.real else 'fake'} {str(plan.dtype).removeprefix('torch.')}"
        f" tensors; {plan.microbatches} microbatches of {plan.microbatch}x{plan.seq} tokens per dp rank, "
        f"{plan.schedule if plan.pp > 1 else 'no pipeline'}"
    ]
    if plan.real:
        for i, (got, want) in enumerate(zip(mean_losses(out), unsplit_losses(plan))):
            lines.append(f"step {i}: loss {got:.6f}, the unsplit model's {want:.6f} (difference {got - want:+.1e})")
            if abs(got - want) > LOSS_RTOL * abs(want):
                out["mismatch"] = True
    if sim is None:
        return lines
    s = sim.summary()
    ranks = s["ranks"]
    step = max(t[-1] for t in out["step_times"].values())
    lines.append(
        f"predicted step time {step * 1e3:.3f} ms (last step; run {s['time'] * 1e3:.3f} ms; {s['network']}; "
        f"{a.device_tflops:g} TFLOP/s devices)"
    )
    exposed = max(v["exposed_communication"] for v in ranks.values())
    hidden = max(v["hidden_communication"] for v in ranks.values())
    lines.append(f"exposed communication {exposed * 1e3:.3f} ms (worst rank), hidden {hidden * 1e3:.3f} ms")
    ideal = (plan.pp - 1) / (plan.microbatches + plan.pp - 1)
    lines.append(f"(the schedule's ideal bubble: {ideal:.1%}; memory at the peak of the stage's fullest rank, MiB)")
    lines.append("stage  ranks  compute ms  idle ms  bubble      peak     param      grad     optim       act      temp")
    for st in range(plan.pp):
        mine = [v for r, v in ranks.items() if stage_of[int(r)] == st]
        compute = max(v["compute"] for v in mine)
        idle = max(v["idle"] for v in mine)
        bubble = idle / s["time"] if s["time"] > 0 else 0.0
        row = f"{st:5} {len(mine):6} {compute * 1e3:11.3f} {idle * 1e3:8.3f} {bubble:7.1%}"
        peaks = [v["memory"]["peak"] for v in mine if "memory" in v]
        if peaks:
            top = max(peaks, key=lambda p: p["total"])
            row += "".join(f" {top.get(k, 0) / 2**20:9.1f}" for k in ("total", *MEMORY_KINDS))
        lines.append(row)
    lines.append("collective            count         bytes    time ms")
    for k, v in sorted(s["collectives"].items()):
        lines.append(f"{k:20} {v['count']:6} {v['bytes']:13} {v['time'] * 1e3:10.3f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    plan, a = parse(argv)
    out, sim = run(plan, a)
    print("\n".join(report(plan, a, out, sim)))
    if out.get("mismatch"):
        print(f"FAILED: the parallel losses differ from the unsplit model's by more than {LOSS_RTOL:g}", file=sys.stderr)
        return 1
    if sim is not None:
        if a.timeline:
            sim.write_timeline(a.timeline)
            print(f"timeline: {a.timeline} (open in Perfetto)")
        if a.plot:
            sim.write_plot(a.plot)
            print(f"plot: {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
