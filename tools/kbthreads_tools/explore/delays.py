# SPDX-License-Identifier: MIT
"""Schedules as delays (--strategy delay, docs/scheduling.md, "Delays"):
the KB_SCHED_DELAYS value of a schedule, and the schedules one more delay
makes of a run, read from that run's own recording.

A delay is (spawn, turn), both from 1: the library numbers a spawn's turns
from 1, one per live rank per round. A schedule is a sorted tuple of
delays, a delay repeated being several delays at that turn. It is
canonical when every turn holds fewer delays than ranks are left to run in
its round at that turn (itself included): then its delays are exactly the
fewest that give its orders, and distinct canonical schedules run distinct
orders. Each canonical schedule of k + 1 delays comes from exactly one of
k, itself without its last delay, and from the turns of that one's run at
or after its last delay (the turns before it are the same in both runs):
so extending every run of level k by `extensions` enumerates level k + 1,
each schedule once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .schedule_file import Section

Delay = tuple[int, int]  # (spawn, turn), from 1
Delays = tuple[Delay, ...]  # ascending


def env_value(delays: Delays) -> str:
    """KB_SCHED_DELAYS's value for delays: a comma-separated list of turns
    per spawn, the lists separated by '/', up to the last spawn with a
    delay (later spawns run round-robin)."""
    last = max((s for s, _ in delays), default=1)
    return "/".join(",".join(str(t) for s, t in delays if s == spawn) for spawn in range(1, last + 1))


def round_turns(sections: list[Section]) -> list[list[tuple[int, int]]]:
    """Per spawn, each recorded round as (ranks, turns run): its ranks all
    ran, except in a round a failing rank ended, which ran up to that
    rank's turn."""
    spawns = []
    for s in sections:
        rounds = [(len(r), len(r)) for r in s.rounds]
        m = re.fullmatch(r"failed rank (\d+)", s.end)
        if m and s.rounds and int(m.group(1)) in s.rounds[-1]:
            rounds[-1] = (len(s.rounds[-1]), s.rounds[-1].index(int(m.group(1))) + 1)
        spawns.append(rounds)
    return spawns


def extensions(delays: Delays, sections: list[Section]) -> Iterator[Delay]:
    """The delays d, in order, for which delays + (d,) is canonical, on the
    run of `delays` recorded in sections: d at or after delays' last, at a
    turn the run took, whose round has more ranks left to run (that turn's
    included) than the turn would then hold delays."""
    last = delays[-1] if delays else (0, 0)
    at_last = sum(1 for d in delays if d == last)
    for spawn, rounds in enumerate(round_turns(sections), start=1):
        if spawn < last[0]:
            continue
        turn = 0  # the turns of the rounds before this one
        for ranks, ran in rounds:
            if spawn == last[0] and turn + ran < last[1]:
                turn += ranks  # a round wholly before the last delay
                continue
            for place in range(ran):
                d = (spawn, turn + place + 1)
                if d < last:
                    continue
                held = at_last if d == last else 0
                if held + 1 < ranks - place:
                    yield d
            turn += ranks


def describe(delays: Delays, several_spawns: bool) -> str:
    """The delays for people: "turns 17, 40" or "spawn 2 turn 5"."""
    if not delays:
        return "no delays"
    parts = []
    for spawn in sorted({s for s, _ in delays}):
        turns = [str(t) for s, t in delays if s == spawn]
        what = f"turn{'s' if len(turns) > 1 else ''} {', '.join(turns)}"
        parts.append(f"spawn {spawn} {what}" if several_spawns else what)
    return "; ".join(parts)
