# SPDX-License-Identifier: MIT
"""kbthreads.torch: unmodified ``torch.distributed`` programs on kbthreads
ranks, in one process, deterministic.

Change the launch line and nothing else::

    import kbthreads.torch as mp          # was: import torch.multiprocessing as mp

    def train(rank, world_size):
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        model = DistributedDataParallel(make_model())
        ...

    mp.spawn(train, args=(4,), nprocs=4)

Each rank is a kbthreads rank (its own OS thread, one running at a time in
rank order). Inside a spawn, ``torch.distributed`` is per rank: its
``init_process_group`` (whatever CPU backend name it is given: "gloo",
None, "cpu:gloo", "kbthreads"; ``init_method``, ``MASTER_ADDR`` /
``MASTER_PORT`` and ``store`` are accepted, no socket is opened) gives the
rank its own default group, and so on for ``new_group``. A collective parks
the rank until every member of its group arrived and the drain completed it
through the context's engine, which receives a :class:`Collective` as the
entry's ``meta``. Results combine ranks in rank order, bit-identical from
run to run. Calls that do not match across a group raise RuntimeError
(:class:`CollectiveError`) in every rank involved; ranks that can never
complete are reported as a collective deadlock. docs/torch.md has the
whole story.

Importing this module imports torch (``import kbthreads`` does not).
"""

from __future__ import annotations

try:
    import torch as _torch
    import torch.distributed as _dist
except ImportError as e:  # pragma: no cover - exercised where torch is missing
    raise ImportError(f"kbthreads.torch needs PyTorch 2.x (pip install torch): {e}") from e

if not _dist.is_available():  # pragma: no cover
    raise ImportError("kbthreads.torch needs a PyTorch build with torch.distributed")
if int(_torch.__version__.split(".")[0]) < 2:  # pragma: no cover - Debian 12's python3-torch is 1.13
    raise ImportError(f"kbthreads.torch needs PyTorch 2.x, this is {_torch.__version__}")

from . import _compat  # noqa: F401  # checks PyTorch's private names kbthreads.torch uses, once
from ._group import BACKEND, KbProcessGroup
from ._meeting import Collective, CollectiveError
from ._network import Network
from ._simtime import SimRun
from ._spawn import TorchProcessContext, sim_memory, sim_time, spawn
from ._store import KbStore
from ._work import KbWork
from ._world import register_backend

register_backend()  # "kbthreads" is a backend name from the import on

__all__ = [
    "BACKEND",
    "Collective",
    "CollectiveError",
    "KbProcessGroup",
    "KbStore",
    "KbWork",
    "Network",
    "SimRun",
    "sim_memory",
    "sim_time",
    "TorchProcessContext",
    "spawn",
]
