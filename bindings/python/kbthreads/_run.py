# SPDX-License-Identifier: MIT
"""One spawn's state, from kb_start to the freed process context: a
rank's entry (_Run._entry, called by _accel's C entry on the rank's
thread), joining in slices, and the exception a failed spawn raises."""

from __future__ import annotations

import contextvars
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _interrupt, _stats
from ._driving import _run_deferred
from ._errors import KbError, LiveRank, RankFailure, SpawnDiverged, SpawnException, SpawnStopped, SpawnTimeout
from ._loader import accel as _accel
from ._rank import Rank, _tls
from ._threads import _forget_python_thread, _name_python_thread

if TYPE_CHECKING:
    from ._context import Context

_RC_FAILED = 1  # what a rank returns to the library when its body raised
_JOIN_SLICE_MS = 50  # the driver returns to Python this often (timeouts)
_WHERE = {
    _accel.KB_AT_START: "start",
    _accel.KB_AT_YIELD: "yield",
    _accel.KB_AT_WAIT: "wait",
    _accel.KB_AT_BARRIER: "barrier",
}


def _is_greenlet_exit(e: BaseException) -> bool:
    """Is e greenlet's GreenletExit? Only a program that imported greenlet
    can raise it, so greenlet is looked up, never imported."""
    greenlet = sys.modules.get("greenlet")
    exit_type = getattr(greenlet, "GreenletExit", None)
    return isinstance(exit_type, type) and isinstance(e, exit_type)


_live_runs: weakref.WeakSet[_Run] = weakref.WeakSet()


class _Run:
    def __init__(self, ctx: Context, fn: Callable[..., object], args: tuple[Any, ...], nprocs: int):
        self.ctx = ctx
        self.fn = fn
        self.args = args
        self.nprocs = nprocs
        self.ranks = [Rank(r) for r in range(nprocs)]
        self.failures: dict[int, BaseException] = {}
        self.bind_error: BaseException | None = None
        self.raw_error: BaseException | None = None  # a BaseException from the abort hook
        self.pc = 0  # the spawn's handle from the compiled part (_accel_spawn.c: parse_pc), 0 once freed
        self.done = False  # finished or freed: no rank runs any more
        self.outcome: BaseException | None = None  # what join raises once done
        self.joining = False
        self.entry = self._entry  # referenced until the pc is freed
        self.stats: _stats.SpawnStats | None = None  # set when the pc is freed

    # Runs on rank `r`'s thread, holding the baton (and, while in Python, the GIL).
    def _entry(self, r: int) -> int:
        try:
            w = self.ranks[r]
            _tls.current = w
            w.started = True
            w.native_id = threading.get_native_id()
            pythread = _name_python_thread(w.name)
            try:
                _accel.rank_running(True)  # from here Ctrl-C may raise KeyboardInterrupt in this rank
                # In a contextvars context of its own, dropped when the body
                # returns: what the rank's context held is freed here, not in
                # the thread state's teardown (_accel_spawn.c: rank_state_free
                # says why that matters); and each rank's contextvars are
                # its own, as each greenlet's are.
                contextvars.Context().run(self.fn, r, *self.args)
                return 0
            except Exception as e:
                # a failure of this rank; also when a cancelled rank's cleanup
                # raises instead of leaving with SystemExit (reference: the
                # entry wrapper records every Exception)
                self.failures[r] = e
                return _RC_FAILED
            except BaseException as e:
                if _accel.cancelled():
                    # the cancellation itself (SystemExit) or any other
                    # BaseException while being cancelled: the reference's
                    # cleanup loop swallows those, the rank is no error
                    return 0
                if _is_greenlet_exit(e):
                    # the reference's wrapper lets it out of the greenlet,
                    # and greenlet takes that for a normal death
                    return 0
                # SystemExit / KeyboardInterrupt / ... from a rank nobody
                # cancelled: the reference lets it escape spawn raw; here it
                # fails the spawn (siblings are cleaned up) and spawn re-raises it
                self.failures[r] = e
                return _RC_FAILED
            finally:
                _accel.rank_running(False)
                w.dead = True
                _tls.current = None
                _forget_python_thread(pythread)
        except BaseException as e:  # nothing may escape into C
            # Ctrl-C's KeyboardInterrupt raised in the lines above the
            # body's try, or in its finally: this rank's failure, as in the body
            self.failures.setdefault(r, e)
            return _RC_FAILED

    def free(self) -> None:
        """kb_process_context_free: cancel live ranks in rank order (their
        cleanup runs), engine abort, clear both queues, join the threads.
        Ctrl-C meanwhile: _interrupt.py (a second one ends the process)."""
        undelivered = False
        with self.ctx._guard(blocking=True):
            try:
                if self.pc:
                    began = _interrupt.begin(self)
                    pc, self.pc = self.pc, 0
                    try:
                        try:
                            self.stats = _stats.read(pc)  # the totals, kept once the process context is gone
                            self.ctx.last_stats = self.stats
                        finally:  # also when reading them ran out of memory
                            _accel.process_context_free(pc)
                    finally:
                        undelivered = _interrupt.end(began)
            finally:
                self._finish()
        if undelivered and sys.exc_info()[1] is None:
            raise KeyboardInterrupt

    def cancel(self) -> None:
        """free() a spawn that may still be live; a later join raises."""
        if self.done:
            return
        self.free()
        self.outcome = RuntimeError("kbthreads: this spawn was closed before it finished")

    def _finish(self) -> None:
        self.done = True
        for w in self.ranks:
            w.dead = True
        _live_runs.discard(self)
        ctx = self.ctx
        if ctx._run is self:
            ctx._run = None
            ctx._prune_metas()
            ctx._stash.clear()

    def join_slices(self, timeout: float | None) -> bool:
        """Drive rounds until done (True) or the timeout passed (False).
        Raises SpawnException (or a raw BaseException) on failure."""
        if self.done:
            if self.outcome is not None:
                raise self.outcome
            return True
        if self.joining:
            raise RuntimeError("kbthreads: this spawn is being joined by another thread")
        _run_deferred()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self.ctx._guard():
            return self._join_locked(deadline)

    def _join_locked(self, deadline: float | None) -> bool:
        self.joining = True
        began = _interrupt.begin(self)  # Ctrl-C: to the running rank (_interrupt.py)
        undelivered = False
        try:
            done = self._join_rounds(deadline)
        finally:
            undelivered = _interrupt.end(began)
            self.joining = False
        if undelivered:
            raise KeyboardInterrupt  # pressed while no rank ran Python code: the caller's
        return done

    def _join_rounds(self, deadline: float | None) -> bool:
        while True:
            if deadline is None:
                ms = _JOIN_SLICE_MS
            else:
                ms = int(max(0.0, min(deadline - time.monotonic(), _JOIN_SLICE_MS / 1000)) * 1000)
            rc, report = _accel.join(self.pc, ms)  # the report read, and freed
            if rc == 1:
                self.free()
                break
            if rc < 0 and report is not None:  # a failure, the spawn stopped: see spawn_error
                try:
                    exc, cause = spawn_error(self.ctx, self, report)
                finally:
                    self.free()
                if self.raw_error is not None:  # from the barrier reset
                    exc, cause = self.raw_error, None
                self.outcome = exc
                if cause is None:
                    raise exc
                raise exc from cause
            if rc != 0:
                raise KbError(rc, "kb_join")
            if deadline is not None and time.monotonic() >= deadline:
                return False
        if self.raw_error is not None:
            self.outcome = self.raw_error
            raise self.raw_error
        return True


def spawn_error(ctx: Context, run: _Run, report: _accel.Report) -> tuple[BaseException, BaseException | None]:
    """The exception a failed spawn raises, and its __cause__, from
    _accel.join's report (code, message, ranks, drain_code, drain_handle,
    live, turn)."""
    code, message, ranks, drain_code, drain_id, live, turn = report
    recorded = [(r, run.failures[r] if r in run.failures else RankFailure(c, m)) for r, c, m in ranks]
    if code != _accel.KB_ESPAWN:  # the library stopped ranks still live
        where = [
            LiveRank(r, _WHERE.get(w, str(w)), ctx._handle(h) if w == _accel.KB_AT_WAIT else None) for r, w, h in live
        ]
        if code == _accel.KB_ETIMEDOUT:
            return SpawnTimeout(message, where, dict(recorded)), None
        if code == _accel.KB_EDIVERGED:
            return SpawnDiverged(message, where, dict(recorded), turn), None
        # any other stop (KB_ENOMEM while the spawn ran, say): the base class
        return SpawnStopped(message, where, dict(recorded)), None
    drain_exc = drain_h = drain_phase = None
    if drain_code != 0:
        stashed = ctx._stash.pop(drain_code, None)
        if stashed is not None:
            drain_exc, drain_h, origin = stashed
        else:  # pragma: no cover - only our hook returns nonzero
            drain_exc, drain_h, origin = KbError(drain_code), ctx._handle(drain_id), -1
        drain_phase = "pending collective" if origin == _accel.KB_WAIT_COLLECTIVE else "pending worker wait"
    first = drain_exc if drain_exc is not None else (recorded[0][1] if recorded else None)
    if first is not None and not isinstance(first, Exception):
        # KeyboardInterrupt, SystemExit (not a cancellation), ...: the
        # reference lets these escape spawn as they are
        return first, None
    errors = {r: e for r, e in recorded}
    exc = SpawnException(errors, drain_exc, drain_h, drain_phase)
    return exc, first
