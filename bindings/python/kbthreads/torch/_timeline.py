# SPDX-License-Identifier: MIT
"""The record of a simulated run: each rank's clock, each collective as the
network priced it, the spans of the ranks' timelines; and what is made of
it: the summary, a Chrome trace-event timeline, an SVG Gantt chart. Pure
functions of the record (``_simtime.py`` keeps it)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# (rank, track, name, start, end, args): track 0 the rank's clock, 1 its collectives
Span = tuple[int, int, str, float, float, dict[str, Any]]
# (rank, previous point's time, time, highest total bytes between the two, bytes by category at time)
MemorySample = tuple[int, float, float, int, dict[str, int]]


@dataclass
class Clock:
    """One rank's simulated clock (t, seconds) and what it spent it on."""

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
    seconds_seen: float = 0.0  # the roofline's: its mode's seconds and bytes at the previous event
    moved_seen: int = 0
    moved: int = 0
    memory: Any = None  # the rank's _memory.RankMemory (memory=True)
    final_memory: dict[str, dict[str, int]] | None = None  # its snapshot once the spawn ended
    sampled_at: float = 0.0  # the time of its previous memory point
    deferred: list[Any] = field(default_factory=list)  # handles waited at the end of this backward
    hooked_task: int = -1


@dataclass
class Record:
    """One collective as the network priced it."""

    handle: Any
    meta: Any
    start: float
    end: float


def summary(
    clocks: Sequence[Clock], order: Sequence[Record], network: Any, compute_name: str, roofline: bool = False
) -> dict[str, Any]:
    ranks: dict[int, dict[str, Any]] = {}
    for c in clocks:
        ranks[c.rank] = {
            "time": c.t,
            "compute": c.compute,
            "communication": c.comm,
            "exposed_communication": c.exposed,
            "hidden_communication": max(0.0, c.comm - c.exposed),
            "idle": c.idle,
            "flops": c.flops,
        }
        if roofline:
            ranks[c.rank]["bytes"] = c.moved
        if c.final_memory is not None:
            ranks[c.rank]["memory"] = {"peak": c.final_memory["peak"], "final": c.final_memory["current"]}
    kinds: dict[str, dict[str, Any]] = {}
    for rec in order:
        k = kinds.setdefault(rec.meta.kind, {"count": 0, "bytes": 0, "time": 0.0})
        k["count"] += 1
        k["bytes"] += rec.meta.total_bytes
        k["time"] += rec.end - rec.start
    return {
        "time": max((c.t for c in clocks), default=0.0),
        "ranks": ranks,
        "collectives": kinds,
        "network": repr(network),
        "compute": compute_name,
    }


_MIB = 1 << 20
_SHORT = {
    "parameters": "param",
    "buffers": "buffer",
    "gradients": "grad",
    "optimizer_state": "optim",
    "activations": "act",
    "temporaries": "temp",
}


def format_memory(s: dict[str, Any]) -> list[str]:
    """The summary's memory table (MiB), one row per rank and point: none
    without memory=True."""
    rows = [(r, v["memory"]) for r, v in s["ranks"].items() if "memory" in v]
    if not rows:
        return []
    head = "memory MiB  rank point " + "".join(f"{name:>9}" for name in _SHORT.values()) + "    total"
    lines = [head]
    for r, m in rows:
        for point in ("peak", "final"):
            cells = "".join(f"{m[point][c] / _MIB:9.3f}" for c in _SHORT)
            lines.append(f"{'':10} {r:5} {point:5} {cells}{m[point]['total'] / _MIB:9.3f}")
    return lines


def trace(
    clocks: Sequence[Clock],
    spans: Sequence[Span],
    order: Sequence[Record],
    network: Any,
    compute_name: str,
    memory: Sequence[MemorySample] = (),
) -> dict[str, Any]:
    """Chrome trace events: one process per rank (thread 0 the rank's
    clock: compute, idle, exposed communication; thread 1 its collectives
    in flight), flow arrows chaining the members of each collective; with
    memory, two counter tracks per rank: "memory" (bytes by category at each
    of the rank's events) and "memory high-water" (the highest total
    between an event and the next, held from the first)."""
    ev: list[dict[str, Any]] = []
    us = 1e6
    for rank, t0, t1, high, current in memory:
        ev.append({"ph": "C", "name": "memory high-water", "pid": rank, "ts": t0 * us, "args": {"bytes": high}})
        ev.append({"ph": "C", "name": "memory", "pid": rank, "ts": t1 * us, "args": current})
    for c in clocks:
        ev.append({"ph": "M", "name": "process_name", "pid": c.rank, "tid": 0, "args": {"name": f"rank {c.rank}"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": c.rank, "tid": 0, "args": {"name": "rank"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": c.rank, "tid": 1, "args": {"name": "collectives"}})
    for rank, tid, name, s, e, args in spans:
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
    for i, rec in enumerate(order):
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
        "otherData": {"network": repr(network), "compute": compute_name},
    }


def svg(clocks: Sequence[Clock], spans: Sequence[Span], order: Sequence[Record], width: int = 1000) -> str:
    """A Gantt chart of the ranks' clocks (compute green, idle grey,
    exposed communication red) and collectives in flight (blue)."""
    n = len(clocks)
    total = max([c.t for c in clocks] + [r.end for r in order] + [1e-12])
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
    for rank, _tid, name, s, e, _a in spans:
        y = top + rank * row
        col = colours.get(name, "#e53935")
        out.append(
            f'<rect x="{x(s):.2f}" y="{y}" width="{max(0.5, x(e) - x(s)):.2f}" height="12" fill="{col}">'
            f"<title>{html.escape(name)} {s * 1e6:.3f}-{e * 1e6:.3f} us</title></rect>"
        )
    for rec in order:
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
