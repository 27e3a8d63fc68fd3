# SPDX-License-Identifier: MIT
"""The tests' models of the greenlet scheduler that kbthreads replaces.

Neither is the reference module (which is not part of this repository):
both are written for the tests in its shape, so that a rank program can be
run on greenlets and on kbthreads side by side.

``spawn``, ``yield_`` and ``wait`` (below) are the small one: every rank is
a greenlet on the calling thread; one driver loop switches to each live rank
in rank order (a round), and after every round drains the pending waits by
calling ``engine.wait(h)`` (``engine`` None: a handle completes at once). A
rank's failure is re-raised after the spawn. No sibling cleanup, no
collectives: the state tests need neither. ``SCHEDULERS`` gives the tests
one interface to it and to kbthreads: each has ``spawn(fn, nprocs,
engine)``, ``yield_()`` and ``wait(h)``.

``ReferenceContext`` (at the end) is the whole reference on greenlets, in
the shape of a ``kbthreads.Context``: the rounds, the two-phase drain, the
sibling cleanup in rank order, the barrier reset, the root-cause report,
with the binding's documented differences (bindings/python/README.md,
"Failure and cleanup") and its barrier (docs/design.md, "Barrier"). The
differential test (test_differential.py) runs random rank programs on it
and on kbthreads; test_greenlet_model.py holds it to the traces the real
reference printed (expected_traces.py).
"""
from __future__ import annotations

import errno
import inspect
from typing import Any, Callable

_pending: list[Any] = []  # the handles ranks wait on, drained after each round
_driver: Any = None  # the driver's greenlet while a spawn runs


def yield_() -> None:
    """Give the turn back to the driver; the rank resumes next round."""
    _driver.switch()


def wait(h: Any) -> None:
    """Queue h for the drain and suspend until the drain has waited it."""
    _pending.append(h)
    _driver.switch()


def _drain(engine: Any) -> None:
    while _pending:
        h = _pending.pop(0)
        if engine is not None:
            engine.wait(h)


def spawn(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, engine: Any = None) -> None:
    """Run fn(rank, *args) for each rank as a greenlet, round-robin, until
    every rank has returned; re-raise the first rank failure."""
    from greenlet import greenlet, getcurrent

    global _driver
    errors: dict[int, BaseException] = {}

    def entry(rank: int) -> None:
        try:
            fn(rank, *args)
        except Exception as e:  # the driver re-raises it, skipping the rest of the round
            errors[rank] = e

    ranks = [greenlet(entry) for _ in range(nprocs)]
    _driver = getcurrent()
    _pending.clear()
    try:
        while any(not g.dead for g in ranks):
            for r, g in enumerate(ranks):
                if not g.dead:
                    # A greenlet is falsy until started; its first switch passes the rank.
                    g.switch() if g else g.switch(r)
                if errors:
                    raise errors[min(errors)]
            _drain(engine)
    finally:
        _driver = None
        _pending.clear()


class _Greenlet:
    """The greenlet scheduler above, behind the tests' common interface."""

    name = "greenlet"

    def spawn(self, fn: Callable[[int], Any], nprocs: int, engine: Any = None) -> None:
        spawn(fn, nprocs=nprocs, engine=engine)

    yield_ = staticmethod(yield_)
    wait = staticmethod(wait)


class _Kbthreads:
    """kbthreads, each spawn on its own Context with the given engine."""

    name = "kbthreads"

    def __init__(self) -> None:
        self._ctx: Any = None

    def spawn(self, fn: Callable[[int], Any], nprocs: int, engine: Any = None) -> None:
        import kbthreads

        ctx = kbthreads.Context(engine)
        self._ctx = ctx
        try:
            try:
                ctx.multiprocessing.spawn(fn, nprocs=nprocs)
            except kbthreads.SpawnException as e:
                if not e.errors:  # a drain failure: no rank to blame
                    raise
                raise next(iter(e.errors.values())) from e  # the rank's own exception, as above
        finally:
            self._ctx = None
            ctx.close()

    def yield_(self) -> None:
        import kbthreads

        kbthreads.yield_()

    def wait(self, h: Any) -> None:
        self._ctx.wait(h)


GREENLET = _Greenlet()
KBTHREADS = _Kbthreads()
SCHEDULERS = (GREENLET, KBTHREADS)


# ---- the reference on greenlets, in the shape of a kbthreads.Context ---------------
#
# What it does, rule by rule (../shared/reference/SEMANTICS.md numbers them):
# ranks are bound before any runs, start lazily in rank order in round 1 (1);
# a round visits every not-finished rank in rank order, one drain after every
# round (2); the drain empties the worker waits (a), then the collectives
# (b), until both are empty, a handle completed once (3); a wait on a
# completed handle does not switch (4); a failure runs the rank's own
# cleanup, skips the rest of the round and the drain, cancels every
# not-finished sibling in rank order (never-started ones never run), resets
# the backend's barrier with both queues full, clears them (5); root causes
# are the failing rank and every cancelled rank whose cleanup raised another
# Exception (6); an engine failure in a drain takes the same path (7).
#
# And the binding's differences from the reference (its README, "Failure and
# cleanup"): a cancelled rank cannot suspend any more (a yield, a barrier or
# a wait on a handle not completed raises SystemExit again at once, a wait on
# a completed one returns); a non-Exception raised by a rank nobody
# cancelled, or by the engine in a drain, fails the spawn and escapes spawn
# as it is after the cleanup; a drain failure names the engine's handle, its
# queue and its exception; a collective whose handle is completed is not
# waited again; ranks never run are dead after spawn; a spawn from a rank is
# refused (EPERM), from an engine hook too (EBUSY). Its barrier follows
# docs/design.md ("Barrier").

EPERM = -errno.EPERM
EBUSY = -errno.EBUSY


class KbError(RuntimeError):
    """The model's refusal of a spawn: ``code`` as kbthreads.KbError's."""

    def __init__(self, code: int, what: str):
        self.code = code
        super().__init__(f"{what} ({code})")


class SpawnException(RuntimeError):
    """The model's failed spawn: ``errors`` {rank: exception} in recording
    order, and the drain failure, with kbthreads.SpawnException's message."""

    def __init__(self, errors: dict, drain_error: BaseException | None = None, drain_handle: Any = None,
                 drain_phase: str | None = None):
        self.errors = errors
        self.drain_error = drain_error
        self.drain_handle = drain_handle
        self.drain_phase = drain_phase
        msg = f"spawn failed on ranks {sorted(errors)}"
        if drain_error is not None:
            msg += f": drain failed: engine wait for handle {drain_handle!r} ({drain_phase}) raised {drain_error!r}"
        first = next(iter(errors.items()), None)
        if first is not None:
            msg += ("; " if drain_error is not None else ": ") + f"rank {first[0]} raised {first[1]!r}"
        super().__init__(msg)


class ModelRank:
    """A rank's object, as kbthreads.Rank: what _bind_rank receives and
    getcurrent() returns; true while started and not finished."""

    __slots__ = ("rank", "started", "dead", "greenlet")

    def __init__(self, rank: int):
        self.rank = rank
        self.started = False
        self.dead = False
        self.greenlet: Any = None

    def __bool__(self) -> bool:
        return self.started and not self.dead


_RANK_OF: dict = {}  # greenlet -> (its _ModelRun, rank) while a spawn runs


def getcurrent() -> ModelRank | None:
    """The calling rank's ModelRank (None off a rank), as kbthreads.getcurrent()."""
    from greenlet import getcurrent as current_greenlet

    found = _RANK_OF.get(current_greenlet())
    return found[0].ranks[found[1]] if found else None


def _takes_meta(wait: Any) -> bool:
    try:
        inspect.signature(wait).bind(None, None)
    except (TypeError, ValueError):
        return False
    return True


class _DrainFailure(Exception):
    def __init__(self, error: BaseException, handle: Any, phase: str):
        super().__init__(handle)
        self.error, self.handle, self.phase = error, handle, phase


class _ModelRun:
    """One spawn: its greenlets, driven by the greenlet that called spawn."""

    def __init__(self, ctx: "ReferenceContext", fn: Callable[..., Any], args: tuple, nprocs: int):
        from greenlet import greenlet, getcurrent as current_greenlet

        self.ctx, self.fn, self.args, self.n = ctx, fn, args, nprocs
        self.driver = current_greenlet()
        self.ranks = [ModelRank(r) for r in range(nprocs)]
        self.finished = [False] * nprocs
        self.cancelled = [False] * nprocs
        self.failures: dict[int, BaseException] = {}  # in recording order
        self.failed = False  # a rank failed in this turn
        self.nlive = nprocs
        self.rounds = 0
        self.gen = 0  # the barrier: generation, arrivals, the round it last opened in
        self.arrived = 0
        self.open_round = -1
        for r, w in enumerate(self.ranks):
            w.greenlet = greenlet(self._entry, parent=self.driver)
            _RANK_OF[w.greenlet] = (self, r)

    # ---- rank side
    def _entry(self, r: int) -> None:
        w = self.ranks[r]
        w.started = True
        try:
            self.fn(r, *self.args)
        except Exception as e:
            self.failures[r] = e
            self.failed = not self.cancelled[r] or self.failed
        except BaseException as e:
            from greenlet import GreenletExit

            if not self.cancelled[r] and not isinstance(e, GreenletExit):
                self.failures[r] = e  # a raw escape: spawn re-raises it after the cleanup
                self.failed = True
        finally:
            w.dead = True
            self.finished[r] = True
            self.nlive -= 1
            self._barrier_check()

    def suspend(self, r: int) -> None:
        """Give the turn back to the driver; SystemExit when cancelled meanwhile."""
        self.driver.switch()

    def _barrier_check(self) -> None:
        if self.arrived > 0 and self.arrived >= self.nlive:
            self.gen += 1
            self.arrived = 0
            self.open_round = self.rounds

    def barrier(self, r: int) -> None:
        if self.cancelled[r]:
            raise SystemExit
        gen = self.gen
        self.arrived += 1
        self._barrier_check()
        while True:  # every arrival suspends at least once
            self.suspend(r)
            if self.gen != gen and self.rounds != self.open_round:
                return

    # ---- driver side
    def run(self) -> None:
        ctx = self.ctx
        try:
            dist = ctx.distributed
            if dist is not None and hasattr(dist, "_bind_rank"):
                for r, w in enumerate(self.ranks):
                    with ctx._hook():
                        dist._bind_rank(w, r)  # an error escapes as it is, before any rank ran
            drain_failure = None
            while not all(self.finished):
                self.rounds += 1
                for r in range(self.n):
                    if self.finished[r]:
                        continue
                    g = self.ranks[r].greenlet
                    g.switch(r) if not self.ranks[r].started else g.switch()
                    if self.failed:
                        break
                if self.failed:
                    break
                try:
                    ctx._drain()
                except _DrainFailure as d:
                    drain_failure = d
                    break
            if self.failed or drain_failure is not None:
                self._fail(drain_failure)
        finally:
            for w in self.ranks:
                w.dead = True
                _RANK_OF.pop(w.greenlet, None)

    def _fail(self, drain: _DrainFailure | None) -> None:
        ctx = self.ctx
        for r in range(self.n):  # the cleanup, in rank order
            if self.finished[r]:
                continue
            if not self.ranks[r].started:
                self.finished[r] = True  # never runs
                continue
            self.cancelled[r] = True
            self.ranks[r].greenlet.throw(SystemExit)
            assert self.finished[r], "a cancelled rank suspended again"
        raw = None
        backend = getattr(ctx.distributed, "_backend", None)
        barrier = getattr(backend, "_barrier", None)
        if barrier is not None and hasattr(barrier, "reset"):
            try:
                with ctx._hook():
                    barrier.reset()  # both queues still full
            except Exception:
                pass
            except BaseException as e:
                raw = e
        ctx._pending_worker_waits.clear()
        ctx.pending_collectives.clear()
        first = drain.error if drain is not None else next(iter(self.failures.values()), None)
        if raw is not None:
            raise raw
        if first is not None and not isinstance(first, Exception):
            raise first
        exc = SpawnException(dict(self.failures), drain.error if drain else None,
                             drain.handle if drain else None, drain.phase if drain else None)
        raise exc from first


class _Hook:
    def __init__(self, ctx: "ReferenceContext"):
        self.ctx = ctx

    def __enter__(self) -> None:
        self.ctx._hooks += 1

    def __exit__(self, *exc: Any) -> None:
        self.ctx._hooks -= 1


class ReferenceContext:
    """The reference's runtime context and spawn on greenlets, with the
    binding's differences (see above); its pieces are named as
    kbthreads.Context's: ``engine``, ``distributed``, ``wait``, ``yield_``,
    ``barrier``, ``collective``, ``_pending_worker_waits``, ``_completed``,
    ``pending_collectives``, ``multiprocessing.spawn`` and ``spawn``
    (join=True only)."""

    def __init__(self, engine: Any = None, distributed: Any = None):
        self.engine = engine
        self._pending_worker_waits: list = []
        self._completed: set = set()
        self.pending_collectives: list = []  # (h, sip_id, meta), FIFO
        self._hooks = 0
        self._run: _ModelRun | None = None
        self._distributed = None
        self.distributed = distributed
        self.multiprocessing = self  # .spawn: the same signature

    @property
    def distributed(self) -> Any:
        return self._distributed

    @distributed.setter
    def distributed(self, d: Any) -> None:
        self._distributed = d
        backend = getattr(d, "_backend", None)
        if backend is not None:  # the backend's queue is the context's (kbthreads.Context does so)
            self.pending_collectives.extend(getattr(backend, "_pending_collective_handles", None) or ())
            backend._pending_collective_handles = self.pending_collectives

    def _hook(self) -> _Hook:
        return _Hook(self)

    def _where(self) -> tuple[_ModelRun, int] | None:
        from greenlet import getcurrent as current_greenlet

        return _RANK_OF.get(current_greenlet())

    def _engine_wait(self, h: Any, meta: Any = None, collective: bool = False) -> None:
        wait = getattr(self.engine, "wait", None)
        if wait is None:
            return
        with self._hook():
            if collective and _takes_meta(wait):
                wait(h, meta)
            else:
                wait(h)

    def wait(self, h: Any, _meta: Any = None) -> None:
        where = self._where()
        if where is None:  # the driver side: the engine, never queued
            if h in self._completed:
                return
            self._engine_wait(h)
            self._completed.add(h)
            return
        run, r = where
        if h in self._completed:
            return  # the fast path, also for a cancelled rank
        if run.cancelled[r]:
            raise SystemExit
        self._pending_worker_waits.append(h)
        while h not in self._completed:
            run.suspend(r)

    def yield_(self) -> None:
        where = self._where()
        if where is None:
            raise KbError(EPERM, "yield_ (called outside a rank)")
        run, r = where
        if run.cancelled[r]:
            raise SystemExit
        run.suspend(r)

    def barrier(self) -> None:
        where = self._where()
        if where is None:
            raise KbError(EPERM, "barrier (called outside a rank)")
        where[0].barrier(where[1])

    def collective(self, h: Any, meta: Any = None, sip_id: int | None = None) -> None:
        where = self._where()
        if where is None:
            raise RuntimeError("collective: called outside a rank")
        if h in self._completed:
            return
        self.pending_collectives.append((h, where[1] if sip_id is None else sip_id, meta))
        while h not in self._completed:
            self.yield_()

    def _drain(self) -> None:
        waits, colls = self._pending_worker_waits, self.pending_collectives
        overridden = type(self).wait is not ReferenceContext.wait
        while waits or colls:
            while waits:  # (a) worker waits, FIFO
                h = waits.pop(0)
                if h not in self._completed:
                    try:
                        self._engine_wait(h)
                    except BaseException as e:
                        raise _DrainFailure(e, h, "pending worker wait") from None
                    self._completed.add(h)
            while colls:  # (b) collectives, FIFO; a completed handle is not waited again
                h, _sip, meta = colls.pop(0)
                if h not in self._completed:
                    try:
                        if overridden:  # as the reference's drain calls it
                            with self._hook():
                                self.wait(h, _meta=meta)
                        else:
                            self._engine_wait(h, meta, collective=True)
                    except BaseException as e:
                        raise _DrainFailure(e, h, "pending collective") from None
                    self._completed.add(h)

    def spawn(self, fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True) -> None:
        if self._where() is not None:
            raise KbError(EPERM, "spawn (called from a rank)")
        if self._hooks:
            raise KbError(EBUSY, "spawn (called from an engine hook)")
        if nprocs < 0:
            raise ValueError(f"nprocs must be >= 0, not {nprocs}")
        run = _ModelRun(self, fn, tuple(args), nprocs)
        self._run = run
        try:
            run.run()
        finally:
            self._run = None
