# SPDX-License-Identifier: MIT
"""Workarounds a dry run on fake tensors needs, in the example only,
each for something PyTorch 2.13 or kbthreads does not do yet under
FakeTensorMode. A dispatch mode entered above the rank's FakeTensorMode
applies both; with real tensors the example does not use it.

1. Functional collectives. DTensor (tensor parallelism) communicates
   through torch's functional collectives (``torch.ops._c10d_functional``).
   Under FakeTensorMode those ops have shape-only implementations and never
   reach the process group, so kbthreads would neither see nor price tensor
   parallelism's all-gathers and reduce-scatters (FSDP2 and pipelining call
   the process group directly and are seen). This mode computes the op's fake
   output as FakeTensorMode does and then issues the same collective on the
   same group through ``torch.distributed`` (synchronously: a functional
   collective may overlap compute until its wait, so the prediction counts
   tensor parallelism's communication as exposed).

2. The pipeline's warm-up vote. PyTorch 2.13's pipeline schedules open with
   a vote: each stage multiplies an integer tensor received from its
   neighbour by its own vote (1 when it was given its complete input and
   output metadata, as the example gives every stage), sends it on, and the
   product travels back; each stage then reads it with ``.item()``. A fake
   tensor has no value, so the read fails. Every stage here votes 1, so the
   product is 1: this mode answers that one read (a one-element integer
   tensor read inside the schedule's warm-up) with 1.

A third, with real tensors too, is in llama_dryrun.py (ShardFlops): the
FLOP counter counts a DTensor op at its global shapes on every rank, so the
example divides a rank's count by the tensor-parallel degree.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.pipelining import schedules as pp_schedules
from torch.utils._python_dispatch import TorchDispatchMode

_REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "product": dist.ReduceOp.PRODUCT,
}


class FakeRunGaps(TorchDispatchMode):
    """The two workarounds above, for the groups ``groups`` (every group the
    rank's model communicates on: its mesh's)."""

    def __init__(self, groups: Iterable[dist.ProcessGroup]) -> None:
        super().__init__()
        self.groups = {g.group_name: g for g in groups}
        fc = torch.ops._c10d_functional
        self.collectives = {
            fc.all_gather_into_tensor.default: self._all_gather,
            fc.reduce_scatter_tensor.default: self._reduce_scatter,
            fc.all_reduce.default: self._all_reduce,
            fc.all_to_all_single.default: self._all_to_all,
        }

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and _in_pipeline_warmup():
            (t,) = args
            if t.numel() == 1 and not t.is_floating_point():
                return 1
        out = func(*args, **kwargs)
        issue = self.collectives.get(func)
        if issue is not None:
            issue(out, *args, **kwargs)
        return out

    def _group(self, name: str) -> dist.ProcessGroup:
        try:
            return self.groups[name]
        except KeyError:
            raise RuntimeError(f"a functional collective on group {name!r}, not one of the mesh's") from None

    def _all_gather(self, out: torch.Tensor, x: torch.Tensor, _size: int, name: str) -> None:
        dist.all_gather_into_tensor(out, x, group=self._group(name))

    def _reduce_scatter(self, out: torch.Tensor, x: torch.Tensor, op: str, _size: int, name: str) -> None:
        dist.reduce_scatter_tensor(out, x, op=_REDUCE_OPS[op.lower()], group=self._group(name))

    def _all_reduce(self, out: torch.Tensor, x: torch.Tensor, op: str, name: str) -> None:
        dist.all_reduce(out, op=_REDUCE_OPS[op.lower()], group=self._group(name))

    def _all_to_all(self, out: torch.Tensor, x: torch.Tensor, out_splits: Any, in_splits: Any, name: str) -> None:
        dist.all_to_all_single(out, x, list(out_splits) or None, list(in_splits) or None, group=self._group(name))


def _in_pipeline_warmup() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_warmup_p2p" and f.f_globals.get("__name__") == pp_schedules.__name__:
            return True
        f = f.f_back  # type: ignore[assignment]
    return False
