# SPDX-License-Identifier: MIT
"""Where the ranks of a collective meet: one spawn's table of open
collectives, what each rank brought, the check that the calls match, the
submission to the engine, and the wait until a drain completed them.

Every call here runs on a rank thread holding the baton (or on the driver
inside a drain, which reads nothing here), so nothing is locked: the baton
is the lock. A collective is matched by (group, sequence number): the n-th
collective a rank calls on a group meets the n-th of every other member,
as with gloo. The last member to arrive checks the calls (kind, dtype,
shapes, reduce op, root), computes every member's result from the inputs
brought (copies, or for reductions the tensors themselves), combining ranks in group-rank order, and submits
one entry to the context's collective queue; the drain completes it through
the engine, and each member copies its result out when it waits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from .._suspend import yield_

if TYPE_CHECKING:
    from ._simtime import Timing

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.dirname(_HERE)


@dataclass(frozen=True)
class Collective:
    """What the engine receives as a collective's ``meta``: enough to price
    it. Ranks are global ranks; ``numel`` and ``nbytes`` are per member, in
    group order (what each member contributes: its input, or for a root
    the tensors it sends)."""

    kind: str  #: "all_reduce", "broadcast", ..., "barrier", "send"
    group: str  #: the process group's name ("0" for the default group)
    ranks: tuple[int, ...]  #: the group's members, in group-rank order
    seq: int  #: this collective's number on its group (0, 1, ...)
    dtype: str | None  #: e.g. "float32"; None for a barrier
    numel: tuple[int, ...]  #: elements each member contributes
    nbytes: tuple[int, ...]  #: bytes each member contributes
    op: str | None = None  #: the reduce op ("SUM", "AVG", ...) or None
    root: int | None = None  #: the root's global rank (broadcast, reduce, gather, scatter)
    peer: int | None = None  #: for "send": the receiver's global rank (``root`` is the sender)
    #: each member's simulated arrival time (seconds, group order; a send's sender then its receiver),
    #: in a spawn with a network model; else None
    arrivals: tuple[float, ...] | None = None

    @property
    def total_bytes(self) -> int:
        return sum(self.nbytes)


@dataclass
class Call:
    """One rank's call of a collective, as it reached the backend."""

    kind: str
    rank: int  # global rank
    dtype: str | None
    shapes: tuple[Any, ...]  # the shapes the check compares (per kind)
    op: str | None
    root: int | None  # group rank
    site: str  # "file:line in function", the first frame outside torch and kbthreads
    numel: int
    nbytes: int
    inputs: Any  # what the rank brought: copies, or the tensors a reduction reads at the last arrival
    extra: Any = None  # per-kind data that need not match (split sizes)
    t: float | None = None  # simulated arrival time (a timed spawn)
    data: str = "real"  # what its tensors hold: "real" values, or none ("meta", "fake"); never mixed

    def describe(self) -> str:
        parts = [self.dtype if self.data == "real" else f"{self.data} {self.dtype}"] if self.dtype else []
        if self.shapes:
            parts.append(" ".join(_shape(s) for s in self.shapes))
        if self.op:
            parts.append(f"op={self.op}")
        if self.root is not None:
            parts.append(f"root={self.root}")
        return f"{self.kind}({', '.join(parts)}) at {self.site}"


def _shape(s: Any) -> str:
    if isinstance(s, tuple) and all(isinstance(x, int) for x in s):
        return "[" + ",".join(map(str, s)) + "]"
    if isinstance(s, tuple):
        return "(" + " ".join(_shape(x) for x in s) + ")"
    return str(s)


def call_site() -> str:
    """The first Python frame outside torch and kbthreads: the user's line
    that led to the collective (for DDP's all-reduce, the backward call)."""
    f: FrameType | None = sys._getframe(1)
    torch_dir = _torch_dir()
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG) and not (torch_dir and fn.startswith(torch_dir)) and not fn.startswith("<"):
            return f"{fn}:{f.f_lineno} in {f.f_code.co_name}"
        f = f.f_back
    return "<unknown>"


_torch_dir_cache: list[str] = []


def _torch_dir() -> str:
    if not _torch_dir_cache:
        import torch

        _torch_dir_cache.append(os.path.dirname(os.path.abspath(torch.__file__)))
    return _torch_dir_cache[0]


def _arrivals(times: Iterable[float | None]) -> tuple[float, ...]:
    """The members' arrival times, in a timed spawn (where every call has one)."""
    out = []
    for t in times:
        assert t is not None
        out.append(t)
    return tuple(out)


class CollectiveError(RuntimeError):
    """A collective that cannot complete: calls that do not match across a
    group, or a deadlock (no rank of the spawn can proceed)."""


@dataclass
class GroupInfo:
    """What every member of a group agrees on."""

    name: str
    ranks: list[int]  # global ranks, in group-rank order
    incarnation: int  # how many groups of this name the spawn made before

    @property
    def key(self) -> tuple[str, tuple[int, ...], int]:
        return (self.name, tuple(self.ranks), self.incarnation)


@dataclass
class Meeting:
    """One collective of one group: the members' calls as they arrive, then
    its result."""

    group: GroupInfo
    seq: int
    calls: dict[int, Call] = field(default_factory=dict)  # group rank -> call
    handle: Any = None  # set when submitted to the engine
    results: dict[int, Any] | None = None  # group rank -> result (after compute)
    error: str | None = None

    def describe_calls(self) -> str:
        lines = []
        for gr, gl in enumerate(self.group.ranks):
            c = self.calls.get(gr)
            lines.append(f"  rank {gl}: {c.describe() if c else 'not arrived'}")
        return "\n".join(lines)


@dataclass
class Waiter:
    """What a parked rank waits for (read by the deadlock check)."""

    what: str  # description for the report
    meeting: Meeting | None


class SpawnTable:
    """The open collectives and the parked ranks of one spawn."""

    def __init__(self, ctx: Any, spawn_id: int, world_size: int) -> None:
        self.ctx = ctx
        self.spawn_id = spawn_id
        self.world_size = world_size
        self.meetings: dict[tuple[Any, int], Meeting] = {}
        self.parked: dict[int, Waiter] = {}  # global rank -> what it waits for
        self.finished: set[int] = set()
        self.epoch = 0  # bumped by every arrival and submission
        self.failure: str | None = None  # a deadlock report, once found
        self.failure_ranks: set[int] = set()
        self.timing: Timing | None = None  # in a spawn with a network model
        # its point-to-point messages (a _p2p.Mailbox), made at the first send
        # or recv; typed Any because _p2p builds on this module
        self.mailbox: Any = None

    # ---- collectives -----------------------------------------------------------
    def arrive(
        self,
        group: GroupInfo,
        seq: int,
        group_rank: int,
        call: Call,
        check: Callable[[list[Call]], str | None],
        compute: Callable[[list[Call]], dict[int, Any]],
    ) -> Meeting:
        """Record call as group_rank's part of collective seq on group; the
        last arrival checks the calls, computes the results and submits."""
        key = (group.key, seq)
        m = self.meetings.get(key)
        if m is None:
            m = self.meetings[key] = Meeting(group, seq)
        m.calls[group_rank] = call
        self.epoch += 1
        if len(m.calls) == len(group.ranks):
            del self.meetings[key]
            calls = [m.calls[i] for i in range(len(group.ranks))]
            m.error = check(calls)
            if m.error is None:
                m.results = compute(calls)
                self.submit(m, calls, call.rank)
        return m

    def submit(self, m: Meeting, calls: list[Call], sip: int) -> None:
        first = calls[0]
        root = first.root
        meta = Collective(
            kind=first.kind,
            group=m.group.name,
            ranks=tuple(m.group.ranks),
            seq=m.seq,
            dtype=first.dtype,
            numel=tuple(c.numel for c in calls),
            nbytes=tuple(c.nbytes for c in calls),
            op=first.op,
            root=None if root is None else m.group.ranks[root],
            arrivals=None if self.timing is None else _arrivals(c.t for c in calls),
        )
        m.handle = ("kbthreads.torch", self.spawn_id, m.group.name, m.group.incarnation, m.seq)
        self.epoch += 1
        self.ctx.pending_collectives.append((m.handle, sip, meta))

    def submit_p2p(self, m: Meeting, src: int, dst: int, call: Call, sip: int, recv_t: float | None) -> None:
        meta = Collective(
            kind="send",
            group=m.group.name,
            ranks=tuple(m.group.ranks),
            seq=m.seq,
            dtype=call.dtype,
            numel=(call.numel,),
            nbytes=(call.nbytes,),
            root=src,
            peer=dst,
            arrivals=None if self.timing is None else _arrivals((call.t, recv_t)),
        )
        m.handle = ("kbthreads.torch", self.spawn_id, m.group.name, m.group.incarnation, "p2p", src, dst, m.seq)
        self.epoch += 1
        self.ctx.pending_collectives.append((m.handle, sip, meta))

    # ---- waiting -----------------------------------------------------------------
    def done(self, m: Meeting) -> bool:
        return m.error is not None or (m.handle is not None and m.handle in self.ctx._completed)

    def wait(self, rank: int, m: Meeting, what: str) -> None:
        """Park rank until m is complete (its handle completed by a drain);
        raise its error. Each round the rank is not done it yields once; a
        round in which every live rank of the spawn stayed parked on a
        collective that was never submitted, and nothing arrived, is a
        deadlock, reported by the first such rank in rank order."""
        try:
            self.park_until(rank, lambda: self.done(m), Waiter(what, m))
        except SystemExit:
            # Cancelled (a sibling failed): a rank whose own collective had
            # failed reports that failure rather than a bare cancellation.
            if m.error is not None:
                raise CollectiveError(m.error) from None
            if self.failure is not None and rank in self.failure_ranks:
                raise CollectiveError(self.failure) from None
            raise
        finally:
            self.parked.pop(rank, None)
        if m.error is not None:
            raise CollectiveError(m.error)

    def park_until(self, rank: int, cond: Callable[[], bool], waiter: Waiter) -> None:
        """Yield round after round until cond(); raise CollectiveError when a
        round passed in which every live rank stayed parked on something
        nothing can bring (no arrival, no submission): a deadlock."""
        try:
            while not cond():
                if self.failure is not None:
                    raise CollectiveError(self.failure)
                self.parked[rank] = waiter
                seen = self.epoch
                yield_()
                if not cond() and self.epoch == seen and self._stuck():
                    self.failure = self._deadlock_report()
                    self.failure_ranks = set(self.parked)
                    raise CollectiveError(self.failure)
        finally:
            self.parked.pop(rank, None)

    def _stuck(self) -> bool:
        live = [r for r in range(self.world_size) if r not in self.finished]
        return all(r in self.parked and ((m := self.parked[r].meeting) is None or m.handle is None) for r in live)

    def _deadlock_report(self) -> str:
        lines = ["kbthreads.torch: collective deadlock: no rank can proceed"]
        for r in range(self.world_size):
            if r in self.finished:
                lines.append(f"  rank {r}: returned")
            elif r in self.parked:
                lines.append(f"  rank {r}: {self.parked[r].what}")
            else:  # pragma: no cover - _stuck() said every live rank is parked
                lines.append(f"  rank {r}: running")
        return "\n".join(lines)
