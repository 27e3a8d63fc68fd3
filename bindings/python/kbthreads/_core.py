# SPDX-License-Identifier: MIT
"""The binding proper: Context, the spawn namespace, SpawnException.

Threads and the GIL
  Every rank runs fn(rank, *args) on its own OS thread (named kb-rank-N by
  the library), entered through a C function of kbthreads._accel, which
  takes the GIL for the call; every library call that may block (waiting
  for the baton, kb_join, freeing a spawn) releases it. Only the thread
  holding the baton runs: the driver (the thread inside spawn() or
  ProcessContext.join(), running the engine hooks) or one rank.

Cancellation
  Spawns run in KB_CANCEL_RETURN mode: no C unwinding ever crosses a Python
  frame. When a cancelled rank's kb_yield/kb_wait/kb_barrier returns
  KB_ECANCELED, the binding raises SystemExit at that suspension point, so
  the rank's `finally` blocks run, as they do when the reference throws
  SystemExit into a greenlet.

Handles
  Handles are arbitrary hashable Python objects; the library only ever
  sees uint64 ids. An int handle h with 1 <= h < 2**63, the usual kind, is
  its own id; the rule for every other handle is _accel.c's (handle_id),
  with the tables in the Context's _h2id and _id2h dicts.

Every library call goes through the compiled part, kbthreads._accel
(kbthreads/_accel*.c): the hot paths (the suspension points, handle ids,
a rank's ctx.wait and collective submit, the engine hooks) are written
once there, and this module calls it for the rest.
"""
from __future__ import annotations

import atexit
import collections.abc
import itertools
import operator
import sys
import threading
import warnings
import time
import weakref
from typing import Any, Callable, NamedTuple

from . import _loader as _lib
from ._loader import KbError

__all__ = [
    "Context",
    "MultiprocessingNamespace",
    "ProcessContext",
    "RankFailure",
    "SpawnException",
    "Worker",
    "accelerated",
    "barrier",
    "cancelled",
    "default_context",
    "getcurrent",
    "rank",
    "spawn",
    "world_size",
    "yield_",
]

_RC_FAILED = 1  # what a rank returns to the library when its body raised
_JOIN_SLICE_MS = 50  # the driver returns to Python this often (Ctrl-C, timeouts)
_tls = threading.local()  # .worker on rank threads
_accel = _lib.accel
_STOPS = (_accel.KB_ESPAWN, _accel.KB_ETIMEDOUT, _accel.KB_EDIVERGED)  # kb_join's failures


# ---------------------------------------------------------------------------
# SpawnException
# ---------------------------------------------------------------------------
class SpawnException(RuntimeError):
    """Raised by spawn (or ProcessContext.join) when ranks or the drain failed.

    ``errors`` maps each root-cause rank to the exception object it raised, in
    the order the failures were recorded: the rank that failed first, then any
    cancelled rank whose cancellation turned into a different error. The
    message is the reference's: ``spawn failed on ranks [1, 3]: rank 1 raised
    ValueError('x')`` (sorted ranks, first recorded rank named).

    When the engine's wait failed inside a drain, ``drain_error`` is that
    exception, ``drain_handle`` the handle and ``drain_phase`` "pending worker
    wait" or "pending collective"; the message names it (the reference only
    says ``spawn failed on ranks []``).
    """

    def __init__(
        self,
        errors: dict[int, BaseException],
        drain_error: BaseException | None = None,
        drain_handle: Any = None,
        drain_phase: str | None = None,
    ):
        self.errors = errors
        self.drain_error = drain_error
        self.drain_handle = drain_handle
        self.drain_phase = drain_phase
        first = next(iter(errors.items()), None)
        drain = ""
        if drain_error is not None:
            drain = (
                f": drain failed: engine wait for handle {drain_handle!r} "
                f"({drain_phase}) raised {drain_error!r}"
            )
        msg = f"spawn failed on ranks {sorted(errors.keys())}" + drain
        if first is not None:
            msg += ("; " if drain else ": ") + f"rank {first[0]} raised {first[1]!r}"
        super().__init__(msg)


class LiveRank(NamedTuple):
    """A rank still live when the library stopped a spawn: where it was
    suspended ("start": it never ran, "yield", "wait", "barrier") and, for
    "wait", the handle it waited for (else None)."""

    rank: int
    where: str
    handle: Any


_WHERE = {_accel.KB_AT_START: "start", _accel.KB_AT_YIELD: "yield", _accel.KB_AT_WAIT: "wait", _accel.KB_AT_BARRIER: "barrier"}


class SpawnStopped(SpawnException):
    """The library stopped a spawn whose ranks were still live (they were
    cancelled, the barrier reset ran and both queues were cleared, as after
    a failure). ``report`` is the library's text, also the message;
    ``live`` the live ranks (LiveRank, in rank order); ``errors`` as for
    SpawnException (usually empty)."""

    def __init__(self, report: str, live: list[LiveRank], errors: dict[int, BaseException] | None = None):
        super().__init__(dict(errors or {}))
        self.report = report
        self.live = list(live)
        self.args = (report,)

    def __str__(self) -> str:
        return self.report


_REPLAY_MISMATCH = "spawn: the replay file (KB_REPLAY) holds no recording of this spawn (another nprocs, or fewer spawns); no rank ran"


class SpawnTimeout(SpawnStopped):
    """The spawn reached its round limit (KB_MAX_ROUNDS in the environment)
    with ranks still live."""

    def __init__(self, report: str, live: list[LiveRank], errors: dict[int, BaseException] | None = None, turn: int = 0):
        super().__init__(report, live, errors)


class SpawnDiverged(SpawnStopped):
    """A replayed schedule (KB_REPLAY) stopped matching the program;
    ``turn`` is the 1-based turn at which it did (0 when it did not match
    from the start)."""

    def __init__(self, report: str, live: list[LiveRank], errors: dict[int, BaseException] | None = None, turn: int = 0):
        super().__init__(report, live, errors)
        self.turn = turn


class RankFailure(Exception):
    """Stands in errors[] for a failure the library recorded without a Python
    exception (not expected from Python rank code)."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


# ---------------------------------------------------------------------------
# where am I
# ---------------------------------------------------------------------------
class Worker:
    """One rank of a spawn: what the reference's greenlet was for it.

    The engine's bind step passes it to ``distributed._bind_rank(worker,
    rank)``, and ``getcurrent()`` returns it on that rank's thread, so a
    distributed layer that keyed its rank table by ``greenlet.getcurrent()``
    works unchanged with ``kbthreads.getcurrent()``. ``bool(worker)`` is True
    while the rank is started and not finished (like a greenlet's), ``dead``
    once it finished (or was cancelled before it started).
    """

    __slots__ = ("rank", "started", "dead", "native_id", "__weakref__")

    def __init__(self, rank: int):
        self.rank = rank
        self.started = False
        self.dead = False
        self.native_id: int | None = None

    @property
    def name(self) -> str:
        return f"kb-rank-{self.rank}"

    def __bool__(self) -> bool:
        return self.started and not self.dead

    def __repr__(self) -> str:
        state = "dead" if self.dead else ("running" if self.started else "unstarted")
        return f"<kbthreads.Worker rank={self.rank} {state}>"


def getcurrent() -> Worker | None:
    """The Worker of the calling rank thread, or None outside a rank."""
    return getattr(_tls, "worker", None)


def rank() -> int:
    """This thread's rank, or -1 outside a rank."""
    return _accel.rank()


def world_size() -> int:
    """The number of ranks of this rank's spawn, or 0 outside a rank."""
    return _accel.world_size()


def cancelled() -> bool:
    """True once this rank has been cancelled."""
    return _accel.cancelled()


# The suspension points (kb_yield, kb_barrier in C: they raise SystemExit
# when the rank is being cancelled, RuntimeError outside a rank).
yield_: Callable[[], None] = _accel.yield_
barrier: Callable[[], None] = _accel.barrier


def accelerated() -> bool:
    """True: the binding's hot paths run in its compiled part
    (kbthreads._accel), which every installation has. Kept for programs
    written when it was optional."""
    return True


_hook_depth: Callable[[], int] = _accel.hook_depth  # engine hooks running on this thread


def _may_drive() -> bool:
    """False on a rank thread or inside an engine hook, where freeing a
    process context or destroying a ctx is not allowed."""
    return _accel.rank() < 0 and _hook_depth() == 0


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


# ---------------------------------------------------------------------------
# the queues and the completed set, as Python containers over the library
# ---------------------------------------------------------------------------
class _Unsupported:
    def _refuse(self, *_a, **_k):
        raise TypeError(
            f"{type(self).__name__}: entries leave only through the library's drain "
            "(or the failure path); they cannot be removed from Python"
        )

    clear = pop = remove = insert = discard = __delitem__ = __setitem__ = _refuse


def _handles_from(c: "Context", copy: Callable[[], list]) -> list:
    """The handles a Core listing (pending_waits, completed_handles) gives now."""
    with c._guard():
        ids = copy()
    return [c._handle(i) for i in ids]


class PendingWaits(_Unsupported, collections.abc.Sequence):
    """``ctx._pending_worker_waits``: the pending worker waits (FIFO), read
    from the library each time. ``append(h)`` queues a wait without waiting
    (kb_enqueue_wait); draining is the library's."""

    def __init__(self, ctx: "Context"):
        self._ctx = ctx

    def _snapshot(self) -> list:
        return _handles_from(self._ctx, self._ctx._core.pending_waits)

    def append(self, h) -> None:
        c = self._ctx
        i = c._id(h)
        with c._guard():
            rc = c._core.enqueue_wait(i)
        if rc != 0:
            raise KbError(rc, "kb_enqueue_wait")

    def extend(self, hs) -> None:
        for h in list(hs):
            self.append(h)

    def copy(self) -> list:
        return self._snapshot()

    def __len__(self) -> int:
        return len(self._snapshot())

    def __getitem__(self, i):
        return self._snapshot()[i]

    def __iter__(self):
        return iter(self._snapshot())

    def __eq__(self, other):
        if isinstance(other, (list, tuple, collections.abc.Sequence)):
            return self._snapshot() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._snapshot())


class PendingCollectives(PendingWaits):
    """The backend's ``_pending_collective_handles``: entries ``(h, sip_id,
    meta)``, FIFO. ``append`` submits one (kb_collective_submit); drain phase
    (b) completes it through ``ctx.wait(h, _meta=meta)``."""

    def _snapshot(self) -> list:
        c = self._ctx
        return [(c._handle(i), sip_id, c._metas.get(token)) for i, sip_id, token in c._pending_collective_entries()]

    def append(self, entry) -> None:
        h, sip_id, meta = entry  # (TypeError or ValueError for anything but 3 items)
        c = self._ctx
        token = None
        if meta is not None:
            token = next(c._meta_tokens)
            c._metas[token] = meta
        try:
            # a rank's, in C, which checks sip_id (an integer fitting a C
            # int: TypeError, ValueError) on either side
            rc = c._core.submit(h, sip_id, token)
            if rc is NotImplemented:  # the driver side, under the context's lock
                i = c._id(h)
                with c._guard():
                    rc = c._core.collective_submit(i, operator.index(sip_id), token)
        except BaseException:
            c._metas.pop(token, None)
            raise
        if rc != 0:
            c._metas.pop(token, None)
            raise KbError(rc, "kb_collective_submit")


class CompletedSet(_Unsupported, collections.abc.Set):
    """``ctx._completed``: the handles the library has completed. ``h in``
    asks the library (kb_is_completed); ``add(h)`` completes one
    (kb_complete); iteration lists every completed handle this context has
    seen."""

    def __init__(self, ctx: "Context"):
        self._ctx = ctx

    @classmethod
    def _from_iterable(cls, it):
        return set(it)

    def __contains__(self, h) -> bool:
        c = self._ctx
        try:
            i = c._core.known_id(h)
        except TypeError:  # unhashable: cannot be a handle
            return False
        if i is None:
            return False
        with c._guard():
            rc = c._core.is_completed(i)
        if rc < 0:
            raise KbError(rc, "kb_is_completed")
        return rc == 1

    def add(self, h) -> None:
        c = self._ctx
        i = c._id(h)
        with c._guard():
            rc = c._core.complete(i)
        if rc != 0:
            raise KbError(rc, "kb_complete")

    def _snapshot(self) -> list:
        return _handles_from(self._ctx, self._ctx._core.completed_handles)

    def __iter__(self):
        return iter(self._snapshot())

    def __len__(self) -> int:
        return len(self._snapshot())

    def __repr__(self) -> str:
        return "{" + ", ".join(repr(h) for h in self._snapshot()) + "}" if len(self) else "set()"


# ---------------------------------------------------------------------------
# arguments: integers through operator.index, as range() takes them
# ---------------------------------------------------------------------------
def _int_arg(v: Any, what: str) -> int:
    """operator.index(v): TypeError for a str, a float, None, ..."""
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(v).__name__}") from None


def _size_arg(v: Any, what: str) -> int:
    """An integer >= 0 (TypeError as _int_arg; ValueError when negative)."""
    n = _int_arg(v, what)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, not {n}")
    return n


def _args_arg(args: Any) -> tuple:
    """The positional arguments after the rank: any iterable, as fn(rank, *args) takes it."""
    if isinstance(args, (str, bytes)):
        raise TypeError(f"spawn: args must be a tuple (or another iterable of arguments), not {type(args).__name__}")
    try:
        return tuple(args)
    except TypeError:
        raise TypeError(f"spawn: args must be a tuple (or another iterable of arguments), not {type(args).__name__}") from None


def _timeout_arg(timeout: Any) -> float | None:
    """None (no limit) or a real number of seconds (a negative one: no wait)."""
    if timeout is None:
        return None
    if isinstance(timeout, (str, bytes)) or not hasattr(type(timeout), "__float__"):
        raise TypeError(f"join: timeout must be a number of seconds or None, not {type(timeout).__name__}")
    t = float(timeout)
    if t != t:
        raise ValueError("join: timeout must be a number of seconds, not NaN")
    return t


def _is_greenlet_exit(e: BaseException) -> bool:
    """Is e greenlet's GreenletExit? Only a program that imported greenlet
    can raise it, so greenlet is looked up, never imported."""
    greenlet = sys.modules.get("greenlet")
    exit_type = getattr(greenlet, "GreenletExit", None)
    return isinstance(exit_type, type) and isinstance(e, exit_type)


def _name_python_thread(name: str):
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


def _forget_python_thread(t) -> None:
    if t is None:
        return
    try:
        with threading._active_limbo_lock:
            if threading._active.get(t.ident) is t:
                del threading._active[t.ident]
    except Exception:  # pragma: no cover - threading internals changed
        pass


# ---------------------------------------------------------------------------
# a run: one spawn's state, from kb_start to the freed process context
# ---------------------------------------------------------------------------
_live_runs: "weakref.WeakSet[_Run]" = weakref.WeakSet()


class _Run:
    def __init__(self, ctx: "Context", fn: Callable, args: tuple, nprocs: int):
        self.ctx = ctx
        self.fn = fn
        self.args = args
        self.nprocs = nprocs
        self.workers = [Worker(r) for r in range(nprocs)]
        self.failures: dict[int, BaseException] = {}
        self.bind_error: BaseException | None = None
        self.raw_error: BaseException | None = None  # a BaseException from the abort hook
        self.pc = 0  # the kb_process_context's address, 0 once freed
        self.done = False  # finished or freed: no rank runs any more
        self.outcome: BaseException | None = None  # what join raises once done
        self.joining = False
        self.entry = self._entry  # referenced until the pc is freed

    # Runs on rank `r`'s thread, holding the baton (and, while in Python, the GIL).
    def _entry(self, r: int) -> int:
        try:
            w = self.workers[r]
            _tls.worker = w
            w.started = True
            w.native_id = threading.get_native_id()
            pythread = _name_python_thread(w.name)
            try:
                self.fn(r, *self.args)
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
                w.dead = True
                _tls.worker = None
                _forget_python_thread(pythread)
        except BaseException:  # pragma: no cover - nothing may escape into C
            return _RC_FAILED

    def free(self) -> None:
        """kb_process_context_free: cancel live ranks in rank order (their
        cleanup runs), engine abort, clear both queues, join the threads."""
        with self.ctx._guard(blocking=True):
            if self.pc:
                pc, self.pc = self.pc, 0
                _accel.process_context_free(pc)
            self._finish()

    def cancel(self) -> None:
        """free() a spawn that may still be live; a later join raises."""
        if self.done:
            return
        self.free()
        self.outcome = RuntimeError("kbthreads: this spawn was closed before it finished")

    def _finish(self) -> None:
        self.done = True
        for w in self.workers:
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
        try:
            while True:
                if deadline is None:
                    ms = _JOIN_SLICE_MS
                else:
                    ms = int(max(0.0, min(deadline - time.monotonic(), _JOIN_SLICE_MS / 1000)) * 1000)
                rc, report = _accel.join(self.pc, ms)  # the report read, and freed
                if rc == 1:
                    self.free()
                    break
                if rc in _STOPS and report is not None:
                    try:
                        exc, cause = self.ctx._spawn_error(self, report)
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
        finally:
            self.joining = False
        if self.raw_error is not None:
            self.outcome = self.raw_error
            raise self.raw_error
        return True


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
    def workers(self) -> list[Worker]:
        return list(self._run.workers)

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

    def __enter__(self) -> "ProcessContext":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def __del__(self):
        run = getattr(self, "_run", None)
        if run is None or run.done or run.joining:
            return
        # As Python does for an unclosed file: dropping a live spawn is a
        # resource left to the collector, and its ranks may never have run.
        warnings.warn(
            f"unclosed {self!r}: its unfinished ranks are cancelled without running further "
            "(join() or close() it)",
            ResourceWarning,
            source=self,
        )
        if _may_drive():
            run.cancel()
        else:
            _defer(run.cancel)

    def __repr__(self) -> str:
        state = "done" if self._run.done else "live"
        return f"<kbthreads.ProcessContext nprocs={self._run.nprocs} {state}>"


class _Guard:
    """`with ctx._guard():` around driver-side library calls (see Context._lock).
    A rank or an engine hook passes through (it holds the baton); another
    thread finds the context busy: KbError(EBUSY), as the library says."""

    __slots__ = ("ctx", "blocking", "held")

    def __init__(self, ctx: "Context", blocking: bool):
        self.ctx = ctx
        self.blocking = blocking
        self.held = False

    def __enter__(self) -> None:
        if getattr(_tls, "worker", None) is not None or _hook_depth() > 0:
            return
        if not self.ctx._lock.acquire(self.blocking):
            raise KbError(_accel.KB_EBUSY, "the context is in use by another thread")
        self.held = True

    def __exit__(self, *exc) -> bool:
        if self.held:
            self.held = False
            self.ctx._lock.release()
        return False


# ---------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------
class Context:
    """A runtime context over a kb_ctx: the pieces of the reference's
    RuntimeContext that its spawn module touches.

    - ``engine``: any object; ``engine.wait(h)`` (if present) is called by the
      drain for every pending worker wait not yet completed, and by a
      driver-side ``ctx.wait(h)``.
    - ``distributed``: optional; ``distributed._bind_rank(worker, rank)`` is
      called for every rank before any runs, and
      ``distributed._backend._barrier.reset()`` once per failure, with both
      queues still full. Assigning it replaces
      ``distributed._backend._pending_collective_handles`` by this context's
      queue (its entries move over).
    - ``wait(h)``: in a rank, return at once if h is completed (the fast path,
      no switch), else queue h and yield until a drain completed it; on the
      driver side, call the engine and mark h completed.
    - ``yield_()``, ``barrier()``: the other suspension points.
    - ``_pending_worker_waits``, ``_completed``, ``pending_collectives``:
      the queues and the completed set, as Python containers.
    - ``multiprocessing.spawn(fn, args=(), nprocs=1, join=True)``.

    Subclass it to add your own state; call ``Context.__init__``.
    """

    def __init__(self, engine: Any = None, distributed: Any = None, *, stack_size: int = 0):
        self._h2id: dict = {}  # the handle tables (_accel.c: handle_id)
        self._id2h: dict = {}
        self._metas: dict = {}  # collective meta token -> meta
        self._meta_tokens = itertools.count(1)
        self._stash: dict = {}  # code -> (exception, handle, origin) of a failed engine wait
        self._run: _Run | None = None
        self._starting: _Run | None = None
        # Held by the thread driving a spawn (for the whole of a join=True
        # spawn, or one join() call) and by driver-side calls, so that a
        # spawn's ctx stays busy to other threads between two kb_join slices,
        # as it is during one kb_spawn call. Ranks and engine hooks, which
        # hold the baton, do not take it.
        self._lock = threading.RLock()
        self._suppress_abort = False
        self._stack_size = _size_arg(stack_size, "Context: stack_size")
        self.__waits = PendingWaits(self)
        self.__colls = PendingCollectives(self)
        self.__completed = CompletedSet(self)
        self.engine = engine
        # The C Core owns the kb_ctx (its engine self, with the C hooks),
        # holds the handle ids and runs a rank's wait and the engine's wait.
        overridden = type(self).wait is not Context.wait
        self._core = _accel.Core(self, self._h2id, self._id2h, self._metas, self._stash, overridden)
        rc = self._core.create()
        if rc != 0:
            raise KbError(rc, "kb_ctx_create")
        if not overridden:
            # ctx.wait is then the C method itself, no Python frame (a
            # subclass that overrides wait keeps its own).
            self.wait = self._core.wait  # type: ignore[method-assign]
        self._distributed = None
        self.distributed = distributed
        self.multiprocessing = MultiprocessingNamespace(self)

    def _guard(self, blocking: bool = False) -> "_Guard":
        return _Guard(self, blocking)

    # ---- handles ---------------------------------------------------------------
    def _id(self, h) -> int:
        """The id of handle h (a new one for a handle never seen)."""
        return self._core.id(h)

    def _handle(self, i: int):
        return self._core.handle(i)

    def _prune_metas(self) -> None:
        live = {token for _i, _sip, token in self._pending_collective_entries()}
        for t in [t for t in self._metas if t not in live]:
            del self._metas[t]

    def _pending_collective_entries(self) -> list[tuple[int, int, int]]:
        """The pending collectives as (id, sip_id, meta token or 0), FIFO."""
        with self._guard():
            return self._core.pending_collectives()

    # ---- the context pieces ----------------------------------------------------
    @property
    def _pending_worker_waits(self) -> PendingWaits:
        return self.__waits

    @property
    def _completed(self) -> CompletedSet:
        return self.__completed

    @property
    def pending_collectives(self) -> PendingCollectives:
        return self.__colls

    @property
    def distributed(self):
        return self._distributed

    @distributed.setter
    def distributed(self, d) -> None:
        self._distributed = d
        self._adopt_backend()

    def _adopt_backend(self) -> None:
        backend = getattr(self._distributed, "_backend", None)
        if backend is None:
            return
        cur = getattr(backend, "_pending_collective_handles", None)
        if cur is self.__colls:
            return
        for entry in list(cur or ()):
            self.__colls.append(entry)
        setattr(backend, "_pending_collective_handles", self.__colls)

    def wait(self, h, _meta=None) -> None:
        """Wait until h is completed (see the class doc). In a rank raises
        SystemExit when the rank is being cancelled; on the driver side
        raises what the engine's wait raised. ``_meta`` is what the drain
        passes for a collective (as the reference's drain does); the binding
        itself does not use it."""
        self._core.wait(h)  # a rank's wait in C; off a rank it calls _driver_wait

    def _driver_wait(self, i: int) -> None:
        """ctx.wait off a rank, for handle id i: under the context's lock."""
        with self._guard():
            self._core.driver_wait(i)

    def yield_(self) -> None:
        """Worker-side bare yield (see kbthreads.yield_)."""
        yield_()

    def barrier(self) -> None:
        """See kbthreads.barrier."""
        barrier()

    # ---- engine hooks (driver thread, holding the baton; the wait hook is _accel.c's)
    def _bind_hook(self, r: int) -> None:
        """kb_engine.bind (driver thread; _accel counts it as a hook)."""
        try:
            run = self._starting
            if run is None or run.bind_error is not None:
                return
            dist = self.distributed
            if dist is not None and hasattr(dist, "_bind_rank"):
                try:
                    dist._bind_rank(run.workers[r], r)
                except BaseException as e:
                    run.bind_error = e  # later ranks are not bound (the reference stops)
        except BaseException:  # pragma: no cover
            pass

    def _abort_hook(self) -> None:
        """kb_engine.abort (driver thread; _accel counts it as a hook)."""
        try:
            if self._suppress_abort:
                return
            backend = getattr(self.distributed, "_backend", None)
            if backend is not None:
                if hasattr(backend, "_barrier") and hasattr(backend._barrier, "reset"):
                    try:
                        backend._barrier.reset()
                    except Exception:
                        pass
                    except BaseException as e:
                        run = self._run
                        if run is not None and run.raw_error is None:
                            run.raw_error = e
        except BaseException:  # pragma: no cover
            pass

    # ---- spawning ----------------------------------------------------------------
    def _start(self, fn: Callable, args: tuple, nprocs: int) -> _Run:
        if not callable(fn):
            raise TypeError(f"spawn: fn must be callable, not {type(fn).__name__}")
        args = _args_arg(args)
        nprocs = _size_arg(nprocs, "spawn: nprocs")
        if _accel.rank() >= 0:
            raise KbError(_accel.KB_EPERM, "spawn (called from a rank)")
        if _hook_depth() > 0:
            raise KbError(_accel.KB_EBUSY, "spawn (called from an engine hook)")
        _run_deferred()
        with self._guard():
            if self._run is not None and not self._run.done:
                raise KbError(_accel.KB_EBUSY, "spawn (a spawn started with join=False is still live)")
            self._adopt_backend()
            run = _Run(self, fn, args, nprocs)
            self._starting = run
            try:
                rc, run.pc = self._core.start(run.entry, nprocs, self._stack_size)
            finally:
                self._starting = None
            if rc == _accel.KB_EDIVERGED:  # before any rank ran: no report
                raise SpawnDiverged(_REPLAY_MISMATCH, [])
            if rc != 0:
                raise KbError(rc, "spawn")
            self._run = run
            _live_runs.add(run)
        if run.bind_error is not None:
            # The reference raises out of spawn at the failing bind: no rank
            # ran, no reset, the queues untouched. Freeing the process
            # context cancels the unstarted ranks, aborts and clears the
            # queues, so the abort hook is muted and the queues restored.
            with self._guard():
                waits = list(self._pending_worker_waits)
                colls = self._pending_collective_entries()
                self._suppress_abort = True
                try:
                    run.free()
                finally:
                    self._suppress_abort = False
                for h in waits:
                    self._core.enqueue_wait(self._id(h))
                for i, sip_id, token in colls:
                    self._core.collective_submit(i, sip_id, token)
            raise run.bind_error
        return run

    def _spawn_error(self, run: _Run, report: tuple) -> tuple[BaseException, BaseException | None]:
        """The exception a failed spawn raises, and its __cause__, from
        _accel.join's report (code, message, ranks, drain_code,
        drain_handle, live, turn)."""
        code, message, ranks, drain_code, drain_id, live, turn = report
        recorded = [(r, run.failures.get(r) or RankFailure(c, m)) for r, c, m in ranks]
        if code != _accel.KB_ESPAWN:  # the library stopped ranks still live
            where = [LiveRank(r, _WHERE.get(w, str(w)), self._handle(h) if w == _accel.KB_AT_WAIT else None)
                     for r, w, h in live]
            kind = SpawnTimeout if code == _accel.KB_ETIMEDOUT else SpawnDiverged
            return kind(message, where, dict(recorded), turn), None
        drain_exc = drain_h = drain_phase = None
        if drain_code != 0:
            stashed = self._stash.pop(drain_code, None)
            if stashed is not None:
                drain_exc, drain_h, origin = stashed
            else:  # pragma: no cover - only our hook returns nonzero
                drain_exc, drain_h, origin = KbError(drain_code), self._handle(drain_id), -1
            drain_phase = "pending collective" if origin == _accel.KB_WAIT_COLLECTIVE else "pending worker wait"
        first = drain_exc if drain_exc is not None else (recorded[0][1] if recorded else None)
        if first is not None and not isinstance(first, Exception):
            # KeyboardInterrupt, SystemExit (not a cancellation), ...: the
            # reference lets these escape spawn as they are
            return first, None
        errors = {r: e for r, e in recorded}
        exc = SpawnException(errors, drain_exc, drain_h, drain_phase)
        return exc, first

    def spawn(self, fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True):
        """See MultiprocessingNamespace.spawn."""
        if not _int_arg(join, "spawn: join"):
            return ProcessContext(self._start(fn, args, nprocs))
        with self._guard():  # busy to other threads for the whole spawn, like kb_spawn
            run = self._start(fn, args, nprocs)
            try:
                run.join_slices(None)
            finally:
                if not run.done:  # e.g. KeyboardInterrupt between two slices
                    run.free()
        _run_deferred()
        return None

    # ---- teardown ------------------------------------------------------------------
    def close(self) -> None:
        """Cancel a live spawn (if any) and destroy the kb_ctx, which ends the
        rank threads it keeps parked for its next spawn. Idempotent; also done
        when the context is garbage-collected."""
        if not self._core.alive():
            return
        if not _may_drive():
            raise KbError(_accel.KB_EPERM if _accel.rank() >= 0 else _accel.KB_EBUSY, "close")
        with self._guard(blocking=True):
            if self._run is not None and not self._run.done:
                self._run.cancel()
            rc = self._core.destroy()
            if rc != 0:
                raise KbError(rc, "kb_ctx_destroy")

    def __del__(self):
        core = getattr(self, "_core", None)
        if core is None or not core.alive():
            return
        run = self._run
        if run is not None and run.joining:
            return  # cannot happen: the joining thread holds a reference
        if _may_drive():
            try:
                self.close()
            except Exception:
                pass
        else:
            def later(run=run, core=core):  # core: the kb_ctx's engine self, alive until then
                if run is not None:
                    run.cancel()
                core.destroy()

            _defer(later)


class MultiprocessingNamespace:
    """``torch.multiprocessing.spawn``-compatible namespace bound to a Context
    (the reference's ``_MultiprocessingNamespace``; attached as
    ``ctx.multiprocessing``)."""

    def __init__(self, ctx: Context) -> None:
        if not isinstance(ctx, Context):
            raise TypeError("kbthreads: the spawn namespace needs a kbthreads.Context")
        self._ctx = ctx

    def spawn(self, fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True):
        """Run ``fn(rank, *args)`` for ranks 0..nprocs-1, each on its own thread,
        one at a time in round-robin order, draining the pending queues after
        every round.

        join=True: returns None once every rank finished; raises
        SpawnException when ranks or the drain failed (siblings cancelled with
        SystemExit at their suspension points, in rank order; barrier reset;
        queues cleared). join=False: returns a ProcessContext whose
        ``join(timeout=None) -> bool`` drives the ranks.
        """
        return self._ctx.spawn(fn, args, nprocs, join)


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


def spawn(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True):
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
