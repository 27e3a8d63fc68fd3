# SPDX-License-Identifier: MIT
"""kbthreads: Python ranks on libkbthreads.

A drop-in, thread-backed replacement for the greenlet ``spawn`` namespace:
``spawn(fn, args=(), nprocs=1, join=True)`` runs ``fn(rank, *args)`` for every
rank on its own OS thread (named ``kb-rank-N``), one at a time in round-robin
order, with the pending-queue drain after every round and sibling cleanup on
failure, all done by libkbthreads, which the package reaches only through its
compiled part, kbthreads._accel (_loader.py says which copy is loaded).

    import kbthreads

    def rank_main(rank, steps):
        for i in range(steps):
            print("rank", rank, "step", i)
            kbthreads.yield_()

    kbthreads.spawn(rank_main, args=(3,), nprocs=4)

The modules, one concern each (bindings/python/README.md has the map):
_errors (the exceptions), _rank (a rank's object, where am I), _suspend
(yield_, barrier), _containers (the queues and the completed set), _context
(Context and its spawn namespace), _spawn and _run (a spawn, its process
context, joining), _default (the default context, the exit hook), _dump
(dump: the runs and every rank's Python stack), _frames (a rank's Python
stack in the library's reports), _loader (the compiled part), _driving,
_args, _threads (internal helpers).
"""

from __future__ import annotations

from ._containers import CompletedSet, PendingCollectives, PendingWaits
from ._context import Context, MultiprocessingNamespace
from ._default import default_context, spawn
from ._dump import dump
from ._errors import (
    KbError,
    KbthreadsError,
    LiveRank,
    RankFailure,
    SpawnDiverged,
    SpawnException,
    SpawnStopped,
    SpawnTimeout,
)
from ._loader import accelerated, version
from ._rank import Rank, Worker, cancelled, getcurrent, rank, world_size
from ._spawn import ProcessContext
from ._stats import SpawnStats
from ._suspend import barrier, yield_

_MultiprocessingNamespace = MultiprocessingNamespace  # the reference's name

__version__ = version()

__all__ = [
    "CompletedSet",
    "Context",
    "KbError",
    "KbthreadsError",
    "LiveRank",
    "MultiprocessingNamespace",
    "PendingCollectives",
    "PendingWaits",
    "ProcessContext",
    "Rank",
    "RankFailure",
    "SpawnDiverged",
    "SpawnException",
    "SpawnStats",
    "SpawnStopped",
    "SpawnTimeout",
    "Worker",
    "accelerated",
    "barrier",
    "cancelled",
    "default_context",
    "dump",
    "getcurrent",
    "rank",
    "spawn",
    "version",
    "world_size",
    "yield_",
]
