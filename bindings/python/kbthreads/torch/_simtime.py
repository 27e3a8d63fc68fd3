# SPDX-License-Identifier: MIT
"""Simulated time for a kbthreads.torch spawn: every rank's clock, the
engine that prices collectives with a Network, and SimRun, the result a
timed spawn returns. FLOP counting is in ``_flops.py``; the record and what
is made of it (the summary, a Chrome trace-event timeline, an SVG plot) in
``_timeline.py``.

A rank's clock moves only at its events, so it never depends on how long
anything took on this machine (with the FLOP model):

- at each collective call (arrival) and each wait, the compute since the
  rank's previous event is added: the FLOPs its own FlopCounterMode counted
  divided by ``device_flops`` (or its thread's CPU time times a factor, or
  a user function);
- a collective starts when its last member arrived (a send: when sent) and
  ends ``Network.duration`` later;
- waiting on a collective (``Work.wait()``, a synchronous call) moves the
  clock to its end if it has not passed it: the gap is idle (before the
  start) or exposed communication (after it). A future DDP's reducer asks
  for during backward is waited at the end of that backward, so the
  buckets' all-reduces overlap the rest of the backward pass.

docs/torch-time.md has the model, its formulas and what it leaves out.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from . import _compat, _flops, _memory, _timeline
from ._compute import ComputeModel
from ._network import Network
from ._timeline import Clock, Record, Span

_Counting = _flops.Counting  # the counting mode, where tests/test_torch_simtime.py reads it


class Timing:
    def __init__(self, network: Network, compute: ComputeModel, nprocs: int, memory: bool = False) -> None:
        self.network = network
        self.model = compute
        self.compute_name = compute.describe()
        self.memory = memory
        self.memory_samples: list[_timeline.MemorySample] = []
        self.clocks = [Clock(r) for r in range(nprocs)]
        self.records: dict[Any, Record] = {}
        self.order: list[Record] = []
        self.spans: list[Span] = []

    # ---- a rank's life -------------------------------------------------------------------------
    def begin_rank(self, rank: int) -> None:
        c = self.clocks[rank]
        c.cpu_seen = time.thread_time()
        if self.memory:  # its mode below the counter's (see _memory.MemoryMode)
            c.memory = _memory.RankMemory()
            c.memory.start()
            self._sample(c)
        c.counter = self.model.start_counter()

    def end_rank(self, rank: int) -> None:
        c = self.clocks[rank]
        try:
            self._settle_deferred(c)
            self._account(c)
        finally:  # the modes leave the rank's mode stack in the order they entered it, reversed
            if c.counter is not None:
                _flops.stop_counter(c.counter)
                c.counter = None
            if c.memory is not None:
                c.memory.stop()

    def end_spawn(self) -> None:
        """After every rank ended and the spawn let go of their state: each
        rank's final memory, what its storages left allocated, once garbage
        in reference cycles is collected (one collection for all ranks: the
        frees still reach each rank's count)."""
        if not self.memory:
            return
        gc.collect()
        for c in self.clocks:
            if c.memory is not None:
                c.final_memory = c.memory.snapshot()
                self._sample(c)

    def _sample(self, c: Clock) -> None:
        """The memory track's point at c's clock: the rank's bytes by
        category now, and the highest total since its previous point."""
        m = c.memory
        self.memory_samples.append((c.rank, c.sampled_at, c.t, m.take_high(), dict(m.current)))
        c.sampled_at = c.t

    def _account(self, c: Clock) -> None:
        """Add the compute since c's previous event to its clock."""
        flops = 0
        if c.counter is not None:
            total = int(c.counter.get_total_flops())
            flops, c.flops_seen = total - c.flops_seen, total
        now = time.thread_time()
        cpu, c.cpu_seen = now - c.cpu_seen, now
        args: dict[str, Any] = {"flops": flops}
        if self.model.fn is None:  # the roofline: its mode priced every op
            mode = c.counter.mode
            s, c.seconds_seen = mode.seconds - c.seconds_seen, mode.seconds
            args["bytes"], c.moved_seen = mode.moved - c.moved_seen, mode.moved
            c.moved += args["bytes"]
        else:
            s = float(self.model.fn(c.rank, flops, cpu))
        if not s >= 0:
            raise ValueError(f"kbthreads.torch: the compute model returned {s!r} seconds for rank {c.rank}")
        c.flops += flops
        if s > 0:
            self.spans.append((c.rank, 0, "compute", c.t, c.t + s, args))
            c.t += s
            c.compute += s
        if c.memory is not None:
            self._sample(c)

    # ---- collectives -----------------------------------------------------------------------------
    def arrive(self, rank: int) -> float:
        c = self.clocks[rank]
        self._account(c)
        return c.t

    def price(self, h: Any, meta: Any) -> None:
        """The engine's part (driver thread): when h starts and ends."""
        arr = meta.arrivals or (0.0,)
        start = arr[0] if meta.kind == "send" else max(arr)
        end = start + self.network.duration(meta)
        rec = Record(h, meta, start, end)
        self.records[h] = rec
        self.order.append(rec)
        members = (meta.root, meta.peer) if meta.kind == "send" else meta.ranks
        for r in members:
            self.clocks[r].comm += end - start

    def settle(self, rank: int, h: Any, defer: bool = False) -> None:
        """Rank waits for collective h (already complete in the run)."""
        c = self.clocks[rank]
        if h not in self.records:  # no engine saw it: nothing to wait in simulated time
            return
        if defer:
            task = _compat.current_graph_task_id()
            if task != -1:
                c.deferred.append(h)
                if c.hooked_task != task:
                    c.hooked_task = task
                    _compat.queue_backward_callback(lambda: self._settle_deferred(c))
                return
        self._account(c)
        self._wait(c, self.records[h])

    def _settle_deferred(self, c: Clock) -> None:
        if not c.deferred:
            return
        self._account(c)
        recs = sorted((self.records[h] for h in c.deferred), key=lambda r: r.end)
        c.deferred.clear()
        c.hooked_task = -1
        for rec in recs:
            self._wait(c, rec)

    def _wait(self, c: Clock, rec: Record) -> None:
        w = c.t
        if w < rec.start:
            c.idle += rec.start - w
            self.spans.append((c.rank, 0, "idle", w, rec.start, {"waits for": rec.meta.kind}))
            w = rec.start
        if w < rec.end:
            c.exposed += rec.end - w
            self.spans.append((c.rank, 0, f"{rec.meta.kind} (exposed)", w, rec.end, {}))
            w = rec.end
        c.t = w

    # ---- the record ------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        return _timeline.summary(
            self.clocks, self.order, self.network, self.compute_name, self.model.name == "roofline"
        )

    def trace(self) -> dict[str, Any]:
        return _timeline.trace(
            self.clocks, self.spans, self.order, self.network, self.compute_name, self.memory_samples
        )

    def svg(self, width: int = 1000) -> str:
        return _timeline.svg(self.clocks, self.spans, self.order, width)


def rank_time(timing: Timing, rank: int) -> float:
    c = timing.clocks[rank]
    timing._account(c)
    return c.t


class NetworkEngine:
    """The engine a timed spawn's context gets: it prices every collective
    from its description (kbthreads.torch.Collective) and completes it."""

    def __init__(self, timing: Timing) -> None:
        self.timing = timing

    def wait(self, h: Any, meta: Any = None) -> None:
        if meta is not None and getattr(meta, "arrivals", None) is not None:
            self.timing.price(h, meta)


class SimRun:
    """What ``kbthreads.torch.spawn(..., network=...)`` returns."""

    def __init__(self, timing: Timing) -> None:
        self._timing = timing

    @property
    def time(self) -> float:
        """The simulated time of the run: the last rank's clock, seconds."""
        return float(self.summary()["time"])

    def summary(self) -> dict[str, Any]:
        """Per rank (``ranks[r]``: time, compute, communication,
        exposed_communication, hidden_communication, idle, all seconds; flops;
        with the roofline, bytes moved; with memory=True, ``memory``: ``peak``
        and ``final``, each bytes by category and ``total``) and per
        collective kind (``collectives[kind]``: count, bytes, time)."""
        return self._timing.summary()

    def timeline(self) -> dict[str, Any]:
        return self._timing.trace()

    def write_timeline(self, path: str) -> None:
        """A Chrome trace-event JSON file (opens in Perfetto or chrome://tracing)."""
        with open(path, "w") as f:
            json.dump(self._timing.trace(), f, sort_keys=True)

    def write_plot(self, path: str) -> None:
        """An SVG Gantt chart of the ranks."""
        with open(path, "w") as f:
            f.write(self._timing.svg())

    def format_summary(self) -> str:
        s = self.summary()
        lines = [
            f"simulated time {s['time'] * 1e3:.6f} ms ({s['network']}, compute: {s['compute']})",
            "rank   time ms  compute ms  comm ms  exposed ms  hidden ms  idle ms",
        ]
        for r, v in s["ranks"].items():
            lines.append(
                f"{r:4} {v['time'] * 1e3:9.4f} {v['compute'] * 1e3:11.4f} {v['communication'] * 1e3:8.4f} "
                f"{v['exposed_communication'] * 1e3:11.4f} {v['hidden_communication'] * 1e3:10.4f} "
                f"{v['idle'] * 1e3:8.4f}"
            )
        lines.append("collective            count        bytes   time ms")
        for k, v in sorted(s["collectives"].items()):
            lines.append(f"{k:20} {v['count']:6} {v['bytes']:12} {v['time'] * 1e3:9.4f}")
        return "\n".join(lines + _timeline.format_memory(s))
