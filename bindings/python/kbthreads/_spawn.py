# SPDX-License-Identifier: MIT
"""Starting a spawn (start) and what spawn(..., join=False) returns
(ProcessContext)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from . import _frames, _stats
from ._args import _args_arg, _nprocs_arg, _timeout_arg
from ._driving import _defer, _in_hook, _may_drive, _run_deferred
from ._errors import KbError, SpawnDiverged
from ._loader import accel as _accel
from ._rank import Rank
from ._run import _live_runs, _Run
from ._stats import SpawnStats

if TYPE_CHECKING:
    from ._context import Context

# Above this many ranks the machine's limits are checked before the Rank
# objects are made (kb_start checks them again, before it allocates
# anything): that many Rank objects cost little, 2**31 of them gigabytes.
_PRECHECK_ABOVE = 1024

_REPLAY_MISMATCH = (
    "spawn: the replay file (KB_REPLAY) holds no recording of this spawn (another nprocs, or fewer spawns); no rank ran"
)


class ProcessContext:
    """What ``spawn(..., join=False)`` returns: the ranks exist and are bound
    but have not run. ``join()`` drives them (on the calling thread).

    Close it (``close()``, a ``with`` block, or by dropping it) to cancel the
    ranks that have not finished: each leaves at its suspension point with
    SystemExit, in rank order, then the barrier reset runs and both queues
    are cleared, as after a failure.
    """

    def __init__(self, run: _Run):
        self._run = run

    @property
    def ranks(self) -> list[Rank]:
        """The spawn's Rank objects, in rank order."""
        return list(self._run.ranks)

    @property
    def workers(self) -> list[Rank]:
        """The old name of ``ranks``, kept as an alias."""
        return self.ranks

    @property
    def stats(self) -> SpawnStats:
        """The spawn's statistics so far (rounds, turns, handoffs, the wait
        policy's choice and figures); once it finished or was closed, its
        totals."""
        run = self._run
        if run.pc:
            return _stats.read(run.pc)
        assert run.stats is not None
        return run.stats

    def join(self, timeout: float | None = None) -> bool:
        """Run rounds until every rank finished (True) or ``timeout`` seconds
        passed at the end of a round, after its drain (False; at least one
        round per call). Raises SpawnException when ranks or the drain failed;
        once finished it returns True again (or raises the same exception)."""
        run = self._run
        timeout = _timeout_arg(timeout)
        if not _may_drive():
            raise KbError(_accel.KB_EPERM if _accel.rank() >= 0 else _accel.KB_EBUSY, "join")
        return run.join_slices(timeout)

    def close(self) -> None:
        """Cancel every rank that has not finished and free the spawn."""
        run = self._run
        if run.done:
            return
        if run.joining:
            raise RuntimeError("kbthreads: cannot close a spawn while another thread joins it")
        if not _may_drive():
            raise KbError(_accel.KB_EPERM if _accel.rank() >= 0 else _accel.KB_EBUSY, "close")
        run.cancel()
        if run.raw_error is not None:  # e.g. KeyboardInterrupt in the barrier reset
            raise run.raw_error

    def __enter__(self) -> ProcessContext:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        run = getattr(self, "_run", None)
        if run is None or run.done or run.joining:
            return
        # As Python does for an unclosed file: dropping a live spawn is a
        # resource left to the collector, and its ranks may never have run.
        warnings.warn(
            f"unclosed {self!r}: its unfinished ranks are cancelled without running further (join() or close() it)",
            ResourceWarning,
            stacklevel=1,  # (a finalizer: no caller's line to point at)
            source=self,
        )
        if _may_drive():
            run.cancel()
        else:
            _defer(run.cancel)

    def __repr__(self) -> str:
        state = "done" if self._run.done else "live"
        return f"<kbthreads.ProcessContext nprocs={self._run.nprocs} {state}>"


def start(ctx: Context, fn: Callable[..., object], args: tuple[Any, ...], nprocs: int) -> _Run:
    """kb_start on ctx: the ranks exist and are bound, none has run."""
    if not callable(fn):
        raise TypeError(f"spawn: fn must be callable, not {type(fn).__name__}")
    args = _args_arg(args)
    nprocs = _nprocs_arg(nprocs)
    if _accel.rank() >= 0:
        raise KbError(_accel.KB_EPERM, "spawn (called from a rank)")
    if _in_hook():
        raise KbError(_accel.KB_EBUSY, "spawn (called from an engine hook)")
    _run_deferred()
    _frames.install()  # once per process: a rank's Python stack in the stall and crash reports
    with ctx._guard():
        if ctx._run is not None and not ctx._run.done:
            raise KbError(_accel.KB_EBUSY, "spawn (a spawn started with join=False is still live)")
        if nprocs > _PRECHECK_ABOVE:
            rc, why = _accel.spawn_check(ctx._core, nprocs, ctx._stack_size)
            if rc != 0:
                raise _start_error(ctx, rc, nprocs, why)
        ctx._adopt_backend()
        run = _Run(ctx, fn, args, nprocs)
        ctx._starting = run
        try:
            rc, run.pc = ctx._core.start(run.entry, nprocs, ctx._stack_size)
        finally:
            ctx._starting = None
        if rc == _accel.KB_EDIVERGED:  # before any rank ran: no report
            raise SpawnDiverged(_REPLAY_MISMATCH, [])
        if rc != 0:
            raise _start_error(ctx, rc, nprocs, None)
        ctx._run = run
        _live_runs.add(run)
    if run.bind_error is not None:
        _undo_bound(ctx, run)
        raise run.bind_error
    return run


def _start_error(ctx: Context, rc: int, nprocs: int, why: str | None) -> KbError:
    """KbError(rc) for a spawn that did not start; for KB_EAGAIN it says
    which limit of the machine the spawn exceeds (kb_spawn_check's words)."""
    if rc == _accel.KB_EAGAIN:
        if why is None:
            _, why = _accel.spawn_check(ctx._core, nprocs, ctx._stack_size)
        if why:
            return KbError(rc, f"spawn: more ranks than this machine can run now: {why}")
    return KbError(rc, "spawn")


def _undo_bound(ctx: Context, run: _Run) -> None:
    """The reference raises out of spawn at the failing bind: no rank ran,
    no reset, the queues untouched. Freeing the process context cancels
    the unstarted ranks, aborts and clears the queues, so the abort hook is
    muted and the queues restored."""
    with ctx._guard():
        waits = list(ctx._pending_worker_waits)
        colls = ctx._pending_collective_entries()
        ctx._suppress_abort = True
        try:
            run.free()
        finally:
            ctx._suppress_abort = False
        for h in waits:
            ctx._core.enqueue_wait(ctx._id(h))
        for i, sip_id, token in colls:
            ctx._core.collective_submit(i, sip_id, token)
