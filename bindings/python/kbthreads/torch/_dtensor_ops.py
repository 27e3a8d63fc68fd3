# SPDX-License-Identifier: MIT
"""DTensor ops at each rank's local shapes, for the dispatch modes of
simulated time (FLOP counting, the roofline, memory).

A dispatch mode sees an op on a DTensor once, at the DTensor's global
shapes; if it runs the op itself, DTensor's dispatch then runs the local
ops with the mode popped, unseen. With tensor parallelism every rank would
be charged the whole op. kbthreads' modes instead return NotImplemented for
an op whose types include DTensor (``defers``): DTensor's own dispatch then
runs with the mode still on the rank's stack, and the ops it runs on the
rank's local tensors (the local matmul, the copies and collectives of a
redistribution; the roofline charges no bytes for a collective) come back
to the mode at the shapes the rank computes.

DTensor's dispatch also runs each op once at the global shapes to learn
its result's shape, stride and dtype (sharding propagation, cached per op
schema, so only the first time), on fake tensors of a FakeTensorMode: the
one on the rank's stack where the rank runs under its own FakeTensorMode,
else a fresh one. That is not the rank's compute, and it cannot be told by
its tensors (under the rank's own FakeTensorMode they are fake tensors of
the same mode as the rank's). DTensor runs it inside
``ShardingPropagator``'s fake-mode lock, a context manager torch lets
threaded programs replace (with a lock, to serialise it). kbthreads puts a
guard there (``watch_propagation``) that makes the calling thread's
kbthreads modes quiet while it runs: they run its ops without counting
them. The guard enters the lock that was there before it, so a program
that set one keeps it."""

from __future__ import annotations

import sys
import threading
from typing import Any

from . import _compat


class LocalShapes:
    """A mixin of kbthreads' dispatch modes: ``quiet`` is above zero while
    the mode's (the rank's) thread is inside an Uncounted context (DTensor's
    sharding propagation); the mode then runs ops without counting them."""

    quiet = 0


# (types of an op's tensor subclasses) -> whether it is a DTensor op.
# Invariant: a tuple classified before DTensor was imported holds no
# DTensor (a class exists only once its module has been imported).
_DEFERS: dict[Any, bool] = {}


def defers(types: Any) -> bool:
    """Whether a mode leaves the op to DTensor's dispatch: its subclass
    types (never empty here: a mode asks only where an op has subclasses)
    include DTensor. Cached per tuple of types; the first DTensor op puts
    the propagation guard in place (``watch_propagation``)."""
    d = _DEFERS.get(types)
    if d is None:
        d = _DEFERS[types] = _has_dtensor(types)
    if d:
        watch_propagation()
    return d


def _has_dtensor(types: Any) -> bool:
    dtensor = getattr(sys.modules.get(_compat.DTENSOR_API_MODULE), "DTensor", None)  # None until DTensor is imported
    return dtensor is not None and any(isinstance(t, type) and issubclass(t, dtensor) for t in types)


class Uncounted:
    """A context in which the calling thread's kbthreads modes run ops
    without counting them (FLOPs, bytes, memory): DTensor's sharding
    propagation here; kbthreads' own work on a rank's thread could use it
    too. Nests: each entry quiets the modes on the stack then."""

    def __init__(self) -> None:
        self.modes: list[LocalShapes] = []

    def __enter__(self) -> Uncounted:
        self.modes = [m for m in _compat.dispatch_mode_stack() if isinstance(m, LocalShapes)]
        for m in self.modes:
            m.quiet += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        for m in self.modes:
            m.quiet -= 1


class _Entered(threading.local):
    """The Uncounted contexts a thread's guard entered, innermost last."""

    def __init__(self) -> None:
        self.stack: list[Uncounted] = []


class PropagationGuard:
    """The context manager DTensor enters around its sharding propagation:
    the calling thread's kbthreads modes are quiet inside it. ``inner`` is
    the lock (or no-op context) that was there before, entered first."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entered = _Entered()  # one guard serves every rank thread

    def __enter__(self) -> PropagationGuard:
        self.inner.__enter__()
        self.entered.stack.append(Uncounted().__enter__())
        return self

    def __exit__(self, *exc: Any) -> Any:
        self.entered.stack.pop().__exit__(*exc)
        return self.inner.__exit__(*exc)


def watch_propagation() -> None:
    """Put a PropagationGuard in DTensor's propagation lock, around the one
    there (again if a program replaced it since); nothing where this
    PyTorch's DTensor has no such lock (its propagation is then counted,
    the first time per op schema)."""
    lock = _compat.propagation_lock()
    if lock is not None and not isinstance(lock, PropagationGuard):
        _compat.set_propagation_lock(PropagationGuard(lock))


def unwatch_propagation() -> None:
    """Put back the lock a PropagationGuard wraps (the last spawn ended: the
    process is left as it was found; the next spawn's first DTensor op
    guards it again)."""
    lock = _compat.propagation_lock()
    if isinstance(lock, PropagationGuard):
        _compat.set_propagation_lock(lock.inner)
