# SPDX-License-Identifier: MIT
"""Who may drive a context: the driver-side lock (_Guard), where freeing a
process context or destroying a ctx is allowed (_may_drive), and the frees
deferred until then."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ._errors import KbError
from ._loader import accel
from ._rank import _tls

if TYPE_CHECKING:
    from ._context import Context

_in_hook: Callable[[], bool] = accel.in_hook  # kb_in_hook: an engine hook runs on this thread


def _may_drive() -> bool:
    """False on a rank thread or inside an engine hook, where freeing a
    process context or destroying a ctx is not allowed."""
    return accel.rank() < 0 and not _in_hook()


# Frees that became due where they are not allowed (a __del__ run by the
# garbage collector on a rank thread or inside a hook): done at the next
# safe point.
_deferred: list[Callable[[], None]] = []
_deferred_lock = threading.Lock()


def _defer(fn: Callable[[], None]) -> None:
    with _deferred_lock:
        _deferred.append(fn)


def _run_deferred() -> None:
    if not _deferred or not _may_drive():
        return
    with _deferred_lock:
        todo = _deferred[:]
        del _deferred[:]
    for fn in todo:
        fn()


class _Guard:
    """`with ctx._guard():` around driver-side library calls (see Context._lock).
    A rank or an engine hook passes through (it holds the baton); another
    thread finds the context busy: KbError(EBUSY), as the library says."""

    __slots__ = ("ctx", "blocking", "held")

    def __init__(self, ctx: Context, blocking: bool):
        self.ctx = ctx
        self.blocking = blocking
        self.held = False

    def __enter__(self) -> None:
        if getattr(_tls, "current", None) is not None or _in_hook():
            return
        if not self.ctx._lock.acquire(self.blocking):
            raise KbError(accel.KB_EBUSY, "the context is in use by another thread")
        self.held = True

    def __exit__(self, *exc: object) -> Literal[False]:
        if self.held:
            self.held = False
            self.ctx._lock.release()
        return False
