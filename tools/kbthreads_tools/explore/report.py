# SPDX-License-Identifier: MIT
"""What an exploration prints: the summary, and the shrunk failure with the
commands that replay it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable

from .coverage import coverage_lines
from .delays import describe, env_value
from .gdb_script import gdb_command, is_script, write_gdb_script
from .levels import failing_level_note, level_lines
from .results import EXIT_CUT_SHORT, EXIT_FOUND, Options, cut_short, plural
from .runner import Runner
from .runs import Explored, RunResult
from .schedule_file import Section, differing_rounds, read_schedule
from .shrink import shrink, shrink_delays


def baseline_line(baseline: list[Section]) -> str:
    nrounds = sum(len(s.rounds) for s in baseline)
    ranks = "/".join(str(s.nprocs) for s in baseline)
    return f"baseline (round-robin): ok, {plural(len(baseline), 'spawn')}, {ranks} ranks, {plural(nrounds, 'round')}"


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
    elif explored.stopped == "runs":
        say(f"no failure: {tried}; stopped after --runs {opts.runs} runs")
    else:
        say(f"no failure: {tried}")
    if explored.delays is not None:
        for line in level_lines(explored.delays, explored.stopped, opts):
            say(line)
    for line in coverage_lines(cov):
        say(line)
    say(f"coverage: the last {plural(cov.stale, 'run')} in a row found no new schedule")
    if failing is None and cut_short(opts.strategy, explored.stopped):
        say(
            f"incomplete: stopped before the bound it was asked to cover (exit status {EXIT_CUT_SHORT}); "
            "without --runs, --time-budget and --until-stale it runs to the bound"
        )


def finish_failure(
    say: Callable[[str], None],
    runner: Runner,
    out: str,
    failing: RunResult,
    jobs: int,
    command: list[str],
    open_gdb: bool,
) -> int:
    """Shrink the failing run and print how to replay it, alone and in gdb."""
    original = os.path.join(out, "original.schedule")
    shutil.copyfile(failing.prefix + ".schedule", original)
    recorded = read_schedule(original)
    if not recorded or not any(s.rounds for s in recorded):
        say(f"the failing run recorded no round (it failed before its first); see {original}")
        return EXIT_FOUND
    if failing.delays is not None:
        result = shrink_delays(
            runner, out, recorded, failing.outcome, jobs, failing.delays, failing_level_note(failing)
        )
    else:
        result = shrink(runner, out, recorded, failing.outcome, jobs)
    if not result.reproduced:
        say(
            f"replaying the failing schedule did not fail the same way (is the program deterministic?); "
            f"{result.path} holds it unshrunk"
        )
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
    if result.delays is not None and failing.delays is not None:
        kept, was = len(result.delays), len(failing.delays)
        why = (
            "none can be dropped: every schedule with fewer delays passed"
            if kept == was
            else f"{plural(was - kept, 'delay')} of {was} dropped"
        )
        say(f"shrunk to {plural(kept, 'delay')}: {describe(result.delays, len(result.recorded) > 1)} ({why})")
    say(f"wrote {original} (the failing run's recording) and {result.path}")
    say(f"replay: KB_REPLAY={shlex.quote(result.path)} {shlex.join(command)}")
    if result.delays is not None:
        say(f"replay: KB_SCHED_DELAYS={shlex.quote(env_value(result.delays))} {shlex.join(command)}")
    script = os.path.join(out, "replay.gdb")
    if write_gdb_script(script, result.path, result.recorded):
        gdb = gdb_command(script, command)
        say(f"debug: {shlex.join(gdb)}")
        if is_script(gdb[gdb.index("--args") + 1]):
            say(
                f"  (gdb runs programs, not scripts: give {command[0]}'s interpreter by its path, "
                "e.g. -- /usr/bin/python3 prog.py)"
            )
        if open_gdb:
            sys.stdout.flush()
            subprocess.run(gdb, cwd=runner.cwd)
    return EXIT_FOUND
