# SPDX-License-Identifier: MIT
"""Naming a rank thread for Python's threading module (and so logging's
threadName): the library made the thread, so threading only knows it as
a dummy thread."""

from __future__ import annotations

import threading


def _name_python_thread(name: str) -> threading.Thread | None:
    """Let threading (and so logging's threadName) call a rank thread
    kb-rank-N: the library made the thread, so threading only knows it as a
    dummy thread, which it never forgets (_forget_python_thread does)."""
    try:
        t = threading.current_thread()
        if isinstance(t, threading._DummyThread):
            t.name = name
            return t
    except Exception:  # pragma: no cover - threading internals changed
        pass
    return None


def _forget_python_thread(t: threading.Thread | None) -> None:
    if t is None:
        return
    try:
        # threading's own table of threads, which typeshed leaves out (private)
        lock, active = threading._active_limbo_lock, threading._active  # type: ignore[attr-defined]
        with lock:
            if active.get(t.ident) is t:
                del active[t.ident]
    except Exception:  # pragma: no cover - threading internals changed
        pass
