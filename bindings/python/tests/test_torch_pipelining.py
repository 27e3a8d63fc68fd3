# SPDX-License-Identifier: MIT
"""torch.distributed.pipelining's first step on kbthreads ranks (issue 53,
cause 1: a received activation is written into a buffer that requires grad;
before outputs were written as gloo writes them, ScheduleGPipe and
Schedule1F1B raised "a leaf Variable that requires grad is being used in an
in-place operation" at their second step, receiving into the first step's
buffers). Two stages, four microbatches, two steps: each schedule's losses
and gradients equal those of the unsplit model run microbatch by
microbatch on one thread."""
from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402

pipelining = pytest.importorskip("torch.distributed.pipelining")

MICROBATCHES = 4
STEPS = 2


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh())


def _data() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)


def _loss(y: Any, t: Any) -> Any:
    return ((y - t) ** 2).mean()


def _expected() -> tuple[list[float], list[Any]]:
    """Losses per microbatch and gradients (averaged over the microbatches,
    as the schedules scale them) of the unsplit model."""
    model = _model()
    x, t = _data()
    losses = []
    for xs, ts in zip(x.chunk(MICROBATCHES), t.chunk(MICROBATCHES)):
        loss = _loss(model(xs), ts)
        (loss / MICROBATCHES).backward()
        losses.append(loss.item())
    return losses, [p.grad for p in model.parameters()]


def _stage_rank(rank: int, schedule: str, out: dict[Any, Any]) -> None:
    dist.init_process_group("gloo")
    model = _model()
    part = model[0:2] if rank == 0 else model[2:4]
    stage = pipelining.PipelineStage(part, rank, 2, torch.device("cpu"))
    sched = getattr(pipelining, schedule)(stage, n_microbatches=MICROBATCHES, loss_fn=_loss)
    x, t = _data()
    for _ in range(STEPS):  # no optimizer: each step computes the same losses and gradients
        part.zero_grad()
        if rank == 0:
            sched.step(x)
        else:
            losses: list[Any] = []
            sched.step(target=t, losses=losses)
            out.setdefault("losses", []).append([loss.item() for loss in losses])
    out[rank] = [p.grad.clone() for p in part.parameters()]
    dist.destroy_process_group()


@pytest.mark.parametrize("schedule", ["ScheduleGPipe", "Schedule1F1B"])
def test_a_two_stage_schedule_gives_the_unsplit_models_losses_and_gradients(schedule: str) -> None:
    out: dict[Any, Any] = {}
    kbt.spawn(_stage_rank, (schedule, out), nprocs=2)
    losses, grads = _expected()
    assert len(out["losses"]) == STEPS
    for step_losses in out["losses"]:
        assert step_losses == pytest.approx(losses, rel=1e-6)
    got = out[0] + out[1]
    assert len(got) == len(grads)
    for g, e in zip(got, grads):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-7)
