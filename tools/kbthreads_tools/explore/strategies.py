# SPDX-License-Identifier: MIT
"""Strategies: the runs an exploration plans (pct, seeded, exhaustive; delay
plans a level at a time: levels.py), and a shard's part of them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .delays import Delays
from .schedule_file import Section


def exhaustive_count(section: Section) -> int:
    """How many KB_SCHED_EXHAUSTIVE indices the library enumerates for a
    spawn recorded under KB_SCHED_EXHAUSTIVE=0:limit: (n!)^k, k the rounds
    its "schedule" line says it enumerates ("exhaustive 0 limit L rounds
    k"). The library decides k (src/strategy.c); the explorer reads it rather
    than work it out again. 1 when the spawn ran another schedule (one its
    code chose)."""
    words = section.schedule.split()
    if len(words) != 6 or words[0] != "exhaustive" or not words[5].isdigit():
        return 1
    count: int = math.factorial(max(section.nprocs, 0)) ** int(words[5])
    return count


@dataclass
class Planned:
    number: int
    label: str
    env: dict[str, str]
    # --strategy delay: the schedule's delays, its level (their number),
    # and whether its run's extensions are wanted as schedules (the next
    # level is explored) or only counted (it is not)
    delays: Delays | None = None
    level: int = 0
    expand: bool = False


def schedules(strategy: str, runs: int, depth: int, baseline: list[Section]) -> list[Planned]:
    """Every run of an unsharded exploration, by number."""
    if strategy == "seeded":
        return [Planned(i, f"seeded seed {i}", {"KB_SCHED_SEED": str(i)}) for i in range(1, runs + 1)]
    if strategy == "pct":
        rounds = max([len(s.rounds) for s in baseline] + [1])
        return [
            Planned(i, f"pct seed {i} depth {depth} rounds {rounds}", {"KB_SCHED_PCT": f"{i}:{depth}:{rounds}"})
            for i in range(1, runs + 1)
        ]
    limit = runs + 1  # index 0 is round-robin, the baseline (recorded under 0:limit)
    count = max(exhaustive_count(s) for s in baseline)
    return [
        Planned(i, f"exhaustive index {i} of {count}", {"KB_SCHED_EXHAUSTIVE": f"{i}:{limit}"}) for i in range(1, count)
    ]


def shard_of(plan: list[Planned], strategy: str, k: int, n: int) -> list[Planned]:
    """The runs of shard k of n: every n-th run from run k (pct, seeded),
    or the k-th of n slices of the index range (exhaustive)."""
    if strategy == "exhaustive":
        return plan[(k - 1) * len(plan) // n : k * len(plan) // n]
    return [p for p in plan if p.number % n == k % n]
