# SPDX-License-Identifier: MIT
"""PyTorch's functional collectives (``torch.ops._c10d_functional``, what
DTensor and so tensor parallelism call) on fake and meta tensors.

With real tensors a functional collective's kernel calls the group's
collective (here KbProcessGroup's), and ``wait_tensor`` waits its Work. On
fake or meta tensors PyTorch runs the op's shape function instead, which
makes the output and reaches no group: the collective would be missing
from the spawn (unpriced, unmatched). So kbthreads registers, through
PyTorch's public ``torch.library.register_fake``, a shape function of its
own for the collectives below: it makes the output as PyTorch's does (in
the rank's FakeTensorMode, or on meta) and, when the group is a
KbProcessGroup, calls that group's collective on it, as the real kernel
would; ``wait_tensor`` waits that Work. Elsewhere (no kbthreads group) it
only makes the output. Coalesced functional collectives and point to
point keep PyTorch's own shape functions.

The registration is process-wide and made once, when the first
KbProcessGroup is made (``install``), and stays: outside a kbthreads
group it does what PyTorch's does."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from . import _compat

_OPS = "_c10d_functional"
_lib: Any = None
# a Work per output made and not yet waited: id(output) -> (the rank's
# thread, Work). The Work holds its output, so an id is not reused while its
# entry exists; a rank's entries left unwaited (a rank that failed, a
# program that never waits) go when the rank ends (forget), with its groups.
_pending: dict[int, tuple[int, Any]] = {}


def _group(group_name: Any) -> Any:
    """The calling rank's group of that name (or the group itself), when it
    is a kbthreads group; else None."""
    from ._member import GroupMember

    pg = group_name if isinstance(group_name, dist.ProcessGroup) else _compat.resolve_process_group(group_name)
    return pg if isinstance(pg, GroupMember) else None


def _reduce_op(name: str) -> dist.ReduceOp:
    return getattr(dist.ReduceOp, name.upper())  # type: ignore[no-any-return]


def _issue(out: torch.Tensor, group_name: Any, start: Callable[[Any], Any]) -> torch.Tensor:
    """out, after start(group) issued its collective, if the group is ours."""
    pg = _group(group_name)
    if pg is not None:
        _pending[id(out)] = (threading.get_ident(), start(pg))
    return out


def forget() -> None:
    """On a rank's thread as the rank ends: drop its unwaited entries."""
    me = threading.get_ident()
    for key in [k for k, (thread, _) in _pending.items() if thread == me]:
        del _pending[key]


def _all_reduce(input: torch.Tensor, reduce_op: str, group_name: Any) -> torch.Tensor:
    opts = dist.AllreduceOptions()
    opts.reduceOp = _reduce_op(reduce_op)
    out = torch.empty_like(input)
    return _issue(out, group_name, lambda pg: pg.allreduce([out], opts))


def _all_reduce_(input: torch.Tensor, reduce_op: str, group_name: Any) -> torch.Tensor:
    opts = dist.AllreduceOptions()
    opts.reduceOp = _reduce_op(reduce_op)
    return _issue(input, group_name, lambda pg: pg.allreduce([input], opts))


def _rows(input: torch.Tensor, rows: int) -> torch.Tensor:
    return input.new_empty((rows, *input.shape[1:]))


def _all_gather_into_tensor(input: torch.Tensor, group_size: int, group_name: Any) -> torch.Tensor:
    out = _rows(input, input.shape[0] * group_size)
    return _issue(out, group_name, lambda pg: pg.all_gather_single(out, input))


def _reduce_scatter_tensor(input: torch.Tensor, reduce_op: str, group_size: int, group_name: Any) -> torch.Tensor:
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = _reduce_op(reduce_op)
    out = _rows(input, input.shape[0] // group_size)
    return _issue(out, group_name, lambda pg: pg.reduce_scatter_single(out, input, opts))


def _all_to_all_single(
    input: torch.Tensor, output_split_sizes: Sequence[int], input_split_sizes: Sequence[int], group_name: Any
) -> torch.Tensor:
    out = _rows(input, sum(output_split_sizes)) if output_split_sizes else torch.empty_like(input)
    return _issue(
        out, group_name, lambda pg: pg.alltoall_base(out, input, list(output_split_sizes), list(input_split_sizes))
    )


def _broadcast_(input: torch.Tensor, src: int, group_name: Any) -> torch.Tensor:
    opts = dist.BroadcastOptions()
    opts.rootRank = src
    return _issue(input, group_name, lambda pg: pg.broadcast([input], opts))


def _broadcast(input: torch.Tensor, src: int, group_name: Any) -> torch.Tensor:
    out = torch.empty_like(input)
    return _broadcast_(out, src, group_name)


def _wait_tensor(tensor: torch.Tensor) -> torch.Tensor:
    entry = _pending.pop(id(tensor), None)
    if entry is not None:
        entry[1].wait()
    return tensor


_SHAPE_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "all_reduce": _all_reduce,
    "all_reduce_": _all_reduce_,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "all_to_all_single": _all_to_all_single,
    "broadcast": _broadcast,
    "broadcast_": _broadcast_,
    "wait_tensor": _wait_tensor,
}


def install() -> None:
    """Register the shape functions above (once per process)."""
    global _lib
    if _lib is not None:
        return
    _compat.load_functional_collectives()  # PyTorch's shape functions first: these override them
    lib = torch.library.Library(_OPS, "FRAGMENT")  # type: ignore[no-untyped-call]  # torch's is untyped
    for name, fn in _SHAPE_FUNCTIONS.items():
        torch.library.register_fake(f"{_OPS}::{name}", fn, lib=lib, allow_override=True)
    _lib = lib
