# SPDX-License-Identifier: MIT
"""merge: the shards' result files turned into the report one exploration
would have given."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable
from typing import Any

from .coverage import Coverage
from .levels import LevelsMergeError, merge_levels
from .report import finish_failure, report
from .results import EXIT_USAGE, MERGED_OPTIONS, RESULT_FILE, RESULT_FORMAT, Options, no_failure_status, prepare_out
from .runner import Runner
from .runs import Committer, Explored, RunResult, default_jobs


class MergeError(Exception):
    pass


def load_result(d: str) -> dict[str, Any]:
    path = os.path.join(d, RESULT_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise MergeError(
            f"{d}: no {RESULT_FILE} (not the --out directory of a kbthreads-explore --shard run)"
        ) from None
    except (OSError, ValueError) as e:
        raise MergeError(f"{path}: unreadable: {e}") from e
    if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
        raise MergeError(f"{path}: not a {RESULT_FORMAT} file")
    if not data.get("shard"):
        raise MergeError(f"{d}: not a shard's result (that exploration ran without --shard K/N)")
    return data


def option_text(name: str, value: Any) -> str:
    if name == "command":
        return shlex.join(value)
    if name == "compare_output":
        return "--compare-output" if value else "no --compare-output"
    return f"--{name.replace('_', '-')} {value if value is not None else '(none)'}"


def merge_results(dirs: list[str]) -> tuple[list[tuple[str, dict[str, Any]]], Options]:
    """The shards' results, checked to be the N shards of one exploration."""
    loaded = [(d, load_result(d)) for d in dirs]
    first_dir, first = loaded[0]
    n = first["shard"][1]
    seen: dict[int, str] = {}
    for d, r in loaded:
        k, rn = r["shard"]
        if rn != n:
            raise MergeError(
                f"{d} is shard {k}/{rn} and {first_dir} shard {first['shard'][0]}/{n}: "
                "shards of different --shard N do not merge"
            )
        for name in MERGED_OPTIONS:
            if r["options"].get(name) != first["options"].get(name):
                raise MergeError(
                    f"{d} was explored with other options than {first_dir}: "
                    f"{option_text(name, r['options'].get(name))}, not "
                    f"{option_text(name, first['options'].get(name))}"
                )
        if r["baseline"]["schedule"] != first["baseline"]["schedule"]:
            raise MergeError(
                f"{d}: its baseline ran another schedule than {first_dir}'s (is the program deterministic?)"
            )
        if k in seen:
            raise MergeError(f"shard {k}/{n} given twice: {seen[k]} and {d}")
        seen[k] = d
    missing = [k for k in range(1, n + 1) if k not in seen]
    if missing:
        raise MergeError(
            f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{k}/{n}' for k in missing)} "
            f"missing: merge needs all {n}"
        )
    o = first["options"]
    opts = Options(
        list(o["command"]),
        o["strategy"],
        o["runs"],
        o["depth"],
        o["timeout"],
        o["compare_output"],
        o["until_stale"],
        o.get("time_budget"),
        o.get("delays"),
    )
    return loaded, opts


def merge(args: argparse.Namespace, say: Callable[[str], None], complain: Callable[[str], None]) -> int:
    try:
        loaded, opts = merge_results(args.dirs)
    except MergeError as e:
        complain(str(e))
        return EXIT_USAGE
    results = [r for _, r in loaded]
    first = results[0]
    coverage = Coverage()
    coverage.add(0, first["baseline"]["schedule"], None, is_run=False)
    if opts.strategy == "delay":
        try:
            explored = merge_levels(loaded, opts, coverage)
        except LevelsMergeError as e:
            complain(str(e))
            return EXIT_USAGE
        say(first["baseline"]["line"])
        return finish(args, say, complain, opts, explored, first)
    say(first["baseline"]["line"])
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
    return finish(args, say, complain, opts, explored, first)


def finish(
    args: argparse.Namespace,
    say: Callable[[str], None],
    complain: Callable[[str], None],
    opts: Options,
    explored: Explored,
    first: dict[str, Any],
) -> int:
    """The merged exploration's report, then its failure shrunk."""
    report(say, opts, explored)
    failing = explored.failure
    if failing is None:
        return no_failure_status(opts.strategy, explored.stopped)
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
