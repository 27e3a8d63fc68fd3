# SPDX-License-Identifier: MIT
"""torch.distributed's caches, kept per rank.

Many of torch.distributed's caches are process wide and keyed by objects
that hold a DeviceMesh: DTensor's redistribution plans
(``_redistribute._gen_transform_infos``, ``_planner_cache``), its sharding
propagation's tensor metadata
(``ShardingPropagator._propagate_tensor_meta_cached``) and its cost model
(``MeshTopoInfo.build_from_mesh``). What they hold depends on the rank
(a plan carries the rank's local shapes), so two ranks' meshes must never
compare equal. PyTorch makes them differ only for its "threaded" backend,
by recording the creating thread in ``DeviceMesh._thread_id``. Here every
mesh made on a rank thread records that rank's key instead, whatever the
backend's name: an int unique to one rank of one spawn (a rank's thread is
parked and may serve a rank of a later spawn, so a thread id would not
do). docs/rank-state.md lists every cache and how it is kept per rank.

The caches that are per thread already (DTensor's sharding cache, its C++
fast path's, the mesh stack) live in the rank's thread state and go with
it when the rank ends. The process-wide ones above keep meshes, and
through them the spawn's groups, alive: they are emptied when the last
spawn ends (torch then recomputes what it needs).
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable
from typing import Any

from . import _compat

_keys = itertools.count(1)
_saved: dict[str, Any] = {}


def new_key() -> int:
    """A rank's key: unique in the process, never a thread id's value in
    practice (thread ids are addresses, these count from 1)."""
    return next(_keys)


def install(current_key: Callable[[], int | None]) -> None:
    """Meshes made on a rank thread record current_key() (None: not a
    rank thread; the mesh is left as torch made it)."""
    from torch.distributed.device_mesh import DeviceMesh

    original = DeviceMesh.__init__
    _saved["DeviceMesh.__init__"] = original

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        key = current_key()
        if key is not None and _compat.mesh_unkeyed(self):
            _compat.key_mesh(self, key)

    DeviceMesh.__init__ = init  # type: ignore[method-assign]


def uninstall() -> None:
    from torch.distributed.device_mesh import DeviceMesh

    original = _saved.pop("DeviceMesh.__init__", None)
    if original is not None:
        DeviceMesh.__init__ = original  # type: ignore[method-assign]
    _release_process_caches()


def _release_process_caches() -> None:
    """Empty the process-wide caches that hold meshes (those of modules
    already imported: nothing is imported for this). A cache torch no
    longer has under that name is skipped."""
    for module, path in _compat.DTENSOR_PROCESS_CACHES:
        mod = sys.modules.get(module)
        if mod is None:
            continue
        try:
            obj = _compat.resolve(mod, path)
        except AttributeError:
            continue
        clear = getattr(obj, "cache_clear", None) or getattr(obj, "clear", None)
        if callable(clear):
            clear()
