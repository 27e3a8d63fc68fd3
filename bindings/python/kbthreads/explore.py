#!/usr/bin/env python3
"""kbthreads-explore: hunt rank-order bugs in a program that links libkbthreads.

Runs COMMAND once in round-robin order (the baseline), then under up to N
other schedules, each in its own process, selected through the environment
the library reads (KB_SCHED_PCT, KB_SCHED_SEED, KB_SCHED_EXHAUSTIVE) and
recorded with KB_RECORD. At the first failing run it shrinks the schedule
toward round-robin (delta debugging over the rounds that differ from rank
order, each candidate replayed as a partial schedule through KB_REPLAY) and
prints the command that replays the shrunk one. docs/scheduling.md
describes the strategies and the files.

Installed as ``kbthreads-explore``; also ``python3 -m kbthreads.explore``.
Standard library only, and it never loads libkbthreads itself: the same
file runs as a script.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

EXIT_NONE_FOUND = 0
EXIT_FOUND = 1
EXIT_USAGE = 2

# Every variable the library reads for the schedule: cleared for each run,
# then set for the run's strategy.
SCHEDULE_ENV = ("KB_SCHED_SEED", "KB_SCHED_PCT", "KB_SCHED_EXHAUSTIVE", "KB_REPLAY", "KB_RECORD")
SHRINK_BUDGET = 200  # replays the shrinker may run

DESCRIPTION = """\
Run COMMAND (a program that links libkbthreads, in C or Python) once in
round-robin order, then under up to N other schedules, each in its own
process. A run fails when it exits non-zero, dies of a signal, runs past the
timeout (killed: a hang) or, with --compare-output, prints to stdout
something other than the baseline did. At the first failure the schedule is
shrunk toward round-robin (as many rounds as possible put back in rank
order) and the command that replays it is printed.
"""

EPILOG = """\
strategies (the run number i = 1..N is the seed or index):
  pct         KB_SCHED_PCT=i:DEPTH:R: random rank priorities, DEPTH-1
              demotions in the first R rounds (R: the baseline's rounds)
  seeded      KB_SCHED_SEED=i: a random permutation every round
  exhaustive  KB_SCHED_EXHAUSTIVE=i:N+1: every order of the first k rounds,
              k as large as fits in N runs, then round-robin

files in DIR:
  baseline.schedule, baseline.out, baseline.err   the round-robin run
  runs/NNNN.schedule, .out, .err                  run NNNN's recording and output
  original.schedule                               the failing run's recording
  shrink/NNNN.schedule, .recorded, .out, .err     each shrinking replay
  shrunk.schedule                                 the shrunk partial schedule

exit status: 1 a failing schedule was found, 0 none in N runs, 2 a usage
error, a command that cannot be run, or a baseline that fails.
"""


# ---- recordings -------------------------------------------------------------
@dataclass
class Section:
    """One spawn's recording (docs/scheduling.md, "Record and replay")."""

    nprocs: int = -1
    rounds: list[list[int]] = field(default_factory=list)
    end: str = ""


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
        elif words[0] == "end":
            sections[-1].end = " ".join(words[1:])
    return sections


def schedule_key(sections: list[Section]) -> tuple:
    return tuple(tuple(tuple(r) for r in s.rounds) for s in sections)


def differing_rounds(sections: list[Section]) -> list[tuple[int, int]]:
    """(spawn index, round index) of every round not in rank order."""
    return [(si, ri) for si, s in enumerate(sections) for ri, r in enumerate(s.rounds) if r != sorted(r)]


def write_partial(path: str, sections: list[Section], keep: Sequence[tuple[int, int]]) -> None:
    """A partial schedule: per spawn, only the rounds in keep, with their
    recorded orders; every other round runs in rank order."""
    chosen = set(keep)
    with open(path, "w", encoding="utf-8") as f:
        for si, s in enumerate(sections):
            f.write(f"kbthreads-schedule 1\nspawn {si + 1}\nnprocs {s.nprocs}\npartial\n")
            for ri, r in enumerate(s.rounds):
                if (si, ri) in chosen:
                    f.write(f"round {ri + 1} " + " ".join(map(str, r)) + "\n")


# ---- running the command -----------------------------------------------------
@dataclass
class Outcome:
    kind: str  # "ok", "exit", "signal", "hang", "output"
    code: int  # the exit status or signal number (0 otherwise)
    text: str  # how it failed, for people

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    def same_failure(self, other: "Outcome") -> bool:
        return self.kind == other.kind and self.code == other.code


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


class Runner:
    """Runs the command, one process (and process group) at a time; the
    group is killed at the timeout and whenever a run ends, so nothing the
    command started is left running."""

    def __init__(self, command: list[str], timeout: float, compare: bytes | None):
        self.command = command
        self.timeout = timeout
        self.compare = compare  # the baseline's stdout, with --compare-output
        self.current: subprocess.Popen | None = None

    def run(self, prefix: str, env_extra: dict[str, str]) -> Outcome:
        env = {k: v for k, v in os.environ.items() if k not in SCHEDULE_ENV}
        env.update(env_extra)
        with open(prefix + ".out", "wb") as out, open(prefix + ".err", "wb") as err:
            self.current = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True
            )
            try:
                rc = self.current.wait(self.timeout)
                hung = False
            except subprocess.TimeoutExpired:
                hung = True
            finally:
                self.kill_group()
                rc = self.current.wait()
                self.current = None
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

    def kill_group(self) -> None:
        if self.current is None:
            return
        try:
            os.killpg(self.current.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# ---- strategies ----------------------------------------------------------------
def exhaustive_count(nprocs: int, limit: int) -> int:
    """(n!)^k for the largest k with (n!)^k <= limit: the library's
    KB_SCHED_EXHAUSTIVE count (order.c: kb_exhaustive_span)."""
    f = math.factorial(nprocs) if nprocs >= 0 else 1
    count = 1
    if f < 2:
        return 1
    while count * f <= limit:
        count *= f
    return count


def schedules(strategy: str, runs: int, depth: int, baseline: list[Section]) -> list[tuple[str, dict[str, str]]]:
    """(label, environment) of every run."""
    if strategy == "seeded":
        return [(f"seeded seed {i}", {"KB_SCHED_SEED": str(i)}) for i in range(1, runs + 1)]
    if strategy == "pct":
        rounds = max([len(s.rounds) for s in baseline] + [1])
        return [
            (f"pct seed {i} depth {depth} rounds {rounds}", {"KB_SCHED_PCT": f"{i}:{depth}:{rounds}"})
            for i in range(1, runs + 1)
        ]
    limit = runs + 1  # index 0 is round-robin, the baseline
    count = max(exhaustive_count(s.nprocs, limit) for s in baseline)
    return [
        (f"exhaustive index {i} of {count}", {"KB_SCHED_EXHAUSTIVE": f"{i}:{limit}"}) for i in range(1, count)
    ]


# ---- shrinking --------------------------------------------------------------------
def ddmin(items: list, fails: Callable[[list], bool]) -> list:
    """Zeller's delta debugging: a 1-minimal sublist of items for which
    fails() holds (fails(items) is assumed)."""
    n = 2
    while len(items) >= 2:
        size = math.ceil(len(items) / n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        for i, chunk in enumerate(chunks):
            if fails(chunk):
                items, n = chunk, 2
                break
            rest = [x for j, c in enumerate(chunks) if j != i for x in c]
            if len(chunks) > 2 and fails(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


@dataclass
class Shrunk:
    path: str
    replays: int
    reproduced: bool
    recorded: list[Section]  # what the shrunk schedule's replay ran


def shrink(runner: Runner, out: str, original: list[Section], failure: Outcome) -> Shrunk:
    tried: dict[frozenset, tuple[bool, str]] = {}
    os.makedirs(os.path.join(out, "shrink"), exist_ok=True)

    def attempt(keep: list) -> bool:
        key = frozenset(keep)
        if key in tried:
            return tried[key][0]
        if len(tried) >= SHRINK_BUDGET:
            return False
        prefix = os.path.join(out, "shrink", f"{len(tried) + 1:04d}")
        write_partial(prefix + ".schedule", original, keep)
        got = runner.run(prefix, {"KB_REPLAY": prefix + ".schedule", "KB_RECORD": prefix + ".recorded"})
        tried[key] = (got.same_failure(failure), prefix)
        return tried[key][0]

    every = differing_rounds(original)
    reproduced = attempt(every)
    best = ddmin(every, attempt) if reproduced else every
    prefix = tried[frozenset(best)][1]
    path = os.path.join(out, "shrunk.schedule")
    shutil.copyfile(prefix + ".schedule", path)
    return Shrunk(path, len(tried), reproduced, read_schedule(prefix + ".recorded"))


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
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return v


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [--runs N] [--strategy pct|seeded|exhaustive] [--depth D] [--timeout SECONDS]\n"
        f"{' ' * (len(prog) + 7)}[--compare-output] [--out DIR] -- COMMAND [ARGS...]",
        description=DESCRIPTION,
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
    p.add_argument(
        "--out",
        default="kbthreads-explore-out",
        metavar="DIR",
        help="where recordings, outputs and the shrunk schedule go (default ./kbthreads-explore-out)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS...]", help="the program to explore")
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
                if re.fullmatch(r"\d{4}\.(schedule|recorded|out|err)", name):
                    os.unlink(os.path.join(d, name))
        for name in ("original.schedule", "shrunk.schedule"):
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


def explore(args: argparse.Namespace, say: Callable[[str], None], complain: Callable[[str], None]) -> int:
    out = os.path.abspath(args.out)
    runner = Runner(args.command, args.timeout, None)
    base = os.path.join(out, "baseline")
    try:
        got = runner.run(base, {"KB_RECORD": base + ".schedule"})
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
    nrounds = sum(len(s.rounds) for s in baseline)
    ranks = "/".join(str(s.nprocs) for s in baseline)
    say(f"baseline (round-robin): ok, {plural(len(baseline), 'spawn')}, {ranks} ranks, {plural(nrounds, 'round')}")

    plan = schedules(args.strategy, args.runs, args.depth, baseline)
    if not plan:
        most = max(s.nprocs for s in baseline)
        complain(
            f"--strategy exhaustive: one round of {most} ranks has {math.factorial(most)} orders; "
            f"--runs {args.runs} cannot try them all (use --runs {math.factorial(most) - 1} or more)"
        )
        return EXIT_USAGE
    seen = {schedule_key(baseline)}
    failing = None
    for i, (label, env) in enumerate(plan, start=1):
        prefix = os.path.join(out, "runs", f"{i:04d}")
        got = runner.run(prefix, dict(env, KB_RECORD=prefix + ".schedule"))
        recorded = read_schedule(prefix + ".schedule")
        seen.add(schedule_key(recorded))
        if got.failed:
            failing = (i, label, got, recorded, prefix)
            break
    runs = i
    tried = f"tried {plural(runs, 'run')}, {plural(len(seen), 'distinct schedule')} (the baseline's included)"
    if failing is None:
        say(f"no failure: {tried}")
        return EXIT_NONE_FOUND
    i, label, got, recorded, prefix = failing
    say(f"run {i} ({label}) failed: {got.text}; output in {prefix}.out, {prefix}.err")
    say(tried)
    original = os.path.join(out, "original.schedule")
    shutil.copyfile(prefix + ".schedule", original)
    if not recorded:
        say(f"the failing run recorded no round (it failed before its first); see {original}")
        return EXIT_FOUND
    result = shrink(runner, out, recorded, got)
    if not result.reproduced:
        say(f"replaying the failing schedule did not fail the same way (is the program deterministic?); "
            f"{result.path} holds it unshrunk")
    diff = differing_rounds(result.recorded)
    total = sum(len(s.rounds) for s in result.recorded)
    say(
        f"shrunk in {plural(result.replays, 'replay')}: {len(diff)} of {plural(total, 'round')} "
        f"{'differs' if len(diff) == 1 else 'differ'} from round-robin"
    )
    for si, ri in diff:
        order = result.recorded[si].rounds[ri]
        where = f"spawn {si + 1} round {ri + 1}" if len(result.recorded) > 1 else f"round {ri + 1}"
        say(f"  {where}: {' '.join(map(str, order))} (round-robin: {' '.join(map(str, sorted(order)))})")
    say(f"wrote {original} (the failing run's recording) and {result.path}")
    say(f"replay: KB_REPLAY={shlex.quote(result.path)} {shlex.join(args.command)}")
    return EXIT_FOUND


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    if prog is None:
        prog = "python3 -m kbthreads.explore" if __package__ else os.path.basename(sys.argv[0])
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no COMMAND given (put it after --)")
    why = check_command(args.command)
    if why:
        parser.exit(EXIT_USAGE, f"{prog}: cannot run the command: {why}\n")
    why = prepare_out(args.out)
    if why:
        parser.exit(EXIT_USAGE, f"{prog}: {why}\n")

    def say(line: str, to=sys.stdout) -> None:
        print(f"{prog}: {line}" if not line.startswith("  ") else line, file=to, flush=True)

    def complain(line: str) -> None:
        say(line, sys.stderr)

    runner_signals = (signal.SIGTERM, signal.SIGHUP)
    for s in runner_signals:
        signal.signal(s, lambda n, f: sys.exit(128 + n))  # unwinds through Runner.run's kill
    return explore(args, say, complain)


if __name__ == "__main__":
    sys.exit(main())
