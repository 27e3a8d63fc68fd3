# SPDX-License-Identifier: MIT
"""The tests' model of the greenlet scheduler that kbthreads replaces.

This is not the reference module: it is a small scheduler written for the
tests in the same shape, so that a rank program can be run on greenlets and
on kbthreads side by side. Every rank is a greenlet on the calling thread;
one driver loop switches to each live rank in rank order (a round), and after
every round drains the pending waits by calling ``engine.wait(h)`` (``engine``
None: a handle completes at once). A rank's failure is re-raised after the
spawn. No sibling cleanup, no collectives: the state tests need neither.

``SCHEDULERS`` gives the tests one interface to both: each has
``spawn(fn, nprocs, engine)``, ``yield_()`` and ``wait(h)``.
"""
from __future__ import annotations

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
