# SPDX-License-Identifier: MIT
"""The command line: kbthreads-explore [options] -- COMMAND, and
kbthreads-explore merge SHARD_DIR...."""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TextIO

from .exploration import explore
from .merge import merge
from .results import EXIT_USAGE, prepare_out
from .runner import LIVE_GROUPS, Runner

DESCRIPTION = """\
Run COMMAND (a program that links libkbthreads, in C or Python) once in
round-robin order, then under up to N other schedules, each in its own
process, up to --jobs at once. A run fails when it exits non-zero, dies of
a signal, runs past the timeout (killed: a hang) or, with
--compare-output, prints to stdout something other than the baseline did.
The failing run of the lowest number is reported, whatever --jobs: its
schedule is shrunk toward round-robin (as many rounds as possible put back
in rank order; with --strategy delay, as many delays as possible dropped)
and the commands that replay it, alone and under gdb, are printed.

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
  delay       KB_SCHED_DELAYS=t,t,...: every schedule with at most --delays D
              delays over the whole run (a delay moves the rank whose turn
              it is behind the ranks still to run in its round), with 0, 1,
              ..., D delays in turn, each once, planned from the runs' own
              recordings: all of them unless --runs, --time-budget or
              --until-stale cuts it short (no --runs default here); the
              report says up to how many delays every schedule was run, and
              how much of the level cut short ran

--shard K/N: runs K, K+N, K+2N, ... (pct, seeded), the K-th of N slices
of the indices (exhaustive), or the K-th, K+N-th, ... schedules of one delay
and every schedule that extends them (delay); no shrinking; the result goes
to DIR/result.json; a shard exits 1 (a failure) or 0, merge gives the
exploration's status (3 included).

files in DIR:
  result.json                                     runs, outcomes, coverage, the failure
  baseline.schedule, baseline.out, baseline.err   the round-robin run
  runs/NNNN.schedule, .out, .err                  run NNNN's recording and output
  original.schedule                               the failing run's recording
  shrink/NNNN.schedule, .recorded, .out, .err     each shrinking replay
  shrunk.schedule                                 the shrunk partial schedule
  replay.gdb                                      gdb commands: replay it, stop at
                                                  its first turn out of rank order

exit status: 1 a failing schedule was found; 0 none; 3 none, but the
exploration stopped before its bound (--strategy delay or exhaustive cut
short by --runs, --time-budget or --until-stale: it proves less than asked);
2 a usage error, a command that cannot be run, a baseline that fails, or
shards that do not merge.
"""


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
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


def add_common_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--out", default="kbthreads-explore-out", metavar="DIR", help=f"where {what} (default ./kbthreads-explore-out)"
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="runs (and shrinking replays) at once, at most (default: the CPUs this process may use); "
        "the outcome does not depend on it",
    )
    p.add_argument(
        "--gdb",
        action="store_true",
        help="open the shrunk failing schedule under gdb, stopped at its first turn out of rank order",
    )


def build_parser(prog: str) -> argparse.ArgumentParser:
    pad = " " * (len(prog) + 7)
    p = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [--runs N] [--strategy pct|seeded|exhaustive|delay] [--depth D] [--delays D]\n"
        f"{pad}[--timeout SECONDS]"
        f" [--jobs N] [--shard K/N] [--until-stale M] [--time-budget SECONDS]\n"
        f"{pad}[--compare-output] [--gdb] [--out DIR] -- COMMAND [ARGS...]\n"
        f"       {prog} merge [--out DIR] [--jobs N] [--gdb] SHARD_DIR...",
        description=DESCRIPTION % {"prog": prog},
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--runs",
        type=positive_int,
        default=None,
        metavar="N",
        help="schedules to try, at most (default 100; --strategy delay: no cap, every schedule within --delays)",
    )
    p.add_argument(
        "--strategy",
        choices=("pct", "seeded", "exhaustive", "delay"),
        default="pct",
        help="how schedules are chosen (default pct; see below)",
    )
    p.add_argument(
        "--depth", type=positive_int, default=3, metavar="D", help="the PCT bug depth: D-1 priority changes (default 3)"
    )
    p.add_argument(
        "--delays",
        type=positive_int,
        default=None,
        metavar="D",
        help="--strategy delay: every schedule with at most D delays (default 2)",
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
        "--shard",
        type=shard_spec,
        metavar="K/N",
        help="explore only the K-th of N disjoint parts of the runs, do not shrink, write DIR/result.json for `merge`",
    )
    p.add_argument(
        "--until-stale",
        type=positive_int,
        metavar="M",
        help="stop when M runs in a row added no new schedule (with --shard: applied by merge)",
    )
    p.add_argument(
        "--time-budget",
        type=positive_float,
        metavar="SECONDS",
        help="stop starting runs this long after the baseline and report what ran (shrinking still runs)",
    )
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


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    if prog is None:
        prog = os.path.basename(sys.argv[0])  # kbthreads-explore, as pip's console script
    argv = list(sys.argv[1:] if argv is None else argv)

    def say(line: str, to: TextIO = sys.stdout) -> None:
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
        if args.delays is not None and args.strategy != "delay":
            parser.error(f"--delays is for --strategy delay, not {args.strategy}")
        if args.strategy == "delay" and args.delays is None:
            args.delays = 2
        if args.runs is None and args.strategy != "delay":
            args.runs = 100  # a sample size; delay covers its bound unless capped
        why = check_command(args.command)
        if why:
            parser.exit(EXIT_USAGE, f"{prog}: cannot run the command: {why}\n")
        why = prepare_out(args.out)
        if why:
            parser.exit(EXIT_USAGE, f"{prog}: {why}\n")
        action = explore

    def stop(n: int, frame: FrameType | None) -> None:
        # Kill every run's process group, then leave at once: worker threads
        # blocked in wait() would otherwise hold the exit up.
        for pid in list(LIVE_GROUPS):
            Runner.kill(pid)
        os._exit(128 + n)

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, stop)
    return action(args, say, complain)
