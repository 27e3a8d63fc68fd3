# SPDX-License-Identifier: MIT
"""Simulated time for a kbthreads.torch spawn: every rank's clock, the
engine that prices collectives with a Network, and the record they leave
(the summary, a Chrome trace-event timeline, an SVG plot).

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

import html
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from . import _compat
from ._network import Network


class _GlobalOnly:
    """A stand-in for FlopCounterMode's module tracker: counts go to
    "Global" only. The real tracker hooks every module's forward process
    wide, so N ranks' trackers would see each other's modules."""

    parents = ("Global",)
    is_bw = False

    def __enter__(self) -> _GlobalOnly:
        return self

    def __exit__(self, *a: Any) -> None:
        return None


ComputeFn = Callable[[int, int, float], float]


_SHAPE_WRAPPER_CODE = _compat.SHAPE_WRAPPER_CODE  # a formula of shapes, as torch's FLOP registry wraps it
_PLAIN, _COUNTED, _TORCHS = 0, 1, 2  # how _Counting handles an op (see its docstring)


class _Counting(_compat.FlopCounterDispatchMode):  # type: ignore[no-untyped-call]  # torch's __init_subclass__ is untyped
    """FlopCounterMode's dispatch mode with fast paths. The mode runs for
    every op of every rank, so its per-op cost is the cost of simulated time:

    - an op PyTorch's FLOP registry does not know and that has no
      decomposition to look inside (most of them: add, relu, copies) runs
      straight through (_PLAIN);
    - an op the registry knows runs and is counted, as FlopCounterMode's
      last step does (_COUNTED);
    - anything else takes FlopCounterMode's own path (_TORCHS): it tries a
      decomposition, handles higher-order ops.

    torch wraps every mode's ``__torch_dispatch__`` in a function that turns
    torch.compile off while it runs (a compile must not trace into a mode).
    That wrapper is a few Python calls per op; here the same is asked of the
    interpreter once, by marking this method's code to run without torch.compile,
    its callees too (_compat.run_without_dynamo). Where this torch lacks that switch, the
    method keeps torch's wrapper."""

    _how: dict[Any, int] = {}  # op -> _PLAIN, _COUNTED or _TORCHS (per process)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        how = _Counting._how.get(func)
        if how is None:
            how = _Counting._how[func] = self._classify(func)
        if how == _PLAIN:
            return func(*args, **(kwargs or {}))
        if how == _COUNTED:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self._count(_compat.overload_packet(func), out, args, kwargs)
            return out
        return super().__torch_dispatch__(func, types, args, kwargs)  # type: ignore[no-untyped-call]  # torch's is untyped

    _off_by_code = _compat.run_without_dynamo(__torch_dispatch__.__code__)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # read once, when the class is made: wrap unless marked
        return not cls._off_by_code

    def _count(self, packet: Any, out: Any, args: Any, kwargs: Any) -> None:
        """FlopCounterMode._count_flops, without its tree of shapes where the
        op's arguments are flat (tensors and scalars, a tensor out): the
        registry's formula is then called with the shapes directly."""
        formula = self.counter.flop_registry[packet]
        flat = (
            getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE
            and isinstance(out, torch.Tensor)
            and not any(isinstance(a, (list, tuple, dict)) for a in args)
            and not any(isinstance(a, (list, tuple, dict)) for a in kwargs.values())
        )
        if not flat:
            _compat.count_flops(self.counter, packet, out, args, kwargs)
            return
        shape = [a.shape if isinstance(a, torch.Tensor) else a for a in args]
        kw = {k: v.shape if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        self.counter.flop_counts["Global"][packet] += formula.__wrapped__(*shape, out_shape=out.shape, **kw)

    def _classify(self, func: Any) -> int:
        registry = self.counter.flop_registry
        if (
            not isinstance(func, _compat.OpOverload)
            or func in registry
            or func.has_kernel_for_dispatch_key(_compat.COMPOSITE_IMPLICIT_AUTOGRAD)
        ):
            return _TORCHS  # FlopCounterMode's own path: a decomposition, a higher-order op
        return _COUNTED if _compat.overload_packet(func) in registry else _PLAIN


def compute_model(device_flops: float | None, compute: Any, cpu_factor: float) -> tuple[str, ComputeFn]:
    """(name, fn(rank, flops, cpu_seconds) -> simulated seconds)."""
    if compute is None:
        compute = "flops"
    if callable(compute):
        return "custom", compute
    if compute == "flops":
        if device_flops is None:
            return "none", lambda r, f, c: 0.0
        if (
            isinstance(device_flops, bool)
            or not isinstance(device_flops, (int, float))
            or not device_flops > 0
            or device_flops == float("inf")
        ):
            raise ValueError(
                f"kbthreads.torch.spawn: device_flops must be a positive number of FLOP/s, not {device_flops!r}"
            )
        rate = float(device_flops)
        return "flops", lambda r, f, c: f / rate
    if compute == "cpu_time":
        if isinstance(cpu_factor, bool) or not isinstance(cpu_factor, (int, float)) or not cpu_factor >= 0:
            raise ValueError(f"kbthreads.torch.spawn: cpu_factor must be a number >= 0, not {cpu_factor!r}")
        return "cpu_time", lambda r, f, c: c * cpu_factor
    raise ValueError(
        f"kbthreads.torch.spawn: compute must be 'flops', 'cpu_time' or a function "
        f"(rank, flops, cpu_seconds) -> seconds, not {compute!r}"
    )


@dataclass
class Clock:
    rank: int
    t: float = 0.0
    flops_seen: int = 0
    cpu_seen: float = 0.0
    counter: Any = None
    compute: float = 0.0
    comm: float = 0.0
    exposed: float = 0.0
    idle: float = 0.0
    flops: int = 0
    deferred: list[Any] = field(default_factory=list)  # handles waited at the end of this backward
    hooked_task: int = -1


@dataclass
class Record:
    """One collective as the network priced it."""

    handle: Any
    meta: Any
    start: float
    end: float


class Timing:
    def __init__(self, network: Network, compute: tuple[str, ComputeFn], nprocs: int) -> None:
        self.network = network
        self.compute_name, self.compute_fn = compute
        self.clocks = [Clock(r) for r in range(nprocs)]
        self.records: dict[Any, Record] = {}
        self.order: list[Record] = []
        # (rank, track, name, start, end, args)
        self.spans: list[tuple[int, int, str, float, float, dict[str, Any]]] = []

    # ---- a rank's life -------------------------------------------------------------------------
    def begin_rank(self, rank: int) -> None:
        c = self.clocks[rank]
        c.cpu_seen = time.thread_time()
        if self.compute_name in ("flops", "custom"):
            m = FlopCounterMode(display=False)
            _compat.start_flop_counter(m, _GlobalOnly(), _Counting)  # FlopCounterMode's entry, with the fast path
            c.counter = m

    def end_rank(self, rank: int) -> None:
        c = self.clocks[rank]
        try:
            self._settle_deferred(c)
            self._account(c)
        finally:
            if c.counter is not None:
                _compat.stop_flop_counter(c.counter)
                c.counter = None

    def _account(self, c: Clock) -> None:
        """Add the compute since c's previous event to its clock."""
        flops = 0
        if c.counter is not None:
            total = int(c.counter.get_total_flops())
            flops, c.flops_seen = total - c.flops_seen, total
        now = time.thread_time()
        cpu, c.cpu_seen = now - c.cpu_seen, now
        s = float(self.compute_fn(c.rank, flops, cpu))
        if not s >= 0:
            raise ValueError(f"kbthreads.torch: the compute model returned {s!r} seconds for rank {c.rank}")
        c.flops += flops
        if s > 0:
            self.spans.append((c.rank, 0, "compute", c.t, c.t + s, {"flops": flops}))
            c.t += s
            c.compute += s

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

    # ---- the record --------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        ranks = {}
        for c in self.clocks:
            ranks[c.rank] = {
                "time": c.t,
                "compute": c.compute,
                "communication": c.comm,
                "exposed_communication": c.exposed,
                "hidden_communication": max(0.0, c.comm - c.exposed),
                "idle": c.idle,
                "flops": c.flops,
            }
        kinds: dict[str, dict[str, Any]] = {}
        for rec in self.order:
            k = kinds.setdefault(rec.meta.kind, {"count": 0, "bytes": 0, "time": 0.0})
            k["count"] += 1
            k["bytes"] += rec.meta.total_bytes
            k["time"] += rec.end - rec.start
        return {
            "time": max((c.t for c in self.clocks), default=0.0),
            "ranks": ranks,
            "collectives": kinds,
            "network": repr(self.network),
            "compute": self.compute_name,
        }

    def trace(self) -> dict[str, Any]:
        """Chrome trace events: one process per rank (thread 0 the rank's
        clock: compute, idle, exposed communication; thread 1 its collectives
        in flight), flow arrows chaining the members of each collective."""
        ev: list[dict[str, Any]] = []
        us = 1e6
        for c in self.clocks:
            ev.append({"ph": "M", "name": "process_name", "pid": c.rank, "tid": 0, "args": {"name": f"rank {c.rank}"}})
            ev.append({"ph": "M", "name": "thread_name", "pid": c.rank, "tid": 0, "args": {"name": "rank"}})
            ev.append({"ph": "M", "name": "thread_name", "pid": c.rank, "tid": 1, "args": {"name": "collectives"}})
        for rank, tid, name, s, e, args in self.spans:
            ev.append(
                {
                    "ph": "X",
                    "name": name,
                    "cat": "compute" if name == "compute" else "wait",
                    "pid": rank,
                    "tid": tid,
                    "ts": s * us,
                    "dur": (e - s) * us,
                    "args": args,
                }
            )
        for i, rec in enumerate(self.order):
            m = rec.meta
            members = [m.root, m.peer] if m.kind == "send" else list(m.ranks)
            args = {"group": m.group, "seq": m.seq, "bytes": m.total_bytes, "dtype": m.dtype, "op": m.op}
            for r in members:
                ev.append(
                    {
                        "ph": "X",
                        "name": m.kind,
                        "cat": "collective",
                        "pid": r,
                        "tid": 1,
                        "ts": rec.start * us,
                        "dur": (rec.end - rec.start) * us,
                        "args": args,
                    }
                )
            for a, b in zip(members, members[1:]):
                ev.append({"ph": "s", "id": i, "name": m.kind, "cat": "flow", "pid": a, "tid": 1, "ts": rec.start * us})
                ev.append(
                    {
                        "ph": "f",
                        "bp": "e",
                        "id": i,
                        "name": m.kind,
                        "cat": "flow",
                        "pid": b,
                        "tid": 1,
                        "ts": rec.start * us,
                    }
                )
        return {
            "traceEvents": ev,
            "displayTimeUnit": "ns",
            "otherData": {"network": repr(self.network), "compute": self.compute_name},
        }

    def svg(self, width: int = 1000) -> str:
        """A Gantt chart of the ranks' clocks (compute green, idle grey,
        exposed communication red) and collectives in flight (blue)."""
        n = len(self.clocks)
        total = max([c.t for c in self.clocks] + [r.end for r in self.order] + [1e-12])
        left, row, top = 70, 28, 30
        h = top + n * row + 44

        def x(t: float) -> float:
            return left + (width - left - 10) * t / total

        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" font-family="sans-serif" '
            f'font-size="11">',
            f'<text x="{left}" y="16">simulated time, {total * 1e3:.4g} ms in all</text>',
        ]
        colours = {"compute": "#4caf50", "idle": "#bdbdbd"}
        for rank, _tid, name, s, e, _a in self.spans:
            y = top + rank * row
            col = colours.get(name, "#e53935")
            out.append(
                f'<rect x="{x(s):.2f}" y="{y}" width="{max(0.5, x(e) - x(s)):.2f}" height="12" fill="{col}">'
                f"<title>{html.escape(name)} {s * 1e6:.3f}-{e * 1e6:.3f} us</title></rect>"
            )
        for rec in self.order:
            members = [rec.meta.root, rec.meta.peer] if rec.meta.kind == "send" else rec.meta.ranks
            for r in members:
                y = top + r * row + 13
                out.append(
                    f'<rect x="{x(rec.start):.2f}" y="{y}" width="{max(0.5, x(rec.end) - x(rec.start)):.2f}" '
                    f'height="8" fill="#1e88e5" opacity="0.7"><title>{html.escape(rec.meta.kind)} '
                    f"#{rec.meta.seq}</title></rect>"
                )
        for r in range(n):
            out.append(f'<text x="4" y="{top + r * row + 14}">rank {r}</text>')
        axis = top + n * row
        for k in range(5):  # a time axis: five ticks
            t = total * k / 4
            out.append(
                f'<line x1="{x(t):.2f}" y1="{top - 4}" x2="{x(t):.2f}" y2="{axis}" stroke="#9e9e9e" '
                f'stroke-width="0.5"/><text x="{x(t):.2f}" y="{axis + 10}" text-anchor="middle">'
                f"{t * 1e3:.4g} ms</text>"
            )
        y = top + n * row + 24
        for i, (name, col) in enumerate(
            (
                ("compute", "#4caf50"),
                ("idle", "#bdbdbd"),
                ("exposed comm", "#e53935"),
                ("collective in flight", "#1e88e5"),
            )
        ):
            out.append(
                f'<rect x="{left + 150 * i}" y="{y}" width="12" height="12" fill="{col}"/>'
                f'<text x="{left + 150 * i + 16}" y="{y + 10}">{name}</text>'
            )
        out.append("</svg>")
        return "\n".join(out) + "\n"


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
        exposed_communication, hidden_communication, idle, all seconds; flops)
        and per collective kind (``collectives[kind]``: count, bytes, time)."""
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
        return "\n".join(lines)
