# SPDX-License-Identifier: MIT
"""The roofline compute model (``compute="roofline"``): every op a rank
runs costs ``max(flops / device_flops, bytes / device_bandwidth)``, where
flops is what FlopCounterMode counts for the op and bytes what it reads
and writes: the sizes of its tensor arguments plus those of its tensor
results. So elementwise and normalisation ops, which FLOP counting leaves
free, cost the time their memory traffic takes.

A tensor's bytes are its element size times the product of its sizes over
the dimensions whose stride is not zero (a broadcast dimension is read
once), as PyTorch's RuntimeEstimator counts them. Ops that move nothing
cost nothing: views (their result aliases an argument), allocations that
write nothing (``empty`` and its kin), metadata queries (a fake tensor's
device, sizes, strides), and collectives (the network model prices them).
docs/torch-time.md has the formula and how it compares with
RuntimeEstimator's roofline mode.

The mode is FLOP counting's (``_flops.Counting``) with a per-op charge:
the FLOP counts stay exactly FlopCounterMode's, and an op that decomposes
is charged as its parts, each once, as they dispatch back into the mode."""

from __future__ import annotations

from typing import Any

import torch

from . import _compat, _dtensor_ops, _flops

# aten ops that move no bytes: allocations that write nothing, a view the
# schema does not mark as one (its result is a view of a fresh tensor), and
# queries of a tensor's metadata (they dispatch for fake tensors and
# subclasses with their own sizes)
_MOVE_NOTHING = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_unsafe_view"}
    | {"size", "sym_size", "stride", "sym_stride", "dim", "numel", "sym_numel", "storage_offset"}
    | {"sym_storage_offset", "is_contiguous", "sym_is_contiguous", "is_strides_like_format"}
    | {"is_non_overlapping_and_dense"}
)


def tensor_bytes(t: torch.Tensor) -> int:
    """The bytes an op reads or writes for t: element size times the sizes
    of the dimensions with a non-zero stride."""
    n = t.element_size()
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= int(size)
    return n


def tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results (nested in lists,
    tuples and dicts, as an op's schema allows)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in tensors(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in tensors(x)]
    return []


# the namespaces of the collectives' ops (functional collectives, which
# DTensor's redistributions call, and c10d's): the network model prices them
_COMMUNICATION = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "c10d"})


def _moves_nothing(func: Any) -> bool:
    namespace = getattr(func, "namespace", "")
    if namespace == "prim":  # TorchScript's metadata ops: a fake tensor's device, layout
        return True
    if namespace in _COMMUNICATION:  # and their waits and autograd wrappers, which move nothing
        return True
    if getattr(func, "is_view", False):
        return True
    packet = getattr(func, "overloadpacket", None)
    return namespace == "aten" and getattr(packet, "__name__", "") in _MOVE_NOTHING


def op_bytes(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """Bytes func moved: its tensor arguments read, its tensor results
    written; 0 for a view, an allocation, a metadata query."""
    if _moves_nothing(func):
        return 0
    outs = tensors(out)
    return (
        sum(tensor_bytes(t) for t in tensors(args))
        + sum(tensor_bytes(t) for t in tensors(kwargs))
        + sum(tensor_bytes(t) for t in outs)
    )


class Roofline(_flops.Counting):  # type: ignore[no-untyped-call]  # torch's __init_subclass__ is untyped
    """FLOP counting that also charges each op its roofline time:
    ``seconds`` (and ``moved``, the bytes) grow by every op the rank runs."""

    def __init__(self, counter: Any, rate: float, bandwidth: float) -> None:
        super().__init__(counter)
        self.rate = rate
        self.bandwidth = bandwidth
        self.seconds = 0.0
        self.moved = 0
        self.charged = 0  # ops charged so far: a change across an op means it decomposed

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if types or self.quiet:  # DTensor's ops, at the rank's local shapes (as Counting does)
            if self.quiet:
                return func(*args, **(kwargs or {}))
            if _dtensor_ops.defers(types):
                return NotImplemented
        how = _flops.Counting._how.get(func)
        if how is None:
            how = _flops.Counting._how[func] = self._classify(func)
        kwargs = kwargs or {}
        if how == _flops._PLAIN:
            out = func(*args, **kwargs)
            self._charge(0, func, args, kwargs, out)
            return out
        counts = self.counter.flop_counts["Global"]
        before, charged = sum(counts.values()), self.charged
        if how == _flops._COUNTED:
            out = func(*args, **kwargs)
            self._count(_compat.overload_packet(func), out, args, kwargs)
        else:
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if self.charged != charged:  # it decomposed: its parts were charged as they ran
                return out
        self._charge(sum(counts.values()) - before, func, args, kwargs, out)
        return out

    _off_by_code = _compat.run_without_dynamo(__torch_dispatch__.__code__)

    def _charge(self, flops: int, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        moved = op_bytes(func, args, kwargs, out)
        self.seconds += max(flops / self.rate, moved / self.bandwidth)
        self.moved += moved
        self.charged += 1


def start_counter(rate: float, bandwidth: float) -> Any:
    """A FlopCounterMode entered on the calling thread whose mode charges
    each op its roofline time (the mode is ``counter.mode``)."""
    return _flops.start_counter(lambda counter: Roofline(counter, rate, bandwidth))
