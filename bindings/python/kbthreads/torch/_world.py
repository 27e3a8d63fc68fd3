# SPDX-License-Identifier: MIT
"""Giving every rank its own ``torch.distributed``.

``torch.distributed`` keeps its process groups in one process-wide object,
``distributed_c10d._world``. While kbthreads.torch spawns run, that object
is replaced by a proxy that answers for the calling thread: a rank thread
gets its own world (its default group, its subgroups, its group count),
every other thread the original one. Three more hooks, also only for rank
threads: ``rendezvous`` hands out the spawn's in-process store and the
rank's place (no socket is opened), ``_new_process_group_helper`` serves
every CPU backend name with the kbthreads backend, and C++'s registry of
groups by name is made per thread. Outside rank threads each hook calls
what it replaced. The last spawn to end puts everything back.
"""

from __future__ import annotations

import collections
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import _compat, _dtensor_ops, _funcol, _rank_caches, _rank_hooks
from ._group import BACKEND, KbProcessGroup
from ._meeting import GroupInfo, SpawnTable
from ._store import KbStore

_tls = threading.local()  # .rank: the RankState of a rank thread, while its body runs


@dataclass
class RankState:
    table: SpawnTable
    rank: int
    world_size: int
    store: KbStore
    world: _RankWorld | None = None  # this rank's world
    incarnations: collections.Counter[str] = field(default_factory=collections.Counter)
    key: int = field(default_factory=_rank_caches.new_key)  # this rank of this spawn, in torch's caches


def current_key() -> int | None:
    """The calling rank's key (_rank_caches.py), None off a rank."""
    st = current()
    return st.key if st is not None else None


def current() -> RankState | None:
    return getattr(_tls, "rank", None)


class _RankWorld(_compat.World):
    """A _World whose maps are its own (the base class keeps some of them in
    module globals)."""

    def __init__(self) -> None:
        super().__init__()
        self._maps: dict[str, dict[Any, Any]] = {
            k: {} for k in ("pg_map", "pg_names", "pg_group_ranks", "pg_backend_config", "tags_to_pg", "pg_to_tag")
        }
        self._count = 0

    pg_map = property(lambda self: self._maps["pg_map"])
    pg_names = property(lambda self: self._maps["pg_names"])
    pg_group_ranks = property(lambda self: self._maps["pg_group_ranks"])
    pg_backend_config = property(lambda self: self._maps["pg_backend_config"])
    tags_to_pg = property(lambda self: self._maps["tags_to_pg"])
    pg_to_tag = property(lambda self: self._maps["pg_to_tag"])

    @property
    def group_count(self) -> int:
        return self._count

    @group_count.setter
    def group_count(self, value: int) -> None:
        self._count = value


class _WorldProxy:
    """Stands in for ``distributed_c10d._world``: every attribute is the
    calling thread's world's."""

    def __init__(self, original: Any) -> None:
        object.__setattr__(self, "_original", original)

    def _target(self) -> Any:
        st = current()
        return st.world if st is not None else object.__getattribute__(self, "_original")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target(), name, value)


# ---- the backend ------------------------------------------------------------------------
def _create(opts: Any, pg_options: Any = None) -> KbProcessGroup:
    """The kbthreads backend's creator (extended API): one group object for
    the calling rank."""
    st = current()
    if st is None:
        raise RuntimeError(
            "kbthreads.torch: the 'kbthreads' backend serves only the ranks of kbthreads.torch.spawn; "
            "call init_process_group inside a rank function"
        )
    ranks = list(opts.global_ranks_in_group) or list(range(st.world_size))
    default = not opts.global_ranks_in_group
    if default and (opts.group_size != st.world_size or opts.group_rank != st.rank):
        raise ValueError(
            f"kbthreads.torch: init_process_group(rank={opts.group_rank}, world_size={opts.group_size}) "
            f"in rank {st.rank} of a spawn of {st.world_size}: rank and world size come from the spawn "
            "(pass them as the spawn gives them, or leave them out)"
        )
    name = str(opts.group_id)
    inc = st.incarnations[name]
    st.incarnations[name] += 1
    info = GroupInfo(name, ranks, inc)
    return KbProcessGroup(st.table, info, ranks.index(st.rank), st.rank)


_CPU_NAMES = {"gloo", "undefined", BACKEND}
# PyTorch's fake backend (torch.testing._internal.distributed.fake_pg): a
# group that communicates nothing, with whatever rank and world size it is
# asked for, made inside one process by design. A rank that asks for one
# gets one, as its own process would (PyTorch's tests make one per rank).
_OWN_NAMES = {"fake"}


def _serve_backend(backend: Any) -> str:
    """The backend string a rank's group is made with: every name that
    serves CPU tensors becomes kbthreads; "fake" stays PyTorch's own;
    others are refused."""
    text = str(backend).lower()
    if ":" in text or "," in text:
        devices = dict(part.split(":", 1) for part in text.split(",") if ":" in part)
        cpu = devices.get("cpu")
        if cpu in _CPU_NAMES:
            return BACKEND
        if cpu in _OWN_NAMES and all(v in _OWN_NAMES for v in devices.values()):
            return text
        raise ValueError(
            f"kbthreads.torch: backend {str(backend)!r} has no CPU backend kbthreads can stand in for "
            f"(it serves gloo, 'cpu:gloo', None and 'kbthreads'; CUDA collectives are not simulated)"
        )
    if text in _CPU_NAMES:
        return BACKEND
    if text in _OWN_NAMES:
        return text
    raise ValueError(
        f"kbthreads.torch: backend {str(backend)!r} is not served: kbthreads stands in for CPU backends "
        "('gloo', 'cpu:gloo', None, 'kbthreads') and makes PyTorch's 'fake' groups; "
        "CUDA collectives (nccl) are not simulated"
    )


# ---- the hooks ----------------------------------------------------------------------------
_lock = threading.Lock()
_users = 0
_saved: dict[str, Any] = {}


def _rendezvous(url: str, rank: int = -1, world_size: int = -1, **kwargs: Any) -> Iterator[tuple[c10d.Store, int, int]]:
    st = current()
    if st is None:
        yield from _saved["rendezvous"](url, rank, world_size, **kwargs)
        return
    q = urllib.parse.parse_qs(urllib.parse.urlparse(url).query) if url else {}
    if rank == -1 and "rank" in q:
        rank = int(q["rank"][0])
    if world_size == -1 and "world_size" in q:
        world_size = int(q["world_size"][0])
    if rank not in (-1, st.rank) or world_size not in (-1, st.world_size):
        raise ValueError(
            f"kbthreads.torch: init_process_group(rank={rank}, world_size={world_size}) in rank {st.rank} "
            f"of a spawn of {st.world_size}: rank and world size come from the spawn "
            "(pass them as the spawn gives them, or leave them out)"
        )
    yield (st.store, st.rank, st.world_size)


def _group_helper_hook(
    group_size: int, group_rank: int, global_ranks: list[int], backend: Any, *args: Any, **kwargs: Any
) -> Any:
    if current() is not None:
        backend = dist.Backend(_serve_backend(backend))
    return _saved[_compat.NEW_GROUP_HELPER_ATTR](group_size, group_rank, global_ranks, backend, *args, **kwargs)


def register_backend() -> None:
    """Register 'kbthreads' with torch.distributed (once)."""
    if not _compat.backend_registered(BACKEND):
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "cuda"])


def install() -> None:
    """Put the per-thread world and the hooks in place (counted: the last
    uninstall restores torch.distributed as it was)."""
    global _users
    with _lock:
        if _users == 0:
            register_backend()
            hooks = {
                _compat.WORLD_ATTR: _WorldProxy(getattr(c10d, _compat.WORLD_ATTR)),
                "rendezvous": _rendezvous,
                _compat.NEW_GROUP_HELPER_ATTR: _group_helper_hook,
            }
            for name, hook in hooks.items():
                _saved[name] = getattr(c10d, name)
                setattr(c10d, name, hook)
            _compat.set_thread_isolation_mode(True)
            _rank_caches.install(current_key)
            _rank_hooks.install(current_key)
        _users += 1


def uninstall() -> None:
    global _users
    with _lock:
        _users -= 1
        if _users == 0:
            _compat.set_thread_isolation_mode(False)
            for name in (_compat.WORLD_ATTR, "rendezvous", _compat.NEW_GROUP_HELPER_ATTR):
                setattr(c10d, name, _saved.pop(name))
            _rank_caches.uninstall()
            _rank_hooks.uninstall()
            _dtensor_ops.unwatch_propagation()


def enter_rank(st: RankState) -> None:
    st.world = _RankWorld()
    _tls.rank = st


def leave_rank(st: RankState) -> None:
    """The rank's groups go with it: its world, and its entries in the
    per-thread registry (the thread is parked for the next spawn); so do
    the global module hooks it left registered and the functional
    collectives it never waited (its process would have taken them along)."""
    try:
        if st.world is not None and st.world.default_pg is not None:
            try:
                c10d.destroy_process_group()
            except Exception:
                pass
        _compat.unregister_all_process_groups()
    finally:
        _tls.rank = None
        _rank_hooks.forget(st.key)
        _funcol.forget()
