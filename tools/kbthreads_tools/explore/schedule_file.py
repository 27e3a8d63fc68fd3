# SPDX-License-Identifier: MIT
"""Schedule files: the recordings KB_RECORD writes and the (partial)
schedules KB_REPLAY reads."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

# Every variable the library reads for the schedule: cleared for each run,
# then set for the run's strategy.
SCHEDULE_ENV = ("KB_SCHED_SEED", "KB_SCHED_PCT", "KB_SCHED_EXHAUSTIVE", "KB_SCHED_DELAYS", "KB_REPLAY", "KB_RECORD")


# The one Python reader (read_schedule) and writer (write_partial) of the
# files KB_RECORD writes and KB_REPLAY reads; other Python code (the tests
# too) reads schedules through read_schedule. The library's reader,
# src/schedule_file.c (kb__replay_open), is the authority on the format, and
# docs/scheduling.md ("Record and replay") describes it for users. In short:
# one section per spawn, each opened by the line "kbthreads-schedule 1",
# then "spawn K" (the process's K-th spawn, when it spawned more than once),
# "nprocs N", "partial" (only the listed rounds are forced), and one
# "round K R R ..." line per round: its number, then the ranks in the order
# they ran. "schedule" (the strategy that chose the orders), "drain" and
# "end" lines are informational; "#"
# lines are comments. This reader is lenient where the library is strict: it
# reads recordings of runs that may have been killed mid-line, so it skips a
# line it cannot read instead of refusing the file.
@dataclass
class Section:
    """One spawn's recording (docs/scheduling.md, "Record and replay")."""

    nprocs: int = -1
    rounds: list[list[int]] = field(default_factory=list)
    end: str = ""
    # each round's number as the file gives it: 1, 2, ... in a recording,
    # the forced rounds only in a partial schedule
    numbers: list[int] = field(default_factory=list)
    schedule: str = ""  # the "schedule" line's words: "round-robin", "exhaustive 0 limit 31 rounds 1", ...


def read_schedule(path: str) -> list[Section]:
    """The recordings in a file, one per spawn; [] when there is none. A
    line cut short by a killed process is skipped."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    sections: list[Section] = []
    for line in lines:
        words = line.split()
        if line == "kbthreads-schedule 1":
            sections.append(Section())
        elif not sections or not words:
            continue
        elif words[0] == "nprocs" and len(words) == 2 and words[1].isdigit():
            sections[-1].nprocs = int(words[1])
        elif words[0] == "round" and len(words) > 2 and all(w.isdigit() for w in words[1:]):
            sections[-1].rounds.append([int(w) for w in words[2:]])
            sections[-1].numbers.append(int(words[1]))
        elif words[0] == "end":
            sections[-1].end = " ".join(words[1:])
        elif words[0] == "schedule":
            sections[-1].schedule = " ".join(words[1:])
    return sections


def schedule_digest(sections: list[Section]) -> str:
    """A name for the schedule a recording ran: equal for equal orders."""
    h = hashlib.sha1()
    for s in sections:
        h.update(b"spawn\n")
        for r in s.rounds:
            h.update((" ".join(map(str, r)) + "\n").encode())
    return h.hexdigest()


def differing_rounds(sections: list[Section]) -> list[tuple[int, int]]:
    """(spawn index, round index) of every round not in rank order."""
    return [(si, ri) for si, s in enumerate(sections) for ri, r in enumerate(s.rounds) if r != sorted(r)]


def write_partial(path: str, sections: list[Section], keep: Iterable[tuple[int, int]]) -> None:
    """A partial schedule: per spawn, only the rounds in keep, with their
    recorded orders; every other round runs in rank order."""
    chosen: dict[int, list[int]] = {}
    for si, ri in keep:
        chosen.setdefault(si, []).append(ri)
    with open(path, "w", encoding="utf-8") as f:
        for si, s in enumerate(sections):
            f.write(f"kbthreads-schedule 1\nspawn {si + 1}\nnprocs {s.nprocs}\npartial\n")
            for ri in sorted(chosen.get(si, ())):
                f.write(f"round {ri + 1} " + " ".join(map(str, s.rounds[ri])) + "\n")
