# SPDX-License-Identifier: MIT
"""Per-rank memory for a simulated-time spawn (``memory=True``): each
rank's current and peak bytes of the tensor storages it allocated, by the
categories PyTorch's MemTracker uses.

A dispatch mode on the rank's own mode stack (every rank is a thread, so
the mode sees that rank's ops only) reads each op's results: a storage not
seen before is counted once, by its bytes, and a weak reference to it takes
its bytes off when it is freed (on whichever thread drops it last: the
bytes are the allocating rank's). Real, fake and meta tensors alike: a fake
or meta storage has the bytes its real one would have.

Categories, as MemTracker assigns them:

- a storage an op makes is ``optimizer_state`` inside an optimizer's
  ``step``, ``temporaries`` inside a backward pass (the autograd engine runs
  on the rank's thread), ``activations`` otherwise;
- it becomes ``parameters`` or ``buffers`` when registered on a module
  (torch's global registration hooks, kept per rank) or, for one set
  without registration (FSDP2 swaps its sharded parameters into the
  module's table; ``Module.to_empty``), when its module next runs forward
  (as MemTracker labels a module's parameters and buffers) or an
  optimizer steps it; ``gradients`` when autograd hands it to a parameter
  (the parameter's gradient hooks) or, for one assigned without autograd
  (FSDP2's reduced shards), when an optimizer steps its parameter; and
  ``optimizer_state`` when it is in an optimizer's state after a step.

Invariants: ``total`` is the sum of ``current``; ``peak`` is ``current``
as it was when ``total`` was highest, checked after every op (a relabel
moves bytes between categories and leaves ``total`` unchanged). One rank
runs at a time, so a free seen on another thread does not race the owner."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.modules.module import (
    register_module_buffer_registration_hook,
    register_module_forward_pre_hook,
    register_module_parameter_registration_hook,
)
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from . import _compat, _dtensor_ops, _flops
from ._roofline import tensors

CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries")


class _Storage:
    """A counted storage: its bytes, its category, the weak reference whose
    callback takes it off."""

    __slots__ = ("nbytes", "category", "ref")

    def __init__(self, nbytes: int, category: str, ref: weakref.ref[Any]) -> None:
        self.nbytes = nbytes
        self.category = category
        self.ref = ref


def _storage(t: torch.Tensor) -> Any:
    """t's untyped storage, None for a tensor without one of its own: a
    wrapper subclass such as DTensor (its inner tensors hold its data; the
    storage it answers with is a placeholder of its global size, which
    holds nothing)."""
    if type(t) is not torch.Tensor and hasattr(t, "__tensor_flatten__"):
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def _inner_tensors(t: torch.Tensor) -> list[Any]:
    """The tensors a wrapper subclass holds (by its ``__tensor_flatten__``,
    the protocol DTensor and the other traceable wrappers implement)."""
    flatten = getattr(t, "__tensor_flatten__", None)
    if flatten is None:
        return []
    names, _ = flatten()
    return [getattr(t, name) for name in names]


class RankMemory:
    """One rank's storages, by category (see the module doc)."""

    def __init__(self) -> None:
        self.live: dict[int, _Storage] = {}  # id(storage) -> its record, while the storage lives
        self.current = dict.fromkeys(CATEGORIES, 0)
        self.total = 0
        self.peak = dict(self.current)
        self.peak_total = 0
        self.high = 0  # the highest total since the previous event (the timeline's)
        self.in_optimizer = 0  # optimizer steps running (nested steps count once each)
        self.handles: list[Any] = []
        self.mode: MemoryMode | None = None

    # ---- counting ---------------------------------------------------------------------------------
    def _new_category(self) -> str:
        if self.in_optimizer:
            return "optimizer_state"
        if _compat.current_graph_task_id() != -1:
            return "temporaries"
        return "activations"

    def saw(self, out: Any) -> None:
        """An op's results: new storages counted; a known one resized
        (FSDP resizes storages in place) counted at its new size."""
        category = None
        for t in tensors(out):
            st = _storage(t)
            if st is None:
                continue
            rec = self.live.get(id(st))
            if rec is None:
                category = category or self._new_category()
                self._add(st, category)
            elif rec.nbytes != st.nbytes():
                self._resize(rec, st.nbytes())
        if self.total > self.high:
            self.high = self.total
            if self.total > self.peak_total:
                self.peak_total = self.total
                self.peak = dict(self.current)

    def label(self, t: Any, category: str) -> None:
        """t's storage is of category from now on (counted if new); nothing
        once the rank ended (a parameter's hooks outlive it)."""
        if self.mode is None or not isinstance(t, torch.Tensor):
            return
        st = _storage(t)
        if st is None:  # a wrapper subclass: what it holds is its inner tensors (a DTensor's local shard)
            for inner in _inner_tensors(t):
                self.label(inner, category)
            return
        rec = self.live.get(id(st))
        if rec is None:
            self._add(st, category)
            self.saw(())  # the peak, with the new bytes
        elif rec.category != category:
            self.current[rec.category] -= rec.nbytes
            self.current[category] += rec.nbytes
            rec.category = category

    def _add(self, st: Any, category: str) -> None:
        key = id(st)
        n = int(st.nbytes())
        self.live[key] = _Storage(n, category, weakref.ref(st, functools.partial(self._freed, key)))
        self.current[category] += n
        self.total += n

    def _resize(self, rec: _Storage, n: int) -> None:
        self.current[rec.category] += n - rec.nbytes
        self.total += n - rec.nbytes
        rec.nbytes = n

    def _freed(self, key: int, _ref: Any) -> None:
        rec = self.live.pop(key, None)
        if rec is not None:
            self.current[rec.category] -= rec.nbytes
            self.total -= rec.nbytes

    # ---- what is read -----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, dict[str, int]]:
        """{"current": {...}, "peak": {...}}: bytes by category and total."""
        return {
            "current": {**self.current, "total": self.total},
            "peak": {**self.peak, "total": self.peak_total},
        }

    def take_high(self) -> int:
        """The highest total since the previous call (the current total then on)."""
        high, self.high = self.high, self.total
        return high

    # ---- hooks (registered on the rank's thread: torch's tables are per rank there) --------------
    def _parameter(self, module: Any, name: str, param: Any) -> None:
        if param is None:
            return
        self.label(param, "parameters")
        if isinstance(param, torch.Tensor) and param.requires_grad:
            # the gradient autograd computes, then the one it accumulated into .grad
            param.register_hook(lambda g: self.label(g, "gradients"))  # type: ignore[no-untyped-call]
            param.register_post_accumulate_grad_hook(  # type: ignore[no-untyped-call]
                lambda p: self.label(p.grad, "gradients")
            )

    def _buffer(self, module: Any, name: str, buffer: Any) -> None:
        if buffer is not None:
            self.label(buffer, "buffers")

    def _forward_begins(self, module: Any, args: Any) -> None:
        for param in module.parameters(recurse=False):
            self.label(param, "parameters")
        for buffer in module.buffers(recurse=False):
            self.label(buffer, "buffers")

    def _step_begins(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.in_optimizer += 1
        # what the step reads: its parameters and their gradients (a gradient
        # assigned without autograd's hooks, as FSDP2 assigns its reduced
        # shards, is labelled here at the latest)
        for group in optimizer.param_groups:
            for param in group["params"]:
                self.label(param, "parameters")
                self.label(param.grad, "gradients")

    def _step_ends(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.in_optimizer -= 1
        for state in optimizer.state.values():
            for value in state.values():
                self.label(value, "optimizer_state")

    def start(self) -> None:
        """Count from now on, on the calling (rank) thread."""
        self.handles = [
            register_module_parameter_registration_hook(self._parameter),
            register_module_buffer_registration_hook(self._buffer),
            register_module_forward_pre_hook(self._forward_begins),
            register_optimizer_step_pre_hook(self._step_begins),
            register_optimizer_step_post_hook(self._step_ends),
        ]
        self.mode = MemoryMode(self.saw)
        self.mode.__enter__()  # type: ignore[no-untyped-call]

    def stop(self) -> None:
        if self.mode is not None:
            self.mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]
            self.mode = None
        for h in self.handles:
            h.remove()
        self.handles = []


class MemoryMode(_flops.CodeMarked, _dtensor_ops.LocalShapes, _compat.DispatchMode):  # type: ignore[no-untyped-call]  # torch's __init_subclass__ is untyped
    """Runs every op of the rank and hands its results to ``saw``. An op on
    a wrapper subclass (DTensor, a functional collective's waiting tensor)
    is left to the subclass, whose ops on its inner tensors then come back
    here: those are what allocate, and what the rank holds (a DTensor's
    local shard). While DTensor's sharding propagation runs (``quiet``),
    ops run unseen: its fake tensors at the global shapes are no rank's
    (_dtensor_ops.py).

    It sits below the FLOP counter's mode on the rank's stack; the counter
    leaves the same DTensor ops to DTensor, so either order counts each op
    once."""

    def __init__(self, saw: Callable[[Any], None]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.saw = saw

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if types or self.quiet:
            if self.quiet:  # DTensor's sharding propagation: its fake tensors are no rank's
                return func(*args, **(kwargs or {}))
            if _dtensor_ops.defers(types) or any(hasattr(t, "__tensor_flatten__") for t in types):
                return NotImplemented
        out = func(*args, **(kwargs or {}))
        self.saw(out)
        return out

    _off_by_code = _compat.run_without_dynamo(__torch_dispatch__.__code__)
