# SPDX-License-Identifier: MIT
"""FLOP counting for simulated time: each rank's FlopCounterMode, entered
with a dispatch mode that has fast paths (the mode runs for every op of
every rank, so its per-op cost is the cost of simulated time) and a module
tracker that keeps the rank's counts to itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from . import _compat, _dtensor_ops


class _GlobalOnly:
    """A stand-in for FlopCounterMode's module tracker: counts go to
    "Global" only. The real tracker hooks every module's forward process
    wide, so N ranks' trackers would see each other's modules."""

    parents = ("Global",)
    is_bw = False

    def __enter__(self) -> _GlobalOnly:
        return self

    def __exit__(self, *a: Any) -> None:
        return None


class CodeMarked:
    """A dispatch mode's mixin: torch wraps the mode's ``__torch_dispatch__``
    to keep torch.compile out of it unless the class's ``_off_by_code`` says
    its code was marked to run without torch.compile (see Counting)."""

    _off_by_code = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # read once, when the class is made: wrap unless marked
        return not cls._off_by_code


_SHAPE_WRAPPER_CODE = _compat.SHAPE_WRAPPER_CODE  # a formula of shapes, as torch's FLOP registry wraps it
_PLAIN, _COUNTED, _TORCHS = 0, 1, 2  # how Counting handles an op (see its docstring)


class Counting(_dtensor_ops.LocalShapes, _compat.FlopCounterDispatchMode):  # type: ignore[no-untyped-call]  # torch's __init_subclass__ is untyped
    """FlopCounterMode's dispatch mode with fast paths. The mode runs for
    every op of every rank, so its per-op cost is the cost of simulated time:

    - an op PyTorch's FLOP registry does not know and that has no
      decomposition to look inside (most of them: add, relu, copies) runs
      straight through (_PLAIN);
    - an op the registry knows runs and is counted, as FlopCounterMode's
      last step does (_COUNTED);
    - anything else takes FlopCounterMode's own path (_TORCHS): it tries a
      decomposition, handles higher-order ops.

    Before those, an op on a DTensor is left to DTensor (NotImplemented),
    whose ops on the rank's local tensors then come back here: a rank is
    counted its own shards' FLOPs; and while DTensor's sharding propagation
    runs on the rank's thread (``quiet``), ops run uncounted
    (_dtensor_ops.py). An op on plain tensors pays two falsy tests for it.

    torch wraps every mode's ``__torch_dispatch__`` in a function that turns
    torch.compile off while it runs (a compile must not trace into a mode).
    That wrapper is a few Python calls per op; here the same is asked of the
    interpreter once, by marking this method's code to run without torch.compile,
    its callees too (_compat.run_without_dynamo). Where this torch lacks that switch, the
    method keeps torch's wrapper."""

    _how: dict[Any, int] = {}  # op -> _PLAIN, _COUNTED or _TORCHS (per process)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if types or self.quiet:
            if self.quiet:
                return func(*args, **(kwargs or {}))
            if _dtensor_ops.defers(types):
                return NotImplemented
        how = Counting._how.get(func)
        if how is None:
            how = Counting._how[func] = self._classify(func)
        if how == _PLAIN:
            return func(*args, **(kwargs or {}))
        if how == _COUNTED:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self._count(_compat.overload_packet(func), out, args, kwargs)
            return out
        return super().__torch_dispatch__(func, types, args, kwargs)  # type: ignore[no-untyped-call]  # torch's is untyped

    _off_by_code = _compat.run_without_dynamo(__torch_dispatch__.__code__)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # read once, when the class is made: wrap unless marked
        return not cls._off_by_code

    def _count(self, packet: Any, out: Any, args: Any, kwargs: Any) -> None:
        """FlopCounterMode._count_flops, without its tree of shapes where the
        op's arguments are flat (tensors and scalars, a tensor out): the
        registry's formula is then called with the shapes directly."""
        formula = self.counter.flop_registry[packet]
        flat = (
            getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE
            and isinstance(out, torch.Tensor)
            and not any(isinstance(a, (list, tuple, dict)) for a in args)
            and not any(isinstance(a, (list, tuple, dict)) for a in kwargs.values())
        )
        if not flat:
            _compat.count_flops(self.counter, packet, out, args, kwargs)
            return
        shape = [a.shape if isinstance(a, torch.Tensor) else a for a in args]
        kw = {k: v.shape if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        self.counter.flop_counts["Global"][packet] += formula.__wrapped__(*shape, out_shape=out.shape, **kw)

    def _classify(self, func: Any) -> int:
        registry = self.counter.flop_registry
        if not isinstance(func, _compat.OpOverload) or func in registry or _decomposes(func):
            return _TORCHS  # FlopCounterMode's own path: a decomposition, a higher-order op
        return _COUNTED if _compat.overload_packet(func) in registry else _PLAIN


def _decomposes(func: Any) -> bool:
    """Whether func has a decomposition (a CompositeImplicitAutograd kernel).
    An op the C++ dispatcher does not know has none there: TorchScript's
    prim::device, which a FakeTensor's ``.device`` dispatches, makes the
    dispatcher's query raise; FlopCounterMode runs it and counts nothing,
    as _PLAIN does."""
    key = _compat.COMPOSITE_IMPLICIT_AUTOGRAD
    try:
        return bool(func.has_kernel_for_dispatch_key(key))
    except RuntimeError:
        return key in func.py_kernels


def _cpu_attention() -> dict[Any, Callable[..., int]]:
    """FLOP formulas for the CPU kernels of scaled_dot_product_attention.
    torch's registry has its CUDA kernels' (flash, memory-efficient, cuDNN)
    and leaves the CPU flash kernel out, which the CPU (and a fake tensor on
    the CPU) runs: an attention would count nothing. The same formulas, of
    the same shapes (query, key, value; the output's gradient first in the
    backward), as torch counts the CUDA kernels."""
    aten = torch.ops.aten
    formulas: dict[Any, Callable[..., int]] = {}
    forward = getattr(flop_counter, "sdpa_flop_count", None)
    backward = getattr(flop_counter, "sdpa_backward_flop_count", None)
    fwd_op = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    bwd_op = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if forward is not None and fwd_op is not None:
        formulas[fwd_op] = lambda q, k, v, *a, out_shape=None, **kw: forward(q, k, v)
    if backward is not None and bwd_op is not None:
        formulas[bwd_op] = lambda g, q, k, v, *a, out_shape=None, **kw: backward(g, q, k, v)
    return formulas


_CPU_ATTENTION = _cpu_attention()


def start_counter(mode: Callable[[Any], Any] = Counting) -> Any:
    """A FlopCounterMode entered on the calling thread, with the fast path
    (mode(counter): Counting or a subclass of it); it also counts the CPU
    kernels of attention (_cpu_attention)."""
    m = FlopCounterMode(display=False, custom_mapping=_CPU_ATTENTION)
    _compat.start_flop_counter(m, _GlobalOnly(), mode)  # FlopCounterMode's entry, with the fast path
    return m


def stop_counter(counter: Any) -> None:
    _compat.stop_flop_counter(counter)
