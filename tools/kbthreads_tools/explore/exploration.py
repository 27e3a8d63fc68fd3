# SPDX-License-Identifier: MIT
"""One exploration: the baseline, the planned runs, the result file, the
report."""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from typing import Any

from .coverage import Coverage, orders_of
from .levels import levels_json, run_levels
from .report import baseline_line, finish_failure, report
from .results import (
    EXIT_FOUND,
    EXIT_NONE_FOUND,
    EXIT_USAGE,
    RESULT_FILE,
    RESULT_FORMAT,
    Options,
    no_failure_status,
    plural,
    write_json,
)
from .runner import Runner
from .runs import Committer, Explored, default_jobs, run_all
from .schedule_file import Section, read_schedule, schedule_digest
from .strategies import Planned, schedules, shard_of


def run_baseline(
    args: argparse.Namespace, runner: Runner, out: str, complain: Callable[[str], None]
) -> list[Section] | None:
    """The round-robin run, recorded in DIR/baseline.schedule: its
    recording, or None (said why) when it cannot run, fails or recorded no
    spawn. With --compare-output its stdout becomes the runner's reference."""
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
        return None
    baseline = read_schedule(base + ".schedule")
    if got.failed:
        complain(f"the baseline run (round-robin) fails: {got.text}; see {base}.err")
        return None
    if not baseline:
        complain(f"{args.command[0]} recorded no spawn: is it a libkbthreads program? (KB_RECORD={base}.schedule)")
        return None
    if args.strategy == "delay":
        # delays act on round-robin rounds: a spawn whose code chose its own
        # schedule ignores KB_SCHED_DELAYS, and no level would mean anything
        for i, s in enumerate(baseline, start=1):
            if s.schedule != "round-robin":
                complain(
                    f"--strategy delay: spawn {i} of {args.command[0]} runs the schedule its code chose "
                    f"({s.schedule}), not round-robin: it would ignore KB_SCHED_DELAYS"
                )
                return None
    if args.compare_output:
        with open(base + ".out", "rb") as f:
            runner.compare = f.read()
    return baseline


def plan_runs(args: argparse.Namespace, baseline: list[Section], complain: Callable[[str], None]) -> list[Planned]:
    """Every run of the exploration, by number ([] said why: --runs too
    small for exhaustive to try every order of one round)."""
    plan = schedules(args.strategy, args.runs, args.depth, baseline)
    if not plan:
        most = max(s.nprocs for s in baseline)
        complain(
            f"--strategy exhaustive: one round of {most} ranks has {math.factorial(most)} orders; "
            f"--runs {args.runs} cannot try them all (use --runs {math.factorial(most) - 1} or more)"
        )
    return plan


def result_json(
    args: argparse.Namespace, opts: Options, baseline: list[Section], plan: list[Planned], explored: Explored
) -> dict[str, Any]:
    """DIR/result.json's content (what merge reads back)."""
    failing = explored.failure
    recording = None
    if failing is not None:
        with open(failing.prefix + ".schedule", encoding="utf-8") as f:
            recording = f.read()
    return {
        "format": RESULT_FORMAT,
        "options": opts.to_json(),
        "cwd": os.getcwd(),
        "shard": list(args.shard) if args.shard else None,
        "baseline": {"schedule": schedule_digest(baseline), "line": baseline_line(baseline)},
        "planned": None if explored.delays else [p.number for p in plan],
        "stopped": explored.stopped,
        # --strategy delay: the levels (a shard's with the schedules it did not run, for merge)
        "delays": levels_json(explored.delays, explored.stopped, opts, bool(args.shard)) if explored.delays else None,
        "runs": [r.to_json() for r in explored.committed],
        "coverage": explored.coverage.to_json(),
        "failure": None if failing is None else dict(failing.to_json(), recording=recording),
    }


def say_shard(
    say: Callable[[str], None], args: argparse.Namespace, out: str, plan: list[Planned], explored: Explored
) -> int:
    """A shard's one line: it neither reports nor shrinks (merge does)."""
    failing = explored.failure
    k, n = args.shard
    what = (
        f"failure at run {failing.number} ({failing.outcome.text}), not shrunk: merge shrinks it"
        if failing
        else "no failure"
    )
    of = (
        f"of {len(plan)}"
        if explored.delays is None
        else f"(levels 1 to {len(explored.delays.levels)} of its part, numbered in its own order)"
    )
    say(
        f"shard {k}/{n}: tried {plural(len(explored.committed), 'run')} {of}, {what}; "
        f"result in {os.path.join(out, RESULT_FILE)}"
    )
    # whether the exploration covered its bound is merge's to say (status 3)
    return EXIT_FOUND if failing else EXIT_NONE_FOUND


def explore(args: argparse.Namespace, say: Callable[[str], None], complain: Callable[[str], None]) -> int:
    out = os.path.abspath(args.out)
    jobs = args.jobs or default_jobs()
    runner = Runner(args.command, args.timeout, None)
    baseline = run_baseline(args, runner, out, complain)
    if baseline is None:
        return EXIT_USAGE
    say(baseline_line(baseline))
    delay = args.strategy == "delay"
    plan = [] if delay else plan_runs(args, baseline, complain)
    if not plan and not delay:
        return EXIT_USAGE
    opts = Options(
        args.command,
        args.strategy,
        args.runs,
        args.depth,
        args.timeout,
        args.compare_output,
        args.until_stale,
        args.time_budget,
        args.delays if delay else None,
    )
    coverage = Coverage()
    coverage.add(0, schedule_digest(baseline), orders_of(baseline), is_run=False)
    if args.shard:
        plan = shard_of(plan, args.strategy, *args.shard)
    # A shard cannot know when the whole exploration goes stale: merge does.
    committer = Committer(coverage, None if args.shard else args.until_stale)
    deadline = time.monotonic() + args.time_budget if args.time_budget else None
    if delay:  # planned a level at a time, from the runs of the one before
        levels, stopped = run_levels(args, runner, out, baseline, jobs, deadline, committer)
        explored = Explored(committer.committed, coverage, stopped, levels)
    else:
        stopped = run_all(runner, out, plan, jobs, deadline, committer)
        explored = Explored(committer.committed, coverage, stopped)
    write_json(os.path.join(out, RESULT_FILE), result_json(args, opts, baseline, plan, explored))
    if args.shard:
        return say_shard(say, args, out, plan, explored)
    report(say, opts, explored)
    failing = explored.failure
    if failing is None:
        return no_failure_status(args.strategy, explored.stopped)
    return finish_failure(say, runner, out, failing, jobs, args.command, args.gdb)
