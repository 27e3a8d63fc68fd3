# SPDX-License-Identifier: MIT
"""kbthreads: Python ranks on libkbthreads.

A drop-in, thread-backed replacement for the greenlet ``spawn`` namespace:
``spawn(fn, args=(), nprocs=1, join=True)`` runs ``fn(rank, *args)`` for every
rank on its own OS thread (named ``kb-rank-N``), one at a time in round-robin
order, with the pending-queue drain after every round and sibling cleanup on
failure, all done by libkbthreads, which the package carries in its compiled
part, kbthreads._accel (see _lib.py for which copy is loaded).

    import kbthreads

    def rank_main(rank, steps):
        for i in range(steps):
            print("rank", rank, "step", i)
            kbthreads.yield_()

    kbthreads.spawn(rank_main, args=(3,), nprocs=4)
"""
from ._core import (
    Context,
    MultiprocessingNamespace,
    ProcessContext,
    RankFailure,
    LiveRank,
    SpawnDiverged,
    SpawnException,
    SpawnStopped,
    SpawnTimeout,
    Worker,
    accelerated,
    barrier,
    cancelled,
    default_context,
    getcurrent,
    rank,
    spawn,
    world_size,
    yield_,
)
from ._core import CompletedSet, PendingCollectives, PendingWaits
from ._loader import KbError, version

_MultiprocessingNamespace = MultiprocessingNamespace  # the reference's name

__version__ = version()

__all__ = [
    "CompletedSet",
    "Context",
    "KbError",
    "LiveRank",
    "MultiprocessingNamespace",
    "PendingCollectives",
    "PendingWaits",
    "ProcessContext",
    "RankFailure",
    "SpawnDiverged",
    "SpawnException",
    "SpawnStopped",
    "SpawnTimeout",
    "Worker",
    "accelerated",
    "barrier",
    "cancelled",
    "default_context",
    "getcurrent",
    "rank",
    "spawn",
    "version",
    "world_size",
    "yield_",
]
