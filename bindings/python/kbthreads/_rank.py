# SPDX-License-Identifier: MIT
"""A rank's object (Rank, the reference's greenlet for it; Worker is its
old name) and the where-am-I queries a rank thread answers."""

from __future__ import annotations

import threading

from ._loader import accel

_tls = threading.local()  # .current: the Rank of a rank thread, while its body runs


class Rank:
    """One rank of a spawn: what the reference's greenlet was for it (its
    old name, Worker, is kept as an alias).

    The engine's bind step passes it to ``distributed._bind_rank(rank_object,
    rank)``, and ``getcurrent()`` returns it on that rank's thread, so a
    distributed layer that keyed its rank table by ``greenlet.getcurrent()``
    works unchanged with ``kbthreads.getcurrent()``. ``bool(rank_object)`` is True
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
        return f"<kbthreads.Rank rank={self.rank} {state}>"


Worker = Rank  # the name this class had first: a rank is not a worker (C's src/worker.h is a reused OS thread)


def getcurrent() -> Rank | None:
    """The Rank of the calling rank thread, or None outside a rank."""
    return getattr(_tls, "current", None)


def rank() -> int:
    """This thread's rank, or -1 outside a rank."""
    return accel.rank()


def world_size() -> int:
    """The number of ranks of this rank's spawn, or 0 outside a rank."""
    return accel.world_size()


def cancelled() -> bool:
    """True once this rank has been cancelled."""
    return accel.cancelled()
