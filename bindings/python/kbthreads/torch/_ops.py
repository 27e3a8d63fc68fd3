# SPDX-License-Identifier: MIT
"""What each collective computes, from the members' inputs in group-rank
order: pure functions of snapshots, so a result never depends on when a
rank arrived. Reductions fold left in rank order, ((x0 op x1) op x2) ...,
which is what a sequential loop over the ranks computes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from . import _compat

ReduceOp = dist.ReduceOp

_BITWISE = {"BAND": torch.Tensor.bitwise_and_, "BOR": torch.Tensor.bitwise_or_, "BXOR": torch.Tensor.bitwise_xor_}


def op_name(op: Any) -> tuple[str, Any]:
    """(name, premul factor or None) of a ReduceOp or a RedOpType."""
    factor = None
    if isinstance(op, ReduceOp):
        kind = _compat.reduce_op_kind(op)
        if kind == ReduceOp.PREMUL_SUM:
            factor = _compat.premul_factor(op)
        op = kind
    return str(op).rsplit(".", 1)[-1], factor


def check_reduce_op(name: str, dtype: torch.dtype) -> str | None:
    """Why op name cannot reduce dtype, or None."""
    if name in _BITWISE and (dtype.is_floating_point or dtype.is_complex):
        return f"{name} needs an integer or bool dtype, not {dtype}"
    if name == "AVG" and not (dtype.is_floating_point or dtype.is_complex):
        return f"AVG needs a floating-point dtype, not {dtype}"
    if name in ("MIN", "MAX") and dtype.is_complex:
        return f"{name} cannot order complex {dtype}"
    if name not in _BITWISE and name not in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"):
        return f"reduce op {name} is not supported"
    return None


def reduce(xs: Sequence[torch.Tensor], name: str, factor: Any) -> torch.Tensor:
    """Fold xs left in order with op name."""
    acc: torch.Tensor
    if name == "PREMUL_SUM":
        acc = xs[0] * factor
        for x in xs[1:]:
            acc += x * factor
        return acc
    acc = xs[0].clone()
    for x in xs[1:]:
        if name in ("SUM", "AVG"):
            acc += x
        elif name == "PRODUCT":
            acc *= x
        elif name == "MIN":
            torch.minimum(acc, x, out=acc)
        elif name == "MAX":
            torch.maximum(acc, x, out=acc)
        else:
            _BITWISE[name](acc, x)
    if name == "AVG":
        acc /= len(xs)
    return acc


def chunk_shapes(shape: tuple[int, ...], sizes: Sequence[int] | None, n: int) -> list[tuple[int, ...]]:
    """The shapes of chunks(t, sizes, n) for a t of shape whose rows, when
    sizes is None or empty, divide by n (all_to_all_single checked it)."""
    if not shape:
        return [shape] * n
    rows = list(sizes) if sizes else [shape[0] // n] * n
    return [(r, *shape[1:]) for r in rows]


def chunks(t: torch.Tensor, sizes: Sequence[int] | None, n: int) -> list[torch.Tensor]:
    """t split along dim 0 into sizes (equal parts when None or empty)."""
    if not sizes:
        return list(torch.chunk(t, n)) if t.dim() else [t] * n
    return list(torch.split(t, list(sizes)))
