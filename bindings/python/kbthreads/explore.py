#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kbthreads-explore: hunt rank-order bugs in a program that links libkbthreads.

Runs COMMAND once in round-robin order (the baseline), then under up to N
other schedules, each in its own process (up to --jobs at once), selected
through the environment the library reads (KB_SCHED_PCT, KB_SCHED_SEED,
KB_SCHED_EXHAUSTIVE) and recorded with KB_RECORD. The failing run of the
lowest number is the one reported: its schedule is shrunk toward
round-robin (delta debugging over the rounds that differ from rank order,
each candidate replayed as a partial schedule through KB_REPLAY) and the
command that replays the shrunk one is printed, with a gdb command that
stops at its first turn out of rank order. --shard K/N explores one part of
the runs and writes a result file; `merge DIR...` turns the shards' results
into the report one run would have given. docs/scheduling.md describes the
strategies and the files.

Installed as ``kbthreads-explore``; also ``python3 -m kbthreads.explore``.
Standard library only, and it never loads libkbthreads itself: the same
file runs as a script.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

EXIT_NONE_FOUND = 0
EXIT_FOUND = 1
EXIT_USAGE = 2

# Every variable the library reads for the schedule: cleared for each run,
# then set for the run's strategy.
SCHEDULE_ENV = ("KB_SCHED_SEED", "KB_SCHED_PCT", "KB_SCHED_EXHAUSTIVE", "KB_REPLAY", "KB_RECORD")
# Shrinking runs at most this many replays, whatever the schedule's length:
# one to check that the failure reproduces, then (more than BISECT_FROM
# candidate rounds) at most 2 * ceil(log2 n) bisecting for the shortest
# failing prefix and suffix, then delta debugging with what is left.
SHRINK_BUDGET = 200
BISECT_FROM = 64
# Coverage keeps the orders of the first COVERAGE_ROUNDS rounds of each
# spawn, ORDERS_CAP at most per round index, so its memory and the result
# file stay bounded on long programs and many runs.
COVERAGE_ROUNDS = 1000
ORDERS_CAP = 1000  # distinct orders counted per round index; "1000+" beyond
RESULT_FORMAT = "kbthreads-explore-result 1"
RESULT_FILE = "result.json"
# The options a shard's result must share with the others to be merged.
MERGED_OPTIONS = ("command", "strategy", "runs", "depth", "timeout", "compare_output", "until_stale")

DESCRIPTION = """\
Run COMMAND (a program that links libkbthreads, in C or Python) once in
round-robin order, then under up to N other schedules, each in its own
process, up to --jobs at once. A run fails when it exits non-zero, dies of
a signal, runs past the timeout (killed: a hang) or, with
--compare-output, prints to stdout something other than the baseline did.
The failing run of the lowest number is reported, whatever --jobs: its
schedule is shrunk toward round-robin (as many rounds as possible put back
in rank order) and the commands that replay it, alone and under gdb, are
printed.

  %(prog)s merge [--out DIR] [--jobs N] [--gdb] SHARD_DIR...
merges the --out directories of the shards of one exploration (--shard K/N
for K = 1..N) into the report, shrinking and exit status one run with the
same options would have given.
"""

EPILOG = """\
strategies (the run number i = 1..N is the seed or index):
  pct         KB_SCHED_PCT=i:DEPTH:R: random rank priorities, DEPTH-1
              demotions in the first R rounds (R: the baseline's rounds)
  seeded      KB_SCHED_SEED=i: a random permutation every round
  exhaustive  KB_SCHED_EXHAUSTIVE=i:N+1: every order of the first k rounds,
              k as large as fits in N runs, then round-robin

--shard K/N: runs K, K+N, K+2N, ... (pct, seeded), or the K-th of N slices
of the indices (exhaustive); no shrinking; the result goes to DIR/result.json.

files in DIR:
  result.json                                     runs, outcomes, coverage, the failure
  baseline.schedule, baseline.out, baseline.err   the round-robin run
  runs/NNNN.schedule, .out, .err                  run NNNN's recording and output
  original.schedule                               the failing run's recording
  shrink/NNNN.schedule, .recorded, .out, .err     each shrinking replay
  shrunk.schedule                                 the shrunk partial schedule
  replay.gdb                                      gdb commands: replay it, stop at
                                                  its first turn out of rank order

exit status: 1 a failing schedule was found, 0 none, 2 a usage error, a
command that cannot be run, a baseline that fails, or shards that do not
merge.
"""


# ---- schedule files ------------------------------------------------------------
# The one Python reader (read_schedule) and writer (write_partial) of the
# files KB_RECORD writes and KB_REPLAY reads; other Python code (the tests
# too) reads schedules through read_schedule. The library's reader,
# src/schedule.c (kb__replay_open), is the authority on the format, and
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


# ---- running the command -----------------------------------------------------
@dataclass
class Outcome:
    kind: str  # "ok", "exit", "signal", "hang", "output"; "cancelled" is never reported
    code: int  # the exit status or signal number (0 otherwise)
    text: str  # how it failed, for people

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    def same_failure(self, other: "Outcome") -> bool:
        return self.kind == other.kind and self.code == other.code

    def to_json(self) -> dict:
        return {"kind": self.kind, "code": self.code, "text": self.text}

    @staticmethod
    def from_json(d: dict) -> "Outcome":
        return Outcome(str(d["kind"]), int(d["code"]), str(d["text"]))


CANCELLED = Outcome("cancelled", 0, "cancelled")


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


LIVE_GROUPS: set[int] = set()  # every run's process group, for the signal handler


class Runner:
    """Runs the command, each run in its own process group, several at
    once from several threads; a group is killed at the timeout, when its
    run ends and when it is cancelled, so nothing the command started is
    left running."""

    def __init__(self, command: list[str], timeout: float, compare: bytes | None, cwd: str | None = None):
        self.command = command
        self.timeout = timeout
        self.compare = compare  # the baseline's stdout, with --compare-output
        self.cwd = cwd
        self.lock = threading.Lock()
        self.live: dict[int, tuple[subprocess.Popen, int]] = {}  # pid -> (process, tag)
        self.cancelled: set[int] = set()  # pids killed on purpose

    def run(self, prefix: str, env_extra: dict[str, str], tag: int = 0) -> Outcome:
        env = {k: v for k, v in os.environ.items() if k not in SCHEDULE_ENV}
        env.update(env_extra)
        with open(prefix + ".out", "wb") as out, open(prefix + ".err", "wb") as err:
            proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True,
                cwd=self.cwd,
            )
            with self.lock:
                self.live[proc.pid] = (proc, tag)
                LIVE_GROUPS.add(proc.pid)
            try:
                proc.wait(self.timeout)
                hung = False
            except subprocess.TimeoutExpired:
                hung = True
            finally:
                self.kill(proc.pid)
                rc = proc.wait()
                with self.lock:
                    del self.live[proc.pid]
                    LIVE_GROUPS.discard(proc.pid)
                    cancelled = proc.pid in self.cancelled
                    self.cancelled.discard(proc.pid)
        if cancelled:
            return CANCELLED
        if hung:
            return Outcome("hang", 0, f"hang: killed after {self.timeout:g} s")
        if rc < 0:
            return Outcome("signal", -rc, f"killed by {signal_name(-rc)}")
        if rc > 0:
            return Outcome("exit", rc, f"exit status {rc}")
        if self.compare is not None:
            with open(prefix + ".out", "rb") as f:
                if f.read() != self.compare:
                    return Outcome("output", 0, "output differs from the baseline's")
        return Outcome("ok", 0, "ok")

    @staticmethod
    def kill(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def cancel(self, above: int | None = None) -> None:
        """Kill the runs tagged above `above` (every run when None)."""
        with self.lock:
            for pid, (_, tag) in list(self.live.items()):
                if above is None or tag > above:
                    self.cancelled.add(pid)
                    self.kill(pid)


# ---- strategies ----------------------------------------------------------------
def exhaustive_count(section: Section) -> int:
    """How many KB_SCHED_EXHAUSTIVE indices the library enumerates for a
    spawn recorded under KB_SCHED_EXHAUSTIVE=0:limit: (n!)^k, k the rounds
    its "schedule" line says it enumerates ("exhaustive 0 limit L rounds
    k"). The library decides k (src/order.c); the explorer reads it rather
    than work it out again. 1 when the spawn ran another schedule (one its
    code chose)."""
    words = section.schedule.split()
    if len(words) != 6 or words[0] != "exhaustive" or not words[5].isdigit():
        return 1
    return math.factorial(max(section.nprocs, 0)) ** int(words[5])


@dataclass
class Planned:
    number: int
    label: str
    env: dict[str, str]


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


# ---- coverage -------------------------------------------------------------------
def orders_of(sections: list[Section]) -> list[list[list[int]]]:
    """The orders coverage counts: every spawn's first COVERAGE_ROUNDS rounds."""
    return [s.rounds[:COVERAGE_ROUNDS] for s in sections]


def order_key(order: list[int]) -> str:
    return hashlib.blake2b(" ".join(map(str, order)).encode(), digest_size=8).hexdigest()


class Coverage:
    """Distinct schedules, distinct orders per round index (the first
    COVERAGE_ROUNDS rounds of each spawn, at most ORDERS_CAP orders each),
    and how many runs in a row (the last ones) added no new schedule.

    Each order is kept with the number of the run that first took it (0:
    the baseline), so that merge can count the orders of the runs up to any
    run from the shards' counts alone: the first ORDERS_CAP orders of a
    round in run order are the same whichever process saw them."""

    def __init__(self) -> None:
        self.schedules: set[str] = set()
        self.first: dict[tuple[int, int], dict[str, tuple[int, int]]] = {}  # key -> (run, ranks)
        self.stale = 0

    def add(self, number: int, digest: str, orders: list[list[list[int]]] | None, is_run: bool = True) -> None:
        new = digest not in self.schedules
        self.schedules.add(digest)
        if is_run:
            self.stale = 0 if new else self.stale + 1
        for si, spawn in enumerate(orders or ()):
            for ri, order in enumerate(spawn[:COVERAGE_ROUNDS]):
                seen = self.first.setdefault((si, ri), {})
                if len(seen) < ORDERS_CAP:
                    seen.setdefault(order_key(order), (number, len(order)))

    def take_orders(self, saved: list[dict], upto: int) -> None:
        """A shard's saved orders that runs up to `upto` took first."""
        for entry in saved:
            seen = self.first.setdefault((entry["spawn"] - 1, entry["round"] - 1), {})
            for key, (number, ranks) in sorted(entry["first"].items(), key=lambda kv: kv[1][0]):
                if number <= upto and (key in seen or len(seen) < ORDERS_CAP):
                    seen[key] = min(seen.get(key, (number, ranks)), (number, ranks))

    def rounds(self) -> list[dict]:
        rows = []
        for (si, ri), seen in sorted(self.first.items()):
            if seen:
                exist = math.factorial(max(ranks for _, ranks in seen.values()))
                rows.append({"spawn": si + 1, "round": ri + 1, "tried": len(seen), "exist": exist,
                             "capped": len(seen) >= ORDERS_CAP and exist > ORDERS_CAP})
        return rows

    def to_json(self) -> dict:
        return {"distinct_schedules": len(self.schedules), "runs_in_a_row_with_nothing_new": self.stale,
                "rounds": self.rounds(),
                "orders": [{"spawn": si + 1, "round": ri + 1, "first": {k: list(v) for k, v in seen.items()}}
                           for (si, ri), seen in sorted(self.first.items())]}


def exist_text(n: int) -> str:
    return str(n) if n < 10**9 else f"{n:.3g}".replace("e+", "e")


def coverage_lines(cov: Coverage, shown: int = 24) -> list[str]:
    rows = cov.rounds()
    several = len({r["spawn"] for r in rows}) > 1
    items = [
        (f"spawn {r['spawn']} " if several else "")
        + f"round {r['round']} {r['tried']}{'+' if r['capped'] else ''}/{exist_text(r['exist'])}"
        for r in rows
    ]
    lines = [f"coverage: orders tried per round (of those that exist): {', '.join(items[:shown])}"]
    if len(items) > shown:
        lines[0] += f", ... ({len(items) - shown} more rounds in {RESULT_FILE})"
    return lines


# ---- the runs ---------------------------------------------------------------------
@dataclass
class RunResult:
    number: int
    label: str
    outcome: Outcome
    digest: str
    orders: list[list[list[int]]] | None  # for coverage, until the run is committed
    prefix: str  # where its recording and output are

    def to_json(self) -> dict:
        return {"run": self.number, "label": self.label, "outcome": self.outcome.to_json(),
                "schedule": self.digest, "output": self.prefix}

    @staticmethod
    def from_json(d: dict) -> "RunResult":
        return RunResult(int(d["run"]), str(d["label"]), Outcome.from_json(d["outcome"]), str(d["schedule"]),
                         None, str(d["output"]))


@dataclass
class Explored:
    committed: list[RunResult]  # the runs reported, in number order, none after the first failure
    coverage: Coverage
    stopped: str  # "done", "failure", "stale", "time"

    @property
    def failure(self) -> RunResult | None:
        return self.committed[-1] if self.stopped == "failure" else None


class Committer:
    """Takes run results in number order and decides when exploring stops:
    at the first failure, or after --until-stale runs in a row that added
    no new schedule. What it decides depends on the results in order only,
    never on how many ran at once."""

    def __init__(self, coverage: Coverage, until_stale: int | None):
        self.coverage = coverage
        self.until_stale = until_stale
        self.committed: list[RunResult] = []
        self.stopped = ""

    def take(self, r: RunResult) -> None:
        self.committed.append(r)
        self.coverage.add(r.number, r.digest, r.orders)
        r.orders = None
        if r.outcome.failed:
            self.stopped = "failure"
        elif self.until_stale and self.coverage.stale >= self.until_stale:
            self.stopped = "stale"


def run_one(runner: Runner, out: str, p: Planned) -> RunResult:
    prefix = os.path.join(out, "runs", f"{p.number:04d}")
    got = runner.run(prefix, dict(p.env, KB_RECORD=prefix + ".schedule"), tag=p.number)
    recorded = read_schedule(prefix + ".schedule")
    return RunResult(p.number, p.label, got, schedule_digest(recorded), orders_of(recorded), prefix)


def run_all(runner: Runner, out: str, plan: list[Planned], jobs: int, deadline: float | None,
            committer: Committer) -> str:
    """Run the plan, up to jobs at once, started in number order and
    committed in number order; when the committer stops, the runs above
    its last are killed and forgotten. Returns why it stopped."""
    results: dict[int, RunResult] = {}
    running: dict[concurrent.futures.Future, int] = {}
    nxt = done_upto = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        while True:
            late = deadline is not None and time.monotonic() >= deadline
            while not committer.stopped and not late and len(running) < jobs and nxt < len(plan):
                running[pool.submit(run_one, runner, out, plan[nxt])] = nxt
                nxt += 1
            if not running:
                if late and nxt < len(plan):
                    committer.stopped = "time"
                break
            wait = None if deadline is None or committer.stopped else max(0.0, deadline - time.monotonic())
            finished, _ = concurrent.futures.wait(running, timeout=wait,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
            for f in finished:
                results[running.pop(f)] = f.result()
            while not committer.stopped and done_upto in results:
                committer.take(results.pop(done_upto))
                done_upto += 1
            if committer.stopped:
                runner.cancel(above=committer.committed[-1].number)
            elif deadline is not None and time.monotonic() >= deadline and (running or nxt < len(plan)):
                committer.stopped = "time"
                runner.cancel()
    # Forgotten runs leave no files behind, so DIR is the same for any --jobs.
    last = committer.committed[-1].number if committer.committed else 0
    for p in plan[done_upto:nxt]:  # the runs started and not committed
        if p.number > last:
            for ext in (".schedule", ".out", ".err"):
                try:
                    os.unlink(os.path.join(out, "runs", f"{p.number:04d}{ext}"))
                except FileNotFoundError:
                    pass
    return committer.stopped or "done"


# ---- shrinking --------------------------------------------------------------------
class Shrinker:
    """Replays candidate partial schedules: `first_failing` answers which
    of a sequence of candidates is the first to fail the same way, as
    trying them one by one would, and counts replays as that would (the
    budget and the reported count do not depend on --jobs); with jobs > 1
    the next candidates are replayed at once, ahead of need."""

    def __init__(self, runner: Runner, out: str, original: list[Section], failure: Outcome, jobs: int,
                 budget: int = SHRINK_BUDGET):
        self.runner, self.out, self.original, self.failure = runner, out, original, failure
        self.jobs, self.budget = jobs, budget
        self.tried: dict[frozenset, bool] = {}  # the candidates one-by-one trying would have replayed
        self.ran: dict[frozenset, tuple[bool, str]] = {}  # every replay run, and its files
        self.files = itertools.count(1)
        self.lock = threading.Lock()
        os.makedirs(os.path.join(out, "shrink"), exist_ok=True)

    @property
    def exhausted(self) -> bool:
        return len(self.tried) >= self.budget

    def replay(self, keep: list) -> None:
        with self.lock:
            prefix = os.path.join(self.out, "shrink", f"{next(self.files):04d}")
        write_partial(prefix + ".schedule", self.original, keep)
        got = self.runner.run(prefix, {"KB_REPLAY": prefix + ".schedule", "KB_RECORD": prefix + ".recorded"})
        with self.lock:
            self.ran[frozenset(keep)] = (got.same_failure(self.failure), prefix)

    def first_failing(self, candidates: Iterable[list]) -> int | None:
        it = iter(candidates)
        ahead: list[list] = []
        for i in itertools.count():
            if not ahead:
                ahead = list(itertools.islice(it, 1))
            if not ahead:
                return None
            keep = ahead.pop(0)
            key = frozenset(keep)
            if key not in self.tried:
                if self.exhausted:
                    return None
                if key not in self.ran:
                    ahead += list(itertools.islice(it, max(0, self.jobs - 1 - len(ahead))))
                    todo, seen = [], set()
                    for c in [keep] + ahead:
                        k = frozenset(c)
                        if k not in self.ran and k not in self.tried and k not in seen:
                            seen.add(k)
                            todo.append(c)
                    with concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs) as pool:
                        list(pool.map(self.replay, todo))
                self.tried[key] = self.ran[key][0]
            if self.tried[key]:
                return i
        return None

    def fails(self, keep: list) -> bool:
        return self.first_failing([keep]) == 0

    def prefix_of(self, keep: list) -> str:
        return self.ran[frozenset(keep)][1]


def ddmin(items: list, first_failing: Callable[[Iterable[list]], int | None],
          exhausted: Callable[[], bool] = lambda: False) -> list:
    """Zeller's delta debugging: a 1-minimal sublist of items that fails
    (items is assumed to). Each step's candidates, every chunk then (with
    more than two chunks) its complement, in turn, go to first_failing."""
    n = 2
    while len(items) >= 2 and not exhausted():
        size = math.ceil(len(items) / n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]

        def candidates() -> Iterator[list]:
            for i, chunk in enumerate(chunks):
                yield chunk
                if len(chunks) > 2:
                    yield [x for j, c in enumerate(chunks) if j != i for x in c]

        hit = first_failing(candidates())
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


def bisect_ends(items: list, fails: Callable[[list], bool]) -> list:
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

            def with_ends(candidates: Iterable[list]) -> int | None:
                return s.first_failing([first] + c + [last] for c in candidates)

            inner = [] if s.fails([first, last]) else ddmin(best[1:-1], with_ends, lambda: s.exhausted)
            best = [first] + inner + [last]
    elif reproduced:
        best = ddmin(best, s.first_failing, lambda: s.exhausted)
    prefix = s.prefix_of(best)
    path = os.path.join(out, "shrunk.schedule")
    shutil.copyfile(prefix + ".schedule", path)
    return Shrunk(path, len(s.tried), reproduced, read_schedule(prefix + ".recorded"))


# ---- gdb -------------------------------------------------------------------------
def first_turn_off_order(recorded: list[Section]) -> tuple[int, int, int, int, int] | None:
    """(spawn, round, rank, turn, position), all from 1 but position, of the
    first turn of the shrunk replay that is not round-robin's: in the first
    round out of rank order, the first place where its order and rank order
    differ. Turns count from 1 over the spawn, one per rank per round."""
    for si, s in enumerate(recorded):
        turn = 0
        for ri, r in enumerate(s.rounds):
            for pos, (got, want) in enumerate(zip(r, sorted(r))):
                if got != want:
                    return si + 1, ri + 1, got, turn + pos + 1, pos
            turn += len(r)
    return None


GDB_STOP = r'''
import os, struct, tempfile
import gdb

KB_SPAWN, KB_ROUND, KB_RANK, KB_TURN = %(spawn)d, %(round)d, %(rank)d, %(turn)d
KB_SCRIPTS = %(scripts)r
kb_spawns, kb_turns = [0], [0]


def kb_embedded_script(path):
    """The gdb script the library carries in its .debug_gdb_scripts section."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def section(i):
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size
    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        if data[stroff + name:data.index(b"\0", stroff + name)] == b".debug_gdb_scripts":
            for entry in data[off:off + size].split(b"\0"):
                if entry[:1] == b"\x04" and b"\n" in entry:
                    return entry[1:].split(b"\n", 1)[1].decode()
    return None


def kb_load_commands():
    """`kb ranks` and friends: auto-loaded with the library when gdb's
    safe-path allows it; else from the library's embedded copy or a file."""
    try:
        gdb.execute("help kb", to_string=True)
        return True
    except gdb.error:
        pass
    for objfile in gdb.objfiles():
        if os.path.basename(objfile.filename).startswith("libkbthreads"):
            try:
                text = kb_embedded_script(objfile.filename)
            except (OSError, ValueError, struct.error):
                text = None
            if text:
                with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
                    f.write(text)
                gdb.execute("source " + f.name)
                os.unlink(f.name)
                return True
    for path in KB_SCRIPTS:
        if os.path.exists(path):
            gdb.execute("source " + path)
            return True
    print("kbthreads-explore: the kb commands are not loaded: source gdb/kbthreads_gdb.py")
    return False


class KbSpawnCount(gdb.Breakpoint):
    """Counts the process's replayed spawns (kb__replay_open: one a spawn)."""

    def stop(self):
        kb_spawns[0] += 1
        kb_turns[0] = 0
        return False


class KbFirstTurnOffOrder(gdb.Breakpoint):
    """The start of turn KB_TURN of spawn KB_SPAWN: rank KB_RANK's turn in
    round KB_ROUND. kb__turn_begin runs once at the start of every turn, so
    counting its hits finds the turn without debug info; with debug info
    the rank and round are checked as well."""

    def stop(self):
        if kb_spawns[0] != KB_SPAWN:
            return False
        kb_turns[0] += 1
        try:
            here = (int(gdb.parse_and_eval("rk->index")), int(gdb.parse_and_eval("rk->run->counters.rounds")))
            if here != (KB_RANK, KB_ROUND):
                return False
        except gdb.error:
            if kb_turns[0] != KB_TURN:
                return False
        kb_load_commands()
        print("kbthreads-explore: stopped at the start of turn %%d (spawn %%d, round %%d: rank %%d), the first "
              "that differs from round-robin; `kb ranks` lists the ranks" %% (KB_TURN, KB_SPAWN, KB_ROUND, KB_RANK))
        self.enabled = False
        return True


KbSpawnCount("kb__replay_open")
KbFirstTurnOffOrder("kb__turn_begin")
'''


def gdb_script_paths() -> list[str]:
    """Where kbthreads_gdb.py may be, seen from this file: the installed
    layout (bin/ next to share/kbthreads/), the source tree, and the source
    tree of the build tree this copy is in."""
    here = os.path.dirname(os.path.realpath(__file__))
    paths = [os.path.normpath(os.path.join(here, *p)) for p in
             (("..", "share", "kbthreads", "kbthreads_gdb.py"), ("..", "..", "..", "gdb", "kbthreads_gdb.py"))]
    try:
        with open(os.path.join(here, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                    paths.append(os.path.join(line.split("=", 1)[1].strip(), "gdb", "kbthreads_gdb.py"))
    except OSError:
        pass
    return paths


def write_gdb_script(path: str, shrunk: str, recorded: list[Section]) -> bool:
    """DIR/replay.gdb: replay the shrunk schedule and stop at its first turn
    out of rank order. False when no turn differs (nothing to stop at)."""
    where = first_turn_off_order(recorded)
    if where is None:
        return False
    spawn, rnd, rank, turn, _ = where
    with open(path, "w", encoding="utf-8") as f:
        f.write("# kbthreads-explore: replay the shrunk schedule, stopped at its first turn out of rank order.\n")
        f.write("set pagination off\nset confirm off\nset breakpoint pending on\nset print thread-events off\n")
        for name in SCHEDULE_ENV:
            f.write(f"unset environment {name}\n")
        f.write(f"set environment KB_REPLAY {shrunk}\n")
        f.write("python\n")
        f.write(GDB_STOP % {"spawn": spawn, "round": rnd, "rank": rank, "turn": turn, "scripts": gdb_script_paths()})
        f.write("end\nrun\n")
    return True


def is_script(path: str) -> bool:
    """A file that starts with #! (a pyenv shim, a Python file): gdb cannot run it."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def gdb_command(script: str, command: list[str]) -> list[str]:
    """gdb on the command, which must name a program, not a script: a
    command found on PATH is given by its full path."""
    exe = shutil.which(command[0]) if os.sep not in command[0] else command[0]
    return ["gdb", "-q", "-x", script, "--args", exe or command[0]] + command[1:]


# ---- the command line --------------------------------------------------------------
def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if not v > 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return v


def shard_spec(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not K/N (shard K of N, 1 <= K <= N): {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: the number of shards N must be at least 1")
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{text}: shard K must be 1 to {n}")
    return k, n


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def add_common_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--out", default="kbthreads-explore-out", metavar="DIR",
                   help=f"where {what} (default ./kbthreads-explore-out)")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="runs (and shrinking replays) at once, at most (default: the CPUs this process may use); "
                   "the outcome does not depend on it")
    p.add_argument("--gdb", action="store_true",
                   help="open the shrunk failing schedule under gdb, stopped at its first turn out of rank order")


def build_parser(prog: str) -> argparse.ArgumentParser:
    pad = " " * (len(prog) + 7)
    p = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [--runs N] [--strategy pct|seeded|exhaustive] [--depth D] [--timeout SECONDS]\n"
        f"{pad}[--jobs N] [--shard K/N] [--until-stale M] [--time-budget SECONDS]\n"
        f"{pad}[--compare-output] [--gdb] [--out DIR] -- COMMAND [ARGS...]\n"
        f"       {prog} merge [--out DIR] [--jobs N] [--gdb] SHARD_DIR...",
        description=DESCRIPTION % {"prog": prog},
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--runs", type=positive_int, default=100, metavar="N", help="schedules to try, at most (default 100)")
    p.add_argument(
        "--strategy",
        choices=("pct", "seeded", "exhaustive"),
        default="pct",
        help="how schedules are chosen (default pct; see below)",
    )
    p.add_argument(
        "--depth", type=positive_int, default=3, metavar="D", help="the PCT bug depth: D-1 priority changes (default 3)"
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="a run still going after this long is killed and counts as a hang (default 60)",
    )
    p.add_argument(
        "--compare-output",
        action="store_true",
        help="a run whose stdout differs from the baseline's fails too",
    )
    p.add_argument("--shard", type=shard_spec, metavar="K/N",
                   help="explore only the K-th of N disjoint parts of the runs, do not shrink, write DIR/result.json "
                   "for `merge`")
    p.add_argument("--until-stale", type=positive_int, metavar="M",
                   help="stop when M runs in a row added no new schedule (with --shard: applied by merge)")
    p.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                   help="stop starting runs this long after the baseline and report what ran (shrinking still runs)")
    add_common_options(p, "recordings, outputs, the result file and the shrunk schedule go")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS...]", help="the program to explore")
    return p


def build_merge_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{prog} merge",
        description="Merge the --out directories of the shards of one exploration (--shard K/N, K = 1..N, the "
        "same other options) into the report one unsharded run would give: the lowest-numbered failure, shrunk "
        "here, and the same exit status.",
    )
    add_common_options(p, "the shrinking replays and the shrunk schedule go")
    p.add_argument("dirs", nargs="*", metavar="SHARD_DIR", help="a shard's --out directory")
    return p


def check_command(command: list[str]) -> str | None:
    """Why command cannot be run, or None."""
    exe = command[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            return f"{exe}: no such file"
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            return f"{exe}: not an executable file"
        return None
    return None if shutil.which(exe) else f"{exe}: command not found"


def prepare_out(out: str) -> str | None:
    """Create DIR and its runs/ folder, clear files an earlier exploration
    left there; why it cannot be written, or None."""
    try:
        for sub in ("runs", "shrink"):
            d = os.path.join(out, sub)
            os.makedirs(d, exist_ok=True)
            for name in os.listdir(d):
                if re.fullmatch(r"\d{4,}\.(schedule|recorded|out|err)", name):
                    os.unlink(os.path.join(d, name))
        for name in ("original.schedule", "shrunk.schedule", "replay.gdb", RESULT_FILE):
            if os.path.exists(os.path.join(out, name)):
                os.unlink(os.path.join(out, name))
        probe = os.path.join(out, ".kbthreads-explore-probe")
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError as e:
        return f"cannot write to --out {out}: {e.strerror or e}"
    return None


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def baseline_line(baseline: list[Section]) -> str:
    nrounds = sum(len(s.rounds) for s in baseline)
    ranks = "/".join(str(s.nprocs) for s in baseline)
    return f"baseline (round-robin): ok, {plural(len(baseline), 'spawn')}, {ranks} ranks, {plural(nrounds, 'round')}"


def write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


@dataclass
class Options:
    """What the report and the stop rules depend on (and merge compares)."""

    command: list[str]
    strategy: str
    runs: int
    depth: int
    timeout: float
    compare_output: bool
    until_stale: int | None
    time_budget: float | None

    def to_json(self) -> dict:
        return dict(self.__dict__)


def report(say: Callable[[str], None], opts: Options, explored: Explored) -> None:
    """Everything after the baseline line, up to shrinking: the same for one
    run and for its shards merged."""
    runs = len(explored.committed)
    cov = explored.coverage
    tried = f"tried {plural(runs, 'run')}, {plural(len(cov.schedules), 'distinct schedule')} (the baseline's included)"
    failing = explored.failure
    if failing is not None:
        p = failing.prefix
        say(f"run {failing.number} ({failing.label}) failed: {failing.outcome.text}; output in {p}.out, {p}.err")
        say(tried)
    elif explored.stopped == "stale":
        say(f"no failure: {tried}; stopped: {opts.until_stale} runs in a row found no new schedule (--until-stale)")
    elif explored.stopped == "time":
        say(f"no failure: {tried}; stopped at the time budget ({opts.time_budget:g} s)")
    else:
        say(f"no failure: {tried}")
    for line in coverage_lines(cov):
        say(line)
    say(f"coverage: the last {plural(cov.stale, 'run')} in a row found no new schedule")


def finish_failure(say: Callable[[str], None], runner: Runner, out: str, failing: RunResult, jobs: int,
                   command: list[str], open_gdb: bool) -> int:
    """Shrink the failing run and print how to replay it, alone and in gdb."""
    original = os.path.join(out, "original.schedule")
    shutil.copyfile(failing.prefix + ".schedule", original)
    recorded = read_schedule(original)
    if not recorded or not any(s.rounds for s in recorded):
        say(f"the failing run recorded no round (it failed before its first); see {original}")
        return EXIT_FOUND
    result = shrink(runner, out, recorded, failing.outcome, jobs)
    if not result.reproduced:
        say(f"replaying the failing schedule did not fail the same way (is the program deterministic?); "
            f"{result.path} holds it unshrunk")
    diff = differing_rounds(result.recorded)
    total = sum(len(s.rounds) for s in result.recorded)
    say(
        f"shrunk in {plural(result.replays, 'replay')}: {len(diff)} of {plural(total, 'round')} "
        f"{'differs' if len(diff) == 1 else 'differ'} from round-robin"
    )
    for si, ri in diff[:50]:
        order = result.recorded[si].rounds[ri]
        where = f"spawn {si + 1} round {ri + 1}" if len(result.recorded) > 1 else f"round {ri + 1}"
        say(f"  {where}: {' '.join(map(str, order))} (round-robin: {' '.join(map(str, sorted(order)))})")
    if len(diff) > 50:
        say(f"  ... and {len(diff) - 50} more (see {result.path})")
    say(f"wrote {original} (the failing run's recording) and {result.path}")
    say(f"replay: KB_REPLAY={shlex.quote(result.path)} {shlex.join(command)}")
    script = os.path.join(out, "replay.gdb")
    if write_gdb_script(script, result.path, result.recorded):
        gdb = gdb_command(script, command)
        say(f"debug: {shlex.join(gdb)}")
        if is_script(gdb[gdb.index("--args") + 1]):
            say(f"  (gdb runs programs, not scripts: give {command[0]}'s interpreter by its path, "
                "e.g. -- /usr/bin/python3 prog.py)")
        if open_gdb:
            sys.stdout.flush()
            subprocess.run(gdb, cwd=runner.cwd)
    return EXIT_FOUND


def explore(args: argparse.Namespace, say: Callable[[str], None], complain: Callable[[str], None]) -> int:
    out = os.path.abspath(args.out)
    jobs = args.jobs or default_jobs()
    runner = Runner(args.command, args.timeout, None)
    base = os.path.join(out, "baseline")
    env = {"KB_RECORD": base + ".schedule"}
    if args.strategy == "exhaustive":
        # index 0 runs round-robin; its recording says how many indices the
        # library enumerates at this limit (exhaustive_count)
        env["KB_SCHED_EXHAUSTIVE"] = f"0:{args.runs + 1}"
    try:
        got = runner.run(base, env)
    except OSError as e:
        complain(f"cannot run {args.command[0]}: {e.strerror or e}")
        return EXIT_USAGE
    baseline = read_schedule(base + ".schedule")
    if got.failed:
        complain(f"the baseline run (round-robin) fails: {got.text}; see {base}.err")
        return EXIT_USAGE
    if not baseline:
        complain(f"{args.command[0]} recorded no spawn: is it a libkbthreads program? (KB_RECORD={base}.schedule)")
        return EXIT_USAGE
    if args.compare_output:
        with open(base + ".out", "rb") as f:
            runner.compare = f.read()
    say(baseline_line(baseline))

    plan = schedules(args.strategy, args.runs, args.depth, baseline)
    if not plan:
        most = max(s.nprocs for s in baseline)
        complain(
            f"--strategy exhaustive: one round of {most} ranks has {math.factorial(most)} orders; "
            f"--runs {args.runs} cannot try them all (use --runs {math.factorial(most) - 1} or more)"
        )
        return EXIT_USAGE
    opts = Options(args.command, args.strategy, args.runs, args.depth, args.timeout, args.compare_output,
                   args.until_stale, args.time_budget)
    coverage = Coverage()
    coverage.add(0, schedule_digest(baseline), orders_of(baseline), is_run=False)
    if args.shard:
        plan = shard_of(plan, args.strategy, *args.shard)
    # A shard cannot know when the whole exploration goes stale: merge does.
    committer = Committer(coverage, None if args.shard else args.until_stale)
    deadline = time.monotonic() + args.time_budget if args.time_budget else None
    stopped = run_all(runner, out, plan, jobs, deadline, committer)
    explored = Explored(committer.committed, coverage, stopped)
    failing = explored.failure
    result = {
        "format": RESULT_FORMAT,
        "options": opts.to_json(),
        "cwd": os.getcwd(),
        "shard": list(args.shard) if args.shard else None,
        "baseline": {"schedule": schedule_digest(baseline), "line": baseline_line(baseline)},
        "planned": [p.number for p in plan],
        "stopped": stopped,
        "runs": [r.to_json() for r in explored.committed],
        "coverage": coverage.to_json(),
        "failure": None if failing is None else dict(
            failing.to_json(), recording=open(failing.prefix + ".schedule", encoding="utf-8").read()),
    }
    write_json(os.path.join(out, RESULT_FILE), result)
    if args.shard:
        k, n = args.shard
        what = f"failure at run {failing.number} ({failing.outcome.text}), not shrunk: merge shrinks it" \
            if failing else "no failure"
        say(f"shard {k}/{n}: tried {plural(len(explored.committed), 'run')} of {len(plan)}, {what}; "
            f"result in {os.path.join(out, RESULT_FILE)}")
        return EXIT_FOUND if failing else EXIT_NONE_FOUND
    report(say, opts, explored)
    if failing is None:
        return EXIT_NONE_FOUND
    return finish_failure(say, runner, out, failing, jobs, args.command, args.gdb)


# ---- merge ----------------------------------------------------------------------
class MergeError(Exception):
    pass


def load_result(d: str) -> dict:
    path = os.path.join(d, RESULT_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise MergeError(f"{d}: no {RESULT_FILE} (not the --out directory of a kbthreads-explore --shard run)")
    except (OSError, ValueError) as e:
        raise MergeError(f"{path}: unreadable: {e}")
    if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
        raise MergeError(f"{path}: not a {RESULT_FORMAT} file")
    if not data.get("shard"):
        raise MergeError(f"{d}: not a shard's result (that exploration ran without --shard K/N)")
    return data


def option_text(name: str, value) -> str:
    if name == "command":
        return shlex.join(value)
    if name == "compare_output":
        return "--compare-output" if value else "no --compare-output"
    return f"--{name.replace('_', '-')} {value if value is not None else '(none)'}"


def merge_results(dirs: list[str]) -> tuple[list[dict], Options]:
    """The shards' results, checked to be the N shards of one exploration."""
    loaded = [(d, load_result(d)) for d in dirs]
    first_dir, first = loaded[0]
    n = first["shard"][1]
    seen: dict[int, str] = {}
    for d, r in loaded:
        k, rn = r["shard"]
        if rn != n:
            raise MergeError(f"{d} is shard {k}/{rn} and {first_dir} shard {first['shard'][0]}/{n}: "
                             "shards of different --shard N do not merge")
        for name in MERGED_OPTIONS:
            if r["options"].get(name) != first["options"].get(name):
                raise MergeError(f"{d} was explored with other options than {first_dir}: "
                                 f"{option_text(name, r['options'].get(name))}, not "
                                 f"{option_text(name, first['options'].get(name))}")
        if r["baseline"]["schedule"] != first["baseline"]["schedule"]:
            raise MergeError(f"{d}: its baseline ran another schedule than {first_dir}'s "
                             "(is the program deterministic?)")
        if k in seen:
            raise MergeError(f"shard {k}/{n} given twice: {seen[k]} and {d}")
        seen[k] = d
    missing = [k for k in range(1, n + 1) if k not in seen]
    if missing:
        raise MergeError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{k}/{n}' for k in missing)} "
                         f"missing: merge needs all {n}")
    o = first["options"]
    opts = Options(list(o["command"]), o["strategy"], o["runs"], o["depth"], o["timeout"], o["compare_output"],
                   o["until_stale"], o.get("time_budget"))
    return [r for _, r in loaded], opts


def merge(args: argparse.Namespace, say: Callable[[str], None], complain: Callable[[str], None]) -> int:
    try:
        results, opts = merge_results(args.dirs)
    except MergeError as e:
        complain(str(e))
        return EXIT_USAGE
    first = results[0]
    say(first["baseline"]["line"])
    coverage = Coverage()
    coverage.add(0, first["baseline"]["schedule"], None, is_run=False)
    by_number: dict[int, RunResult] = {}
    stopped_by: dict[int, str] = {}
    for r in results:
        for run in r["runs"]:
            by_number[run["run"]] = RunResult.from_json(run)
        for number in r["planned"]:
            stopped_by[number] = r["stopped"]
    # The runs in number order, as one exploration would have taken them.
    committer = Committer(coverage, opts.until_stale)
    stopped = "done"
    for number in sorted(stopped_by):
        if number not in by_number:
            stopped = "time"  # a shard stopped early: its time budget
            break
        committer.take(by_number[number])
        if committer.stopped:
            stopped = committer.stopped
            break
    upto = committer.committed[-1].number if committer.committed else 0
    for r in results:
        coverage.take_orders(r["coverage"]["orders"], upto)
    explored = Explored(committer.committed, coverage, stopped)
    report(say, opts, explored)
    failing = explored.failure
    if failing is None:
        return EXIT_NONE_FOUND
    out = os.path.abspath(args.out)
    why = prepare_out(out)
    if why:
        complain(why)
        return EXIT_USAGE
    compare = None
    if opts.compare_output:
        with open(os.path.join(os.path.dirname(os.path.dirname(failing.prefix)), "baseline.out"), "rb") as f:
            compare = f.read()
    runner = Runner(opts.command, opts.timeout, compare, cwd=first.get("cwd"))
    return finish_failure(say, runner, out, failing, args.jobs or default_jobs(), opts.command, args.gdb)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    if prog is None:
        prog = "python3 -m kbthreads.explore" if __package__ else os.path.basename(sys.argv[0])
    argv = list(sys.argv[1:] if argv is None else argv)

    def say(line: str, to=sys.stdout) -> None:
        print(f"{prog}: {line}" if not line.startswith("  ") else line, file=to, flush=True)

    def complain(line: str) -> None:
        say(line, sys.stderr)

    if argv[:1] == ["merge"]:
        parser = build_merge_parser(prog)
        args = parser.parse_args(argv[1:])
        if not args.dirs:
            parser.error("no SHARD_DIR given")
        action = merge
    else:
        parser = build_parser(prog)
        args = parser.parse_args(argv)
        if args.command[:1] == ["--"]:
            args.command = args.command[1:]
        if not args.command:
            parser.error("no COMMAND given (put it after --)")
        if args.shard and args.gdb:
            parser.error("--gdb with --shard: a shard does not shrink (give --gdb to merge)")
        why = check_command(args.command)
        if why:
            parser.exit(EXIT_USAGE, f"{prog}: cannot run the command: {why}\n")
        why = prepare_out(args.out)
        if why:
            parser.exit(EXIT_USAGE, f"{prog}: {why}\n")
        action = explore

    def stop(n: int, frame) -> None:
        # Kill every run's process group, then leave at once: worker threads
        # blocked in wait() would otherwise hold the exit up.
        for pid in list(LIVE_GROUPS):
            Runner.kill(pid)
        os._exit(128 + n)

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, stop)
    return action(args, say, complain)


if __name__ == "__main__":
    sys.exit(main())
