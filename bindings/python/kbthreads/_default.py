# SPDX-License-Identifier: MIT
"""The module-level context kbthreads.spawn uses, and the exit hook that
cancels spawns left live."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import Any

from ._context import Context
from ._driving import _may_drive, _run_deferred
from ._run import _live_runs
from ._spawn import ProcessContext

_default: Context | None = None
_default_lock = threading.Lock()


def default_context() -> Context:
    """The module-level context used by kbthreads.spawn (no engine, no
    distributed layer: every wait completes at the next drain)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default


def spawn(
    fn: Callable[..., object], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True
) -> ProcessContext | None:
    """``default_context().multiprocessing.spawn(fn, args, nprocs, join)``."""
    return default_context().spawn(fn, args, nprocs, join)


@atexit.register
def _at_exit() -> None:
    # Spawns left live (join=False, never joined or closed): cancel their
    # ranks now, while the interpreter can still run their cleanup.
    if not _may_drive():  # pragma: no cover
        return
    _run_deferred()
    for run in list(_live_runs):
        if not run.done and not run.joining:
            try:
                run.cancel()
            except Exception:  # pragma: no cover
                pass
