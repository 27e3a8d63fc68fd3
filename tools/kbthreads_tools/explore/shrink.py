# SPDX-License-Identifier: MIT
"""Shrinking a failing schedule toward round-robin: bisection of its ends,
then delta debugging, each candidate replayed as a partial schedule; a
failing schedule of delays (--strategy delay) by delta debugging over its
delays, each candidate replayed through KB_SCHED_DELAYS."""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .delays import Delays, env_value
from .runner import Outcome, Runner
from .schedule_file import Section, differing_rounds, read_schedule, write_partial

# Shrinking runs at most this many replays, whatever the schedule's length:
# one to check that the failure reproduces, then (more than BISECT_FROM
# candidate rounds) at most 2 * ceil(log2 n) bisecting for the shortest
# failing prefix and suffix, then delta debugging with what is left.
SHRINK_BUDGET = 200
BISECT_FROM = 64


class Shrinker:
    """Replays candidate partial schedules: `first_failing` answers which
    of a sequence of candidates is the first to fail the same way, as
    trying them one by one would, and counts replays as that would (the
    budget and the reported count do not depend on --jobs); with jobs > 1
    the next candidates are replayed at once, ahead of need."""

    def __init__(
        self,
        runner: Runner,
        out: str,
        original: list[Section],
        failure: Outcome,
        jobs: int,
        budget: int = SHRINK_BUDGET,
        known: Callable[[Sequence[Any]], bool | None] | None = None,
    ):
        self.runner, self.out, self.original, self.failure = runner, out, original, failure
        self.jobs, self.budget = jobs, budget
        # what is known of a candidate without a replay (True fails, False
        # passes), or None: a replay answers
        self.known = known or (lambda keep: None)
        self.tried: dict[tuple[Any, ...], bool] = {}  # the candidates one-by-one trying would have replayed
        self.ran: dict[tuple[Any, ...], tuple[bool, str]] = {}  # every replay run, and its files
        self.files = itertools.count(1)
        self.lock = threading.Lock()
        os.makedirs(os.path.join(out, "shrink"), exist_ok=True)

    @property
    def exhausted(self) -> bool:
        return len(self.tried) >= self.budget

    def candidate_env(self, keep: list[Any], prefix: str) -> dict[str, str]:
        """The environment that replays keep: the partial schedule of those
        rounds of the original, written to prefix.schedule."""
        write_partial(prefix + ".schedule", self.original, keep)
        return {"KB_REPLAY": prefix + ".schedule"}

    def replay(self, keep: list[Any]) -> None:
        with self.lock:
            prefix = os.path.join(self.out, "shrink", f"{next(self.files):04d}")
        env = dict(self.candidate_env(keep, prefix), KB_RECORD=prefix + ".recorded")
        got = self.runner.run(prefix, env)
        with self.lock:
            self.ran[candidate_key(keep)] = (got.same_failure(self.failure), prefix)

    def first_failing(self, candidates: Iterable[list[Any]]) -> int | None:
        it = iter(candidates)
        ahead: list[list[Any]] = []
        for i in itertools.count():
            if not ahead:
                ahead = list(itertools.islice(it, 1))
            if not ahead:
                return None
            keep = ahead.pop(0)
            key = candidate_key(keep)
            known = self.known(keep)
            if known is not None:
                if known:
                    return i
                continue
            if key not in self.tried:
                if self.exhausted:
                    return None
                if key not in self.ran:
                    ahead += list(itertools.islice(it, max(0, self.jobs - 1 - len(ahead))))
                    todo, seen = [], set()
                    for c in [keep] + ahead:
                        k = candidate_key(c)
                        if k not in self.ran and k not in self.tried and k not in seen and self.known(c) is None:
                            seen.add(k)
                            todo.append(c)
                    with concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs) as pool:
                        list(pool.map(self.replay, todo))
                self.tried[key] = self.ran[key][0]
            if self.tried[key]:
                return i
        return None

    def fails(self, keep: list[Any]) -> bool:
        return self.first_failing([keep]) == 0

    def prefix_of(self, keep: list[Any]) -> str:
        return self.ran[candidate_key(keep)][1]


def candidate_key(keep: Sequence[Any]) -> tuple[Any, ...]:
    """A candidate's identity: its items, in order (a delay may be listed
    twice)."""
    return tuple(sorted(keep))


class DelayShrinker(Shrinker):
    """Candidates are sublists of a failing schedule's delays, replayed
    through KB_SCHED_DELAYS."""

    def candidate_env(self, keep: list[Any], prefix: str) -> dict[str, str]:
        return {"KB_SCHED_DELAYS": env_value(tuple(keep))}


def ddmin(
    items: list[Any],
    first_failing: Callable[[Iterable[list[Any]]], int | None],
    exhausted: Callable[[], bool] = lambda: False,
) -> list[Any]:
    """Zeller's delta debugging: a 1-minimal sublist of items that fails
    (items is assumed to). Each step's candidates, every chunk then (with
    more than two chunks) its complement, in turn, go to first_failing."""
    n = 2
    while len(items) >= 2 and not exhausted():
        size = math.ceil(len(items) / n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        hit = first_failing(_ddmin_candidates(chunks))
        if hit is not None:
            is_rest = len(chunks) > 2 and hit % 2 == 1
            i = hit // 2 if len(chunks) > 2 else hit
            if is_rest:
                items, n = [x for j, c in enumerate(chunks) if j != i for x in c], max(n - 1, 2)
            else:
                items, n = chunks[i], 2
            continue
        if n >= len(items):
            break
        n = min(len(items), 2 * n)
    return items


def _ddmin_candidates(chunks: list[list[Any]]) -> Iterator[list[Any]]:
    """ddmin's candidates of one step: every chunk then (with more than two
    chunks) its complement, in turn."""
    for i, chunk in enumerate(chunks):
        yield chunk
        if len(chunks) > 2:
            yield [x for j, c in enumerate(chunks) if j != i for x in c]


def bisect_ends(items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
    """The shortest failing prefix of items, then the shortest failing
    suffix of that, by bisection: 2 * ceil(log2 len) replays at most. A
    failure that needs rounds far apart keeps both ends and what lies
    between, for ddmin to thin out."""
    lo, hi = 1, len(items)  # items[:hi] fails
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(items[:mid]):
            hi = mid
        else:
            lo = mid + 1
    items = items[:hi]
    lo, hi = 0, len(items) - 1  # items[lo:] fails
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fails(items[mid:]):
            lo = mid
        else:
            hi = mid - 1
    return items[lo:]


@dataclass
class Shrunk:
    path: str
    replays: int
    reproduced: bool
    recorded: list[Section]  # what the shrunk schedule's replay ran
    delays: Delays | None = None  # a schedule of delays: the shrunk one


def shrink(runner: Runner, out: str, original: list[Section], failure: Outcome, jobs: int) -> Shrunk:
    s = Shrinker(runner, out, original, failure, jobs)
    every = differing_rounds(original)
    reproduced = s.fails(every)
    best = every
    if reproduced and len(every) > BISECT_FROM:
        best = bisect_ends(every, s.fails)
        if len(best) > 2:
            # The ends are needed (a shorter prefix or suffix passed): thin
            # out what lies between them, nothing of it first.
            first, last = best[0], best[-1]

            def with_ends(candidates: Iterable[list[Any]]) -> int | None:
                return s.first_failing([first] + c + [last] for c in candidates)

            inner = [] if s.fails([first, last]) else ddmin(best[1:-1], with_ends, lambda: s.exhausted)
            best = [first] + inner + [last]
    elif reproduced:
        best = ddmin(best, s.first_failing, lambda: s.exhausted)
    prefix = s.prefix_of(best)
    path = os.path.join(out, "shrunk.schedule")
    shutil.copyfile(prefix + ".schedule", path)
    return Shrunk(path, len(s.tried), reproduced, read_schedule(prefix + ".recorded"))


def shrink_delays(
    runner: Runner,
    out: str,
    original: list[Section],
    failure: Outcome,
    jobs: int,
    delays: Delays,
    known: Callable[[Sequence[Any]], bool | None],
) -> Shrunk:
    """Drop what delays of a failing schedule it can (delta debugging over
    them; `known` answers the candidates an exploration already settled),
    after one replay that checks it fails again. DIR/shrunk.schedule is
    the partial schedule of the rounds the shrunk delays' replay ran out of
    rank order: the same orders, for KB_REPLAY and gdb."""
    s = DelayShrinker(runner, out, original, failure, jobs, known=known)
    every = list(delays)
    reproduced = s.fails(every)
    best = ddmin(every, s.first_failing, lambda: s.exhausted) if reproduced else every
    if candidate_key(best) not in s.ran:  # settled without a replay: replay it for its recording
        s.replay(best)
    recorded = read_schedule(s.prefix_of(best) + ".recorded")
    path = os.path.join(out, "shrunk.schedule")
    write_partial(path, recorded, differing_rounds(recorded))
    return Shrunk(path, len(s.tried), reproduced, recorded, tuple(best))
