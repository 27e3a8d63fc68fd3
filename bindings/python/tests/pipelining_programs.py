# SPDX-License-Identifier: MIT
"""The pipelining program of tests/test_torch_pipelining.py, run unchanged
on kbthreads ranks and, as a script, in real gloo processes:

    python pipelining_programs.py WORLD OUT_DIR SCHEDULE...

Each rank builds its stages of one seeded model (one Linear + Tanh block per
stage), places them as the schedule wants (one stage per rank; two per
rank, looped (s, s + W) or in a V (r, 2W - 1 - r)), and runs STEPS training
steps of the schedule, each followed by an SGD step. It records, per step,
the losses on the rank holding the last stage, its merged output, and every
local stage's gradients; and the weights after the last optimizer step. A
gloo worker saves its record to OUT_DIR/rank<r>.pt."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed import pipelining

WIDTH = 8
ROWS_PER_MICROBATCH = 2
STEPS = 2

# The placement of each schedule's stages: "one" stage per rank, two per
# rank "looped" (rank r holds stages r and r + W), or in a "v" (r and 2W - 1 - r).
PLACEMENT = {
    "ScheduleGPipe": "one",
    "Schedule1F1B": "one",
    "ScheduleInterleaved1F1B": "looped",
    "ScheduleLoopedBFS": "looped",
    "ScheduleInterleavedZeroBubble": "looped",
    "ScheduleZBVZeroBubble": "v",
    "ScheduleDualPipeV": "v",
}
SCHEDULES = [name for name in PLACEMENT if hasattr(pipelining, name)]


def stage_indices(placement: str, rank: int, world: int) -> list[int]:
    if placement == "one":
        return [rank]
    if placement == "looped":
        return [rank, rank + world]
    return [rank, 2 * world - 1 - rank]


def microbatches(world: int) -> int:
    """Two per stage of a two-stage-per-rank pipeline: DualPipeV needs at least
    as many as stages, the interleaved schedules a multiple of their rounds."""
    return 2 * world


def model(n_stages: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(n_stages)))


def data(world: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    rows = microbatches(world) * ROWS_PER_MICROBATCH
    return torch.randn(rows, WIDTH, generator=g), torch.randn(rows, WIDTH, generator=g)


def loss_fn(y: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return ((y - t) ** 2).mean()


def examples(s: int) -> dict[str, torch.Tensor]:
    """Stage s's static metadata: a microbatch in, one out (what a stage
    receives requires grad, so that its gradient is sent back)."""
    shape = (ROWS_PER_MICROBATCH, WIDTH)
    return {
        "input_args": torch.empty(shape, requires_grad=s > 0),
        "output_args": torch.empty(shape, requires_grad=True),
    }


def run_schedule(schedule: str, rank: int, world: int, static: bool = False) -> dict[str, Any]:
    """One rank's part of STEPS steps of schedule on the default group.
    static: the stages are given their inputs' and outputs' shapes (without,
    they exchange them at the first step, as pickled objects)."""
    placement = PLACEMENT[schedule]
    n_stages = world if placement == "one" else 2 * world
    blocks = model(n_stages)
    mine = stage_indices(placement, rank, world)
    stages = [
        pipelining.PipelineStage(blocks[s], s, n_stages, torch.device("cpu"), **(examples(s) if static else {}))
        for s in mine
    ]
    cls = getattr(pipelining, schedule)
    n_mb = microbatches(world)
    sched = cls(stages[0] if placement == "one" else stages, n_microbatches=n_mb, loss_fn=loss_fn)
    params = [p for s in mine for p in blocks[s].parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    x, t = data(world)
    record: dict[str, Any] = {"stages": mine, "losses": [], "outputs": [], "grads": []}
    for _ in range(STEPS):
        opt.zero_grad()
        losses: list[torch.Tensor] = []
        args = (x,) if 0 in mine else ()
        kwargs: dict[str, Any] = {"target": t, "losses": losses} if n_stages - 1 in mine else {}
        out = sched.step(*args, **kwargs)
        if n_stages - 1 in mine:
            record["losses"].append([loss.detach().clone() for loss in losses])
            record["outputs"].append(out.detach().clone())
        record["grads"].append([p.grad.clone() if p.grad is not None else None for p in params])
        opt.step()
    record["weights"] = [p.detach().clone() for p in params]
    return record


def run_schedules(rank: int, world: int, schedules: list[str]) -> dict[str, dict[str, Any]]:
    """Every schedule in turn, on the default group the caller initialised."""
    return {s: run_schedule(s, rank, world) for s in schedules}


def _gloo_worker(rank: int, world: int, out_dir: str, schedules: list[str]) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out_dir, "store"), rank=rank, world_size=world)
    record = run_schedules(rank, world, schedules)
    torch.save(record, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    # gloo's teardown at interpreter exit sometimes aborts a worker after its
    # results are written ("terminate called without an active exception")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    import torch.multiprocessing as mp

    world_size = int(sys.argv[1])
    mp.spawn(_gloo_worker, args=(world_size, sys.argv[2], sys.argv[3:]), nprocs=world_size, join=True)
