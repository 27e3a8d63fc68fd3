# SPDX-License-Identifier: MIT
"""--strategy delay: iterative deepening over delay levels, and what it
guarantees.

Level 0 is the baseline (round-robin, no delay). Level k + 1 is every
canonical extension (delays.extensions) of every run of level k, in the
order of their delays; so each level holds every schedule of exactly that
many delays once, and is planned from the runs the program took, not from
the baseline's trace. Runs are numbered on from level to level, and a level
runs as a plan of its own (runs.run_all: --jobs, number order), so the
outcome does not depend on --jobs.

A shard (--shard K/N) takes the K-th, K+N-th, ... schedules of level 1 and
every schedule below them (each of level k + 1 extends exactly one of level
k, which its shard ran): the shards of a level partition it. A shard cannot
know how many schedules the others' levels hold, so it numbers its runs in
its own order and keeps at most --runs of them; merge puts every shard's
schedules of a level in delay order, numbers them as one exploration would
have, and applies --runs, --until-stale and the shards' time budgets.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .coverage import Coverage
from .delays import Delays, env_value, extensions
from .results import Options, plural
from .runner import Runner
from .runs import Committer, Explored, RunResult, run_all
from .schedule_file import Section
from .strategies import Planned


@dataclass
class Level:
    level: int
    schedules: int  # the level's schedules (in a shard: its part of them)
    ran: int = 0  # of them, the runs committed
    not_run: list[Delays] = field(default_factory=list)  # the others (a shard's, for merge)

    def to_json(self, with_not_run: bool) -> dict[str, Any]:
        d: dict[str, Any] = {"level": self.level, "schedules": self.schedules, "ran": self.ran}
        if with_not_run:
            d["not_run"] = [[list(x) for x in delays] for delays in self.not_run]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Level:
        return Level(
            int(d["level"]),
            int(d["schedules"]),
            int(d["ran"]),
            [tuple((int(s), int(t)) for s, t in delays) for delays in d.get("not_run", [])],
        )


@dataclass
class DelayLevels:
    """What --strategy delay explored: levels 1.. (the baseline is level
    0), and the schedules of level max + 1 when level max ran in full
    (None: not known)."""

    max_delays: int
    levels: list[Level]
    beyond: int | None = None


def planned(delays: Delays, number: int, level: int, expand: bool) -> Planned:
    value = env_value(delays)
    return Planned(number, f"level {level}, KB_SCHED_DELAYS={value}", {"KB_SCHED_DELAYS": value}, delays, level, expand)


def run_levels(
    args: argparse.Namespace,
    runner: Runner,
    out: str,
    baseline: list[Section],
    jobs: int,
    deadline: float | None,
    committer: Committer,
) -> tuple[DelayLevels, str]:
    """Levels 1 to --delays, each run in full before the next is planned,
    until a failure, --runs runs (this process's), the time budget or
    --until-stale stops it, or a level holds no schedule (every schedule
    of the program was run). Returns the levels and why it stopped."""
    current: list[Delays] = [(d,) for d in extensions((), baseline)]
    if args.shard:
        k, n = args.shard
        current = current[k - 1 :: n]
    dl = DelayLevels(args.delays, [])
    number, stopped = 1, "done"
    for level in range(1, args.delays + 1):
        lv = Level(level, len(current))
        dl.levels.append(lv)
        if not current:
            break
        room = len(current) if args.runs is None else max(0, args.runs - len(committer.committed))
        plan = [planned(d, number + i, level, level < args.delays) for i, d in enumerate(current[:room])]
        number += len(plan)
        first = len(committer.committed)
        stopped = run_all(runner, out, plan, jobs, deadline, committer)
        done = committer.committed[first:]
        lv.ran = len(done)
        lv.not_run = current[lv.ran :]
        if stopped == "done" and len(plan) < len(current):
            stopped = "runs"
        if stopped != "done":
            break
        if level == args.delays:
            dl.beyond = sum(r.nchildren for r in done)
        current = [c for r in done for c in (r.children or ())]
        for r in done:
            r.children = None
    return dl, stopped


class LevelsMergeError(Exception):
    pass


def merge_levels(shards: list[tuple[str, dict[str, Any]]], opts: Options, coverage: Coverage) -> Explored:
    """The shards' runs taken as one exploration would have taken them:
    level by level, each level's schedules (every shard's) in delay order,
    numbered from 1 on; stopped where that exploration would have stopped
    (a failure, --runs, --until-stale), or at the first schedule a shard
    did not run (its time budget)."""
    loaded = []
    for d, r in shards:
        levels = [Level.from_json(x) for x in r["delays"]["levels"]]
        runs = [RunResult.from_json(x) for x in r["runs"]]
        loaded.append((d, r, levels, runs))
    committer = Committer(coverage, opts.until_stale)
    renumbered: list[dict[int, int]] = [{} for _ in loaded]
    merged = DelayLevels(opts.delays or 0, [])
    stopped = "done"
    for level in range(1, (opts.delays or 0) + 1):
        entries: list[tuple[Delays, int, RunResult | None]] = []
        total = 0
        for i, (d, _, levels, runs) in enumerate(loaded):
            if level > len(levels):
                if levels and levels[-1].schedules == 0:
                    continue  # its part ran out of schedules
                raise LevelsMergeError(f"{d}: the shard stopped before level {level}, which the others reached")
            total += levels[level - 1].schedules
            entries += [(r.delays or (), i, r) for r in runs if r.level == level]
            entries += [(x, i, None) for x in levels[level - 1].not_run]
        entries.sort(key=lambda e: e[0])
        lv = Level(level, total)
        merged.levels.append(lv)
        if total == 0:
            break
        for _, i, run in entries:
            if opts.runs is not None and len(committer.committed) >= opts.runs:
                stopped = "runs"
            elif run is None:
                stopped = "time"  # a shard stopped short of it
            else:
                number = len(committer.committed) + 1
                renumbered[i][run.number] = number
                run.number = number
                committer.take(run)
                lv.ran += 1
                stopped = committer.stopped or "done"
            if stopped != "done":
                break
        if stopped != "done":
            break
        if level == opts.delays:
            beyond = [r["delays"].get("beyond") for _, r, _, _ in loaded]
            merged.beyond = None if None in beyond else sum(beyond)
    upto = committer.committed[-1].number if committer.committed else 0
    for i, (_, r, _, _) in enumerate(loaded):
        coverage.take_orders(renumber_orders(r["coverage"]["orders"], renumbered[i]), upto)
    return Explored(committer.committed, coverage, stopped, merged)


def renumber_orders(saved: list[dict[str, Any]], numbers: dict[int, int]) -> list[dict[str, Any]]:
    """A shard's saved coverage orders with its run numbers made the merged
    ones (0, the baseline, stays 0); orders first taken by a run merge does
    not take are left out."""
    numbers = {0: 0, **numbers}
    out = []
    for entry in saved:
        first = {k: [numbers[n], ranks] for k, (n, ranks) in entry["first"].items() if n in numbers}
        out.append(dict(entry, first=first))
    return out


# ---- what the levels guarantee ------------------------------------------------------


@dataclass
class Guarantee:
    complete: int  # every schedule with at most this many delays ran, none failed
    schedules: int  # how many those are (the baseline's included)
    exhausted: bool  # and there is no schedule with more delays: every schedule of the program ran
    cut: Level | None  # the level stopped part way (or not begun), if any
    why: str  # what stopped it ("" when nothing did)


def guarantee(dl: DelayLevels, stopped: str, opts: Options) -> Guarantee:
    complete, schedules = 0, 1
    for lv in dl.levels:
        if lv.schedules == 0 or lv.ran < lv.schedules or (stopped == "failure" and lv is dl.levels[-1]):
            break
        complete, schedules = lv.level, schedules + lv.schedules
    nxt = dl.levels[complete] if complete < len(dl.levels) else None
    exhausted = (nxt is not None and nxt.schedules == 0) or (nxt is None and dl.beyond == 0)
    cut = nxt if nxt is not None and nxt.schedules > 0 else None
    why = (
        {
            "failure": "stopped at the failure",
            "runs": f"cut short by --runs {opts.runs}",
            "time": f"cut short by the time budget ({opts.time_budget:g} s)" if opts.time_budget else "cut short",
            "stale": f"cut short by --until-stale {opts.until_stale}",
        }.get(stopped, "")
        if cut
        else ""
    )
    return Guarantee(complete, schedules, exhausted, cut, why)


def guarantee_text(g: Guarantee) -> str:
    text = f"every schedule with at most {plural(g.complete, 'delay')} was run: {g.schedules} of them, none failed"
    if g.exhausted:
        text += f"; that is every schedule of the program (none has more than {plural(g.complete, 'delay')})"
    return text


def level_lines(dl: DelayLevels, stopped: str, opts: Options) -> list[str]:
    """The report's lines on the levels: the runs of each, the guarantee,
    and the level cut short (or the first one not tried)."""
    g = guarantee(dl, stopped, opts)
    per = ", ".join(
        ["level 0: 1 (the baseline)"] + [f"level {lv.level}: {lv.ran} of {lv.schedules}" for lv in dl.levels]
    )
    lines = [f"delays: runs per level: {per}", f"delays: {guarantee_text(g)}"]
    if g.cut is not None:
        lines.append(
            f"delays: level {g.cut.level} {g.why}: {g.cut.ran} of its {plural(g.cut.schedules, 'schedule')} "
            f"{'was' if g.cut.ran == 1 else 'were'} run"
        )
    elif not g.exhausted and g.complete == dl.max_delays:
        beyond = "" if dl.beyond is None else f": level {dl.max_delays + 1} holds {plural(dl.beyond, 'schedule')}"
        lines.append(
            f"delays: schedules with more than {plural(dl.max_delays, 'delay')} were not tried "
            f"(--delays {dl.max_delays}){beyond}"
        )
    return lines


def levels_json(dl: DelayLevels, stopped: str, opts: Options, with_not_run: bool) -> dict[str, Any]:
    g = guarantee(dl, stopped, opts)
    return {
        "max_delays": dl.max_delays,
        "levels": [lv.to_json(with_not_run) for lv in dl.levels],
        "beyond": dl.beyond,
        "complete": g.complete,
        "complete_schedules": g.schedules,
        "every_schedule": g.exhausted,
        "guarantee": guarantee_text(g),
        "cut": None
        if g.cut is None
        else {"level": g.cut.level, "ran": g.cut.ran, "schedules": g.cut.schedules, "why": g.why},
    }


def failing_level_note(failing: RunResult) -> Callable[[Sequence[Any]], bool | None]:
    """For shrinking a failure of level k by dropping delays: a candidate
    of fewer than k delays runs a schedule of at most that many, and every
    one of those ran and passed; so it is known to pass without a replay."""
    level = failing.level

    def known(candidate: Sequence[Any]) -> bool | None:
        return False if len(candidate) < level else None

    return known
