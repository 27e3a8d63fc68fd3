# SPDX-License-Identifier: MIT
"""kbthreads.torch.spawn: torch.multiprocessing.spawn's signature, kbthreads
ranks underneath, each with its own torch.distributed."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .._context import Context
from .._spawn import ProcessContext
from . import _world
from ._compute import compute_model
from ._meeting import SpawnTable
from ._network import Network
from ._rank_launch import ArgvArg, EnvironArg
from ._rank_process import Launch
from ._simtime import NetworkEngine, SimRun, Timing, rank_time
from ._store import KbStore

_spawn_ids = itertools.count(1)


class TorchProcessContext:
    """What ``spawn(..., join=False)`` returns: a kbthreads ProcessContext
    (``join(timeout=None) -> bool``, ``close()``, ``with``) that restores
    torch.distributed once the spawn is over."""

    def __init__(self, pc: ProcessContext, launch: Launch) -> None:
        self._pc = pc
        self._launch = launch
        self._installed = True

    def _release(self) -> None:
        if self._installed:
            self._installed = False
            _finish(self._launch)

    def join(self, timeout: float | None = None) -> bool:
        try:
            done = self._pc.join(timeout)
        except BaseException:
            self._release()
            raise
        if done:
            self._release()
        else:
            self._launch.take_back()  # ranks are parked: the caller's own process state meanwhile
        return done

    def close(self) -> None:
        try:
            self._pc.close()
        finally:
            self._release()

    def __enter__(self) -> TorchProcessContext:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pc, name)

    def __del__(self) -> None:
        if getattr(self, "_installed", False):
            try:
                self.close()
            except Exception:
                pass


def spawn(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
    *,
    context: Context | None = None,
    network: Network | None = None,
    device_flops: float | None = None,
    device_bandwidth: float | None = None,
    compute: Any = None,
    cpu_factor: float = 1.0,
    memory: bool = False,
    environ: EnvironArg = None,
    argv: ArgvArg = None,
) -> TorchProcessContext | SimRun | None:
    """Run ``fn(rank, *args)`` on ``nprocs`` kbthreads ranks, the way
    ``torch.multiprocessing.spawn`` runs it in processes; inside, each rank's
    ``torch.distributed.init_process_group(...)`` gives it a group served by
    kbthreads (see the package doc). ``daemon`` and ``start_method`` are
    accepted and ignored (ranks are threads of this process). ``context``: a
    kbthreads.Context whose engine completes the collectives (default: a new
    Context with no engine, where each collective completes at the drain
    after its last rank arrives).

    Simulated time (docs/torch-time.md): with ``network`` (a
    kbthreads.torch.Network) every collective is priced by it and every
    rank keeps a simulated clock; compute between collectives costs the
    FLOPs the rank executed (counted by its own FlopCounterMode) divided by
    ``device_flops`` (none given: compute is free), or, with
    ``compute="roofline"``, each op ``max(flops / device_flops, bytes /
    device_bandwidth)`` (bytes: its tensor arguments and results), or, with
    ``compute="cpu_time"``, the rank thread's CPU time times ``cpu_factor``,
    or ``compute(rank, flops, cpu_seconds) -> seconds``. ``memory=True``:
    each rank's peak and final bytes of the tensors it allocated, by
    category, in the summary, and a memory track per rank in the timeline. The spawn then
    returns a SimRun (``summary()``, ``write_timeline(path)``,
    ``write_plot(path)``); it needs ``join=True`` and a context without an
    engine.

    Process-wide state per rank (docs/rank-state.md): each rank has its own
    torch default CPU generator, ``random`` functions, numpy legacy global
    RandomState, ``os.environ``, ``sys.argv``, ``sys.excepthook`` and
    ``sys.modules["__main__"]``, each starting as a copy of the caller's when
    the spawn begins; the caller's are unchanged when the spawn ends.
    ``environ``: entries added to each rank's copy of the caller's
    ``os.environ`` (a mapping of str to str, or ``environ(rank)`` returning
    one); ``argv``: each rank's ``sys.argv`` (a sequence of str, or
    ``argv(rank)`` returning one; default a copy of the caller's). Callables
    are called on the caller's thread, for every rank, before any rank starts.

    Raises kbthreads.SpawnException when ranks fail (root causes only),
    after cancelling the others in rank order."""
    if not callable(fn):
        raise TypeError(f"kbthreads.torch.spawn: fn must be callable, not {type(fn).__name__}")
    if not isinstance(args, tuple):
        raise TypeError(f"kbthreads.torch.spawn: args must be a tuple, not {type(args).__name__}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, int):
        raise TypeError(f"kbthreads.torch.spawn: nprocs must be an int, not {type(nprocs).__name__}")
    if nprocs < 1:
        raise ValueError(f"kbthreads.torch.spawn: nprocs must be at least 1, not {nprocs}")
    if context is not None and not isinstance(context, Context):
        raise TypeError("kbthreads.torch.spawn: context must be a kbthreads.Context")
    timing = None
    if network is not None:
        if not isinstance(network, Network):
            raise TypeError(
                f"kbthreads.torch.spawn: network must be a kbthreads.torch.Network, not {type(network).__name__}"
            )
        if not join:
            raise ValueError("kbthreads.torch.spawn: a simulated-time spawn (network=...) needs join=True")
        if context is not None and context.engine is not None:
            raise ValueError(
                "kbthreads.torch.spawn: network=... prices the collectives itself: pass a context without an engine"
            )
        if not isinstance(memory, bool):
            raise TypeError(f"kbthreads.torch.spawn: memory must be True or False, not {memory!r}")
        model = compute_model(device_flops, compute, cpu_factor, device_bandwidth)
        timing = Timing(network, model, nprocs, memory)
    elif device_flops is not None or compute is not None or device_bandwidth is not None or memory:
        raise ValueError("kbthreads.torch.spawn: device_flops, device_bandwidth, compute and memory need network=...")
    launch = Launch(nprocs, environ, argv)  # environ and argv checked: TypeError / ValueError before anything
    ctx = context if context is not None else Context()
    table = SpawnTable(ctx, next(_spawn_ids), nprocs)
    table.timing = timing
    store = KbStore(table)

    def entry(rank: int, *a: Any) -> None:
        try:
            launch.enter(rank)
            st = _world.RankState(table, rank, nprocs, store)
            _world.enter_rank(st)
            try:
                if timing is not None:
                    timing.begin_rank(rank)
                try:
                    fn(rank, *a)
                finally:
                    if timing is not None:
                        timing.end_rank(rank)
            finally:
                table.finished.add(rank)
                table.epoch += 1
                _world.leave_rank(st)
        finally:
            launch.leave()

    if timing is not None:
        saved = ctx.engine
        ctx.engine = NetworkEngine(timing)
        try:
            _begin(launch)
            try:
                ctx.spawn(entry, args, nprocs)
            finally:
                _finish(launch)
        finally:
            ctx.engine = saved
        timing.end_spawn()
        return SimRun(timing)

    _begin(launch)
    if not join:
        try:
            pc = ctx.spawn(entry, args, nprocs, join=False)
        except BaseException:
            _finish(launch)
            raise
        return TorchProcessContext(pc, launch)
    try:
        ctx.spawn(entry, args, nprocs)
    finally:
        _finish(launch)
    return None


def _begin(launch: Launch) -> None:
    """Before a spawn: the per-rank process state, then the per-rank
    torch.distributed (_world.py), each undone if the next fails."""
    launch.begin()
    try:
        _world.install()
    except BaseException:
        launch.end()
        raise


def _finish(launch: Launch) -> None:
    """After it (once): the caller's process state back, torch.distributed
    as it was."""
    try:
        launch.end()
    finally:
        _world.uninstall()


def sim_memory() -> dict[str, dict[str, int]]:
    """The calling rank's memory so far, inside a spawn with network=...
    and memory=True: ``{"current": ..., "peak": ...}``, each bytes by
    category (parameters, buffers, gradients, optimizer_state, activations,
    temporaries) and ``total``."""
    st = _world.current()
    timing = st.table.timing if st is not None else None
    memory = timing.clocks[st.rank].memory if st is not None and timing is not None else None
    if memory is None:
        raise RuntimeError("kbthreads.torch.sim_memory: only inside a rank of a spawn with network=... and memory=True")
    snap: dict[str, dict[str, int]] = memory.snapshot()
    return snap


def sim_time() -> float:
    """The calling rank's simulated clock, in seconds (its compute so far
    counted), inside a spawn with a network model."""
    st = _world.current()
    timing = st.table.timing if st is not None else None
    if st is None or timing is None:
        raise RuntimeError("kbthreads.torch.sim_time: only inside a rank of a spawn with network=...")
    return rank_time(timing, st.rank)
