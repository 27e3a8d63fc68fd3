# SPDX-License-Identifier: MIT
"""Context, a runtime context over a kb_ctx, and its spawn namespace
(MultiprocessingNamespace, ctx.multiprocessing)."""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Callable
from typing import Any, Literal, TextIO, overload

from ._args import _size_arg
from ._containers import CompletedSet, PendingCollectives, PendingWaits
from ._driving import _defer, _Guard, _may_drive, _run_deferred
from ._errors import KbError
from ._loader import accel as _accel
from ._run import _Run
from ._spawn import ProcessContext, start
from ._stats import SpawnStats
from ._suspend import barrier, yield_


def _takes_meta(wait: Any) -> bool:
    """True when wait(h, meta) binds: an engine's wait that takes a
    collective's description."""
    if wait is None:
        return False
    try:
        inspect.signature(wait).bind(None, None)
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): the one-argument form
        return False
    return True


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
    - ``last_stats``: the SpawnStats of the last spawn that ended on this
      context (finished, failed or closed), None before the first.

    Subclass it to add your own state; call ``Context.__init__``.
    """

    def __init__(self, engine: Any = None, distributed: Any = None, *, stack_size: int = 0):
        self._h2id: dict[Any, int] = {}  # the handle tables (_accel.c: handle_id)
        self._id2h: dict[int, Any] = {}
        self._metas: dict[int, Any] = {}  # collective meta token -> meta
        self._meta_tokens = itertools.count(1)
        # code -> (exception, handle, origin) of a failed engine wait
        self._stash: dict[int, tuple[BaseException, Any, int]] = {}
        self._run: _Run | None = None
        self._starting: _Run | None = None
        self.last_stats: SpawnStats | None = None
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
        self._engine_takes_meta = False
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
        self._distributed: Any = None
        self.distributed = distributed
        self.multiprocessing = MultiprocessingNamespace(self)

    def _guard(self, blocking: bool = False) -> _Guard:
        return _Guard(self, blocking)

    # ---- handles ---------------------------------------------------------------
    def _id(self, h: Any) -> int:
        """The id of handle h (a new one for a handle never seen)."""
        return self._core.id(h)

    def _handle(self, i: int) -> Any:
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
    def distributed(self) -> Any:
        return self._distributed

    @distributed.setter
    def distributed(self, d: Any) -> None:
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
        backend._pending_collective_handles = self.__colls

    @property
    def engine(self) -> Any:
        """The engine: ``engine.wait(h)`` runs the simulation until handle h
        completes. When its ``wait`` takes a second positional argument
        (``def wait(self, h, meta=None)``), a collective's ``meta`` (the third
        item of its ``pending_collectives`` entry) is passed there; worker
        waits are always ``wait(h)``."""
        return self.__engine

    @engine.setter
    def engine(self, engine: Any) -> None:
        self.__engine = engine
        self._engine_takes_meta = _takes_meta(getattr(engine, "wait", None))

    def collective(self, h: Any, meta: Any = None, sip_id: int | None = None) -> None:
        """A rank submits collective h and waits until a drain completed it.

        Appends ``(h, sip_id, meta)`` to ``pending_collectives`` (sip_id
        defaults to this rank) and suspends the rank, without queueing h as
        a worker wait, so drain phase (b) is what completes it, through
        ``engine.wait(h, meta)`` (or ``engine.wait(h)`` for an engine whose
        wait takes one argument). A completed h returns at once (the fast
        path); every rank of a collective may submit the same h, or only the
        last to arrive (the others then call ``wait_completed(h)``). Raises
        SystemExit when the rank is cancelled, RuntimeError off a rank."""
        r = _accel.rank()
        if r < 0:
            raise RuntimeError(
                "Context.collective: called outside a rank (use pending_collectives.append on the driver)"
            )
        if h in self.__completed:
            return
        self.__colls.append((h, r if sip_id is None else sip_id, meta))
        self.wait_completed(h)

    def wait_completed(self, h: Any) -> None:
        """In a rank: suspend (yield round after round) until a drain has
        completed h, without queueing it; returns at once if it is. For a
        rank waiting on a collective that another rank submits. Raises
        SystemExit when the rank is cancelled, RuntimeError off a rank."""
        completed = self.__completed
        while h not in completed:
            yield_()

    def wait(self, h: Any, _meta: Any = None) -> None:
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
        """A rank's bare yield (see kbthreads.yield_)."""
        yield_()

    def barrier(self) -> None:
        """See kbthreads.barrier."""
        barrier()

    # ---- engine hooks (driver thread, holding the baton; the wait hook is _accel.c's)
    def _bind_hook(self, r: int) -> None:
        """kb_engine.bind (driver thread; the library counts it as a hook: kb_in_hook)."""
        try:
            run = self._starting
            if run is None or run.bind_error is not None:
                return
            dist = self.distributed
            if dist is not None and hasattr(dist, "_bind_rank"):
                try:
                    dist._bind_rank(run.ranks[r], r)
                except BaseException as e:
                    run.bind_error = e  # later ranks are not bound (the reference stops)
        except BaseException:  # pragma: no cover
            pass

    def _abort_hook(self) -> None:
        """kb_engine.abort (driver thread; the library counts it as a hook: kb_in_hook)."""
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

    def dump(self, file: TextIO | None = None, *, python_frames: int = 20) -> None:
        """kbthreads.dump for this context's live spawn only: its run table
        and each live rank's Python stack, to file (default sys.stderr)."""
        from ._dump import dump

        dump(file, python_frames=python_frames, _ctx=self)

    # ---- spawning ----------------------------------------------------------------
    @overload
    def spawn(
        self, fn: Callable[..., object], args: tuple[Any, ...] = (), nprocs: int = 1, join: Literal[True] = True
    ) -> None: ...

    @overload
    def spawn(
        self, fn: Callable[..., object], args: tuple[Any, ...], nprocs: int, join: Literal[False]
    ) -> ProcessContext: ...

    @overload
    def spawn(
        self, fn: Callable[..., object], args: tuple[Any, ...] = (), nprocs: int = 1, *, join: Literal[False]
    ) -> ProcessContext: ...

    @overload
    def spawn(
        self, fn: Callable[..., object], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True
    ) -> ProcessContext | None: ...

    def spawn(
        self, fn: Callable[..., object], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True
    ) -> ProcessContext | None:
        """See MultiprocessingNamespace.spawn."""
        if not join:  # any falsy value, as torch.multiprocessing.spawn tests it
            return ProcessContext(start(self, fn, args, nprocs))
        with self._guard():  # busy to other threads for the whole spawn, like kb_spawn
            run = start(self, fn, args, nprocs)
            try:
                run.join_slices(None)
            finally:
                if not run.done:  # e.g. KeyboardInterrupt between two slices
                    run.free()
        _run_deferred()
        return None

    def reset(self) -> None:
        """Start a new simulation on this context: empty the completed set
        and both pending queues (kb_ctx_reset), so that a spawn naming its
        handles as an earlier one did waits for them again, as the first one
        did, instead of finding them completed. It keeps the engine (reset
        its own state yourself), the distributed layer, the parked rank
        threads and what the wait policy learnt. Between spawns only:
        KbError (EBUSY) while a spawn started with join=False is live or
        from an engine hook, (EPERM) from a rank."""
        if _accel.rank() >= 0:
            raise KbError(_accel.KB_EPERM, "reset (called from a rank)")
        with self._guard():
            if self._run is not None and not self._run.done:
                raise KbError(_accel.KB_EBUSY, "reset (a spawn started with join=False is still live)")
            _accel.ctx_reset(self._core)
            self._prune_metas()
            self._stash.clear()

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

    def __del__(self) -> None:
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
            # core: the kb_ctx's engine self, alive until then
            def later(run: _Run | None = run, core: _accel.Core = core) -> None:
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

    def spawn(
        self, fn: Callable[..., object], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True
    ) -> ProcessContext | None:
        """Run ``fn(rank, *args)`` for ranks 0..nprocs-1, each on its own thread,
        one at a time in round-robin order, draining the pending queues after
        every round.

        join true (any truthy value): returns None once every rank finished;
        raises SpawnException when ranks or the drain failed (siblings
        cancelled with SystemExit at their suspension points, in rank order;
        barrier reset; queues cleared). join false (False, 0, None, ...: any
        falsy value, as torch.multiprocessing.spawn tests it): returns a
        ProcessContext whose ``join(timeout=None) -> bool`` drives the ranks.
        nprocs: an int from 0 to 2**31 - 1 (a bool is refused: TypeError);
        more ranks than the machine can create threads for raises KbError
        (EAGAIN) naming the limit, before anything is allocated.
        """
        return self._ctx.spawn(fn, args, nprocs, join)
