# SPDX-License-Identifier: MIT
"""kbthreads-explore, end to end: the build tree's launcher (and python3 -m
kbthreads.explore) on the planted bugs of explore_target.c and
explore_target.py, at fixed seeds (run i uses seed i), so every result here
is deterministic.

Environment (set by tests/explore/CMakeLists.txt): KB_EXPLORE (the build
tree's kbthreads-explore), KB_TOOLS_DIR (tools/, where the explorer's package
is), KB_EXPLORE_TARGET (explore_target),
KBTHREADS_LIBRARY (the library the Python target loads), KB_BINDING_DIR
(bindings/python, for python3 -m kbthreads.explore).
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import types

import pytest

from explore_module import load_explore

EXPLORE = os.environ["KB_EXPLORE"]
TARGET = os.environ["KB_EXPLORE_TARGET"]
PY_TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "explore_target.py")
BINDING = os.environ["KB_BINDING_DIR"]
PYTHON = sys.executable



def rank_thread_name(rank: int) -> str:
    """A regex for the name gdb shows for rank's thread: kb-rank-<rank>, or,
    where the library names no thread (KB_PORTABLE=ON: kb_features() without
    KB_FEATURE_THREAD_NAMES, 0x2), whatever name the thread inherited."""
    if ctypes.CDLL(os.environ["KBTHREADS_LIBRARY"]).kb_features() & 0x2:
        return "kb-rank-%d" % rank
    return r'[^"\s]+'


def env_with_binding() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = BINDING + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def explore(*args: str, tool: list[str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        (tool or [EXPLORE]) + list(args), capture_output=True, text=True, env=env_with_binding(), timeout=timeout
    )


def replay_command(stdout: str) -> tuple[dict[str, str], list[str]]:
    """The printed "replay: KB_REPLAY=FILE COMMAND..." as (environment, argv)."""
    m = re.search(r": replay: (KB_REPLAY=.*)$", stdout, re.M)
    assert m, stdout
    words = shlex.split(m.group(1))
    env = env_with_binding()
    env["KB_REPLAY"] = words[0].split("=", 1)[1]
    return env, words[1:]


def run_replay(stdout: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env, argv = replay_command(stdout)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)


def rounds_differing(stdout: str) -> int:
    m = re.search(r"shrunk in \d+ replays?: (\d+) of \d+ rounds? differs? from round-robin", stdout)
    assert m, stdout
    return int(m.group(1))


def assert_dead(pidfile: str) -> None:
    with open(pidfile) as f:
        pids = [int(line) for line in f if line.strip()]
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# ---- the planted order bug ---------------------------------------------------------
def test_pct_finds_the_c_order_bug_and_shrinks_it_to_one_round(tmp_path):
    r = explore("--runs", "20", "--out", str(tmp_path), "--", TARGET, "bug")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "failed: exit status 1" in r.stdout
    assert re.search(r"tried \d+ runs?, \d+ distinct schedules? \(the baseline's included\)", r.stdout)
    assert 1 <= rounds_differing(r.stdout) <= 2
    for name in ("original.schedule", "shrunk.schedule", "baseline.out", "runs/0001.out", "runs/0001.schedule"):
        assert (tmp_path / name).exists(), name
    replayed = run_replay(r.stdout)
    assert replayed.returncode == 1
    assert "wrong result" in replayed.stderr


def test_the_bug_free_c_program_passes_every_run(tmp_path):
    r = explore("--runs", "15", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no failure: tried 15 runs" in r.stdout


def test_pct_finds_the_python_order_bug(tmp_path):
    r = explore("--runs", "20", "--out", str(tmp_path), "--", PYTHON, PY_TARGET, "bug")
    assert r.returncode == 1, r.stdout + r.stderr
    assert 1 <= rounds_differing(r.stdout) <= 2
    replayed = run_replay(r.stdout)
    assert replayed.returncode == 1
    assert "wrong result" in replayed.stderr


def test_the_bug_free_python_program_passes_every_run(tmp_path):
    r = explore("--runs", "8", "--out", str(tmp_path), "--", PYTHON, PY_TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr


def test_python3_m_kbthreads_explore_is_the_same_tool(tmp_path):
    tool = [PYTHON, "-m", "kbthreads.explore"]
    r = explore("--runs", "20", "--out", str(tmp_path), "--", TARGET, "bug", tool=tool)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("python3 -m kbthreads.explore: baseline (round-robin): ok")
    assert run_replay(r.stdout).returncode == 1


def test_python3_m_kbthreads_tools_explore_is_the_same_tool(tmp_path):
    tool = [PYTHON, "-m", "kbthreads_tools.explore"]
    env = env_with_binding()
    env["PYTHONPATH"] = os.environ["KB_TOOLS_DIR"]
    r = subprocess.run(tool + ["--runs", "20", "--out", str(tmp_path), "--", TARGET, "bug"], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("python3 -m kbthreads_tools.explore: baseline (round-robin): ok")
    assert run_replay(r.stdout).returncode == 1


@pytest.mark.parametrize("strategy", ["seeded", "exhaustive"])
def test_the_other_strategies_find_the_c_order_bug(tmp_path, strategy):
    # Without yields the sum is taken in round 1, which exhaustive covers
    # within 30 runs (its 24 orders).
    r = explore("--strategy", strategy, "--runs", "30", "--out", str(tmp_path), "--", TARGET, "bug", "0")
    assert r.returncode == 1, r.stdout + r.stderr
    assert 1 <= rounds_differing(r.stdout) <= 2
    assert run_replay(r.stdout).returncode == 1


def test_exhaustive_tries_every_order_of_the_first_round_then_stops(tmp_path):
    # 4 ranks: 24 orders of round 1 fit in 30 runs, 24^2 do not: 23 runs
    # besides the baseline, every one a distinct schedule.
    r = explore("--strategy", "exhaustive", "--runs", "30", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no failure: tried 23 runs, 24 distinct schedules" in r.stdout


def recorded(explore_module: types.ModuleType, tmp_path: pathlib.Path, index: int, limit: int):
    """The recording of `explore_target ok` (4 ranks, 4 rounds) under
    KB_SCHED_EXHAUSTIVE=index:limit."""
    record = str(tmp_path / f"{index}-{limit}.schedule")
    env = dict(os.environ, KB_SCHED_EXHAUSTIVE=f"{index}:{limit}", KB_RECORD=record)
    r = subprocess.run([TARGET, "ok"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    [spawn] = explore_module.read_schedule(record)
    return spawn


# The explorer plans exhaustive runs from its baseline, recorded under
# KB_SCHED_EXHAUSTIVE=0:limit: the library's "schedule" line says how many
# rounds k it enumerates, (4!)^k schedules of 4 ranks (exhaustive_count).
# At limit 575 that is one round, at 576 two.
EXHAUSTIVE_LIMITS = [(575, 24), (576, 24 * 24)]


@pytest.mark.parametrize("limit,count", EXHAUSTIVE_LIMITS)
def test_the_exhaustive_count_is_read_from_the_librarys_recording(tmp_path: pathlib.Path, limit: int,
                                                                  count: int) -> None:
    explore_module = load_explore()
    assert explore_module.exhaustive_count(recorded(explore_module, tmp_path, 0, limit)) == count


@pytest.mark.parametrize("limit,count", EXHAUSTIVE_LIMITS)
def test_the_last_exhaustive_index_changes_exactly_the_rounds_the_count_covers(tmp_path: pathlib.Path, limit: int,
                                                                               count: int) -> None:
    explore_module = load_explore()
    k = round(math.log(count, 24))
    last = recorded(explore_module, tmp_path, count - 1, limit).rounds
    assert [r != sorted(r) for r in last[: k + 1]] == [True] * k + [False]


@pytest.mark.parametrize("limit,count", EXHAUSTIVE_LIMITS)
def test_the_exhaustive_index_count_wraps_to_round_robin(tmp_path: pathlib.Path, limit: int, count: int) -> None:
    # the library takes the index modulo its own count
    explore_module = load_explore()
    wrapped = recorded(explore_module, tmp_path, count, limit).rounds
    assert wrapped == recorded(explore_module, tmp_path, 0, limit).rounds


def test_the_exhaustive_baseline_index_0_is_round_robin(tmp_path: pathlib.Path) -> None:
    explore_module = load_explore()
    assert all(r == sorted(r) for r in recorded(explore_module, tmp_path, 0, 576).rounds)


# ---- crashes, hangs, several spawns, output ------------------------------------------
def test_a_hang_is_killed_reported_and_replayable(tmp_path):
    pidfile = tmp_path / "pids"
    os.environ["EXPLORE_PIDFILE"] = str(pidfile)
    try:
        r = explore("--runs", "20", "--timeout", "3", "--out", str(tmp_path / "o"), "--", TARGET, "hang")
    finally:
        del os.environ["EXPLORE_PIDFILE"]
    assert r.returncode == 1, r.stdout + r.stderr
    assert "failed: hang: killed after 3 s" in r.stdout
    assert 1 <= rounds_differing(r.stdout) <= 2
    assert_dead(str(pidfile))
    # The original recording of the killed run holds the rounds it began.
    assert "round 1 " in (tmp_path / "o" / "original.schedule").read_text()
    env, argv = replay_command(r.stdout)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_crash_is_reported_with_its_signal_and_replayable(tmp_path):
    r = explore("--runs", "20", "--out", str(tmp_path), "--", TARGET, "crash")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "failed: killed by SIGSEGV" in r.stdout
    assert 1 <= rounds_differing(r.stdout) <= 2
    assert run_replay(r.stdout).returncode == -signal.SIGSEGV


def test_every_spawn_of_a_three_spawn_program_is_recorded_and_replayed(tmp_path):
    r = explore("--runs", "30", "--out", str(tmp_path), "--", TARGET, "spawn3")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "baseline (round-robin): ok, 3 spawns, 3/2/4 ranks" in r.stdout
    assert re.search(r"^  spawn 3 round \d+: ", r.stdout, re.M), r.stdout
    assert not re.search(r"^  spawn [12] round", r.stdout, re.M), r.stdout
    assert (tmp_path / "original.schedule").read_text().count("kbthreads-schedule 1\n") == 3
    replayed = run_replay(r.stdout)
    assert replayed.returncode == 1
    assert replayed.stdout.startswith("3 ranks: sum 60 (want 60)\n2 ranks: sum 30 (want 30)\n")


def test_compare_output_fails_a_run_that_prints_something_else(tmp_path):
    plain = explore("--runs", "5", "--out", str(tmp_path / "a"), "--", TARGET, "output")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    r = explore("--compare-output", "--runs", "5", "--out", str(tmp_path / "b"), "--", TARGET, "output")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "failed: output differs from the baseline's" in r.stdout
    assert rounds_differing(r.stdout) == 1
    baseline = (tmp_path / "b" / "baseline.out").read_text()
    assert run_replay(r.stdout).stdout != baseline


# ---- bad input: a clear message and exit 2 ----------------------------------------------
def usage_error(*args: str, out=None) -> str:
    r = explore(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip(), "no message"
    return r.stderr + r.stdout


def test_no_command_is_a_usage_error():
    assert "no COMMAND given" in usage_error("--runs", "3")
    assert "no COMMAND given" in usage_error("--runs", "3", "--")


def test_a_command_that_does_not_exist_is_exit_2(tmp_path):
    assert "cannot run the command: /nonexistent/prog: no such file" in usage_error(
        "--out", str(tmp_path), "--", "/nonexistent/prog"
    )
    assert "command not found" in usage_error("--out", str(tmp_path), "--", "kb-no-such-command")


def test_a_failing_baseline_is_exit_2(tmp_path):
    pidfile = tmp_path / "pids"
    r = subprocess.run([EXPLORE, "--out", str(tmp_path / "o"), "--", TARGET, "fail"], capture_output=True, text=True,
                       env=dict(env_with_binding(), EXPLORE_PIDFILE=str(pidfile)))
    assert r.returncode == 2
    assert "the baseline run (round-robin) fails: exit status 3" in r.stderr
    assert_dead(str(pidfile))
    assert not (tmp_path / "o" / "runs" / "0001.out").exists()


def test_bad_option_values_are_exit_2(tmp_path):
    assert "--runs: must be at least 1, not 0" in usage_error("--runs", "0", "--", TARGET, "ok")
    assert "invalid choice: 'dfs'" in usage_error("--strategy", "dfs", "--", TARGET, "ok")
    assert "--depth: must be at least 1, not 0" in usage_error("--depth", "0", "--", TARGET, "ok")
    assert "--timeout: must be more than 0" in usage_error("--timeout", "0", "--", TARGET, "ok")


def test_an_unwritable_out_dir_is_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert f"cannot write to --out {blocker}/dir" in usage_error("--out", str(blocker / "dir"), "--", TARGET, "ok")


def test_exhaustive_with_too_few_runs_for_one_round_is_exit_2(tmp_path):
    assert "use --runs 23 or more" in usage_error("--strategy", "exhaustive", "--runs", "5", "--out", str(tmp_path),
                                                  "--", TARGET, "ok")


def test_help_documents_every_option():
    r = explore("--help")
    assert r.returncode == 0
    for option in ("--runs", "--strategy", "--depth", "--timeout", "--compare-output", "--out", "COMMAND", "--jobs",
                   "--shard", "--until-stale", "--time-budget", "--gdb", "merge"):
        assert option in r.stdout
    for word in ("pct", "seeded", "exhaustive", "exit status", "shrunk.schedule", "result.json", "replay.gdb"):
        assert word in r.stdout


# ---- --jobs: the outcome does not depend on it ----------------------------------------------
def normalized(stdout: str, *dirs) -> str:
    for d in dirs:
        stdout = stdout.replace(str(d), "DIR")
    return stdout


@pytest.mark.parametrize("command", [
    pytest.param([TARGET, "late"], id="c-late"),
    pytest.param([TARGET, "crash"], id="c-crash"),
    pytest.param([PYTHON, PY_TARGET, "late"], id="python-late"),
    pytest.param([PYTHON, PY_TARGET, "bug"], id="python-bug"),
])
def test_jobs_2_reports_the_same_failure_and_shrunk_schedule_as_jobs_1(tmp_path, command):
    one = explore("--strategy", "seeded", "--runs", "40", "--jobs", "1", "--out", str(tmp_path / "1"), "--", *command)
    two = explore("--strategy", "seeded", "--runs", "40", "--jobs", "2", "--out", str(tmp_path / "2"), "--", *command)
    assert one.returncode == two.returncode == 1, one.stdout + one.stderr + two.stdout + two.stderr
    assert normalized(one.stdout, tmp_path / "1") == normalized(two.stdout, tmp_path / "2")
    assert (tmp_path / "1" / "shrunk.schedule").read_text() == (tmp_path / "2" / "shrunk.schedule").read_text()


def test_runs_above_the_reported_failure_leave_no_files(tmp_path):
    # seeded: run 23 is the first to fail; with 4 jobs, runs up to 26 may
    # have started, and are killed and removed.
    r = explore("--strategy", "seeded", "--runs", "40", "--jobs", "4", "--out", str(tmp_path), "--", TARGET, "late")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "run 23 (seeded seed 23) failed" in r.stdout
    assert sorted(os.listdir(tmp_path / "runs"))[-1] == "0023.schedule"


# ---- --shard K/N and merge -------------------------------------------------------------------
def explore_sharded(tmp_path, *options: str, shards: int = 4) -> list[str]:
    dirs = []
    for k in range(1, shards + 1):
        d = str(tmp_path / f"shard-{k}")
        r = explore(*options, "--shard", f"{k}/{shards}", "--out", d, "--", TARGET, "late")
        assert r.returncode in (0, 1), r.stdout + r.stderr
        assert f"shard {k}/{shards}: tried" in r.stdout
        dirs.append(d)
    return dirs


@pytest.mark.parametrize("options", [
    pytest.param(("--strategy", "pct", "--runs", "30"), id="pct-failing"),
    pytest.param(("--strategy", "exhaustive", "--runs", "30"), id="exhaustive-failing"),
    pytest.param(("--strategy", "pct", "--runs", "12"), id="pct-passing"),
    pytest.param(("--strategy", "seeded", "--runs", "60", "--until-stale", "4"), id="seeded-until-stale"),
])
def test_four_shards_merged_give_the_report_of_one_run(tmp_path, options):
    dirs = explore_sharded(tmp_path, *options)
    merged = explore("merge", "--out", str(tmp_path / "merged"), *dirs)
    one = explore(*options, "--out", str(tmp_path / "one"), "--", TARGET, "late")
    assert merged.returncode == one.returncode, merged.stdout + merged.stderr
    assert normalized(merged.stdout, tmp_path / "merged", *dirs) == normalized(one.stdout, tmp_path / "one")
    if one.returncode == 1:
        assert (tmp_path / "merged" / "shrunk.schedule").read_text() == (tmp_path / "one" / "shrunk.schedule").read_text()
        assert run_replay(merged.stdout).returncode == 1


def test_a_shard_takes_every_nth_run_and_writes_its_result_file(tmp_path):
    r = explore("--strategy", "seeded", "--runs", "10", "--shard", "2/4", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["format"] == "kbthreads-explore-result 1"
    assert result["shard"] == [2, 4]
    assert [run["run"] for run in result["runs"]] == [2, 6, 10]
    assert [run["outcome"]["kind"] for run in result["runs"]] == ["ok"] * 3
    assert result["coverage"]["distinct_schedules"] == 4
    assert result["failure"] is None
    assert not (tmp_path / "shrunk.schedule").exists()


def test_a_failing_shard_stores_the_failing_recording_and_does_not_shrink(tmp_path):
    r = explore("--strategy", "seeded", "--runs", "40", "--shard", "3/4", "--out", str(tmp_path), "--", TARGET, "late")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "failure at run 23 (exit status 1), not shrunk" in r.stdout
    failure = json.loads((tmp_path / "result.json").read_text())["failure"]
    assert failure["run"] == 23
    assert failure["recording"] == (tmp_path / "runs" / "0023.schedule").read_text()
    assert not (tmp_path / "shrink").exists() or not os.listdir(tmp_path / "shrink")


def test_bad_shards_are_exit_2(tmp_path):
    assert "--shard: 0/4: shard K must be 1 to 4" in usage_error("--shard", "0/4", "--", TARGET, "ok")
    assert "--shard: 5/4: shard K must be 1 to 4" in usage_error("--shard", "5/4", "--", TARGET, "ok")
    assert "not K/N" in usage_error("--shard", "2", "--", TARGET, "ok")
    assert "--gdb with --shard" in usage_error("--gdb", "--shard", "1/2", "--", TARGET, "ok")


def test_merging_shards_that_do_not_belong_together_is_exit_2(tmp_path):
    dirs = explore_sharded(tmp_path / "a", "--strategy", "pct", "--runs", "8")
    other = explore_sharded(tmp_path / "b", "--strategy", "pct", "--runs", "9")
    assert "explored with other options than" in usage_error("merge", *dirs[:3], other[3])
    assert "--runs 9, not --runs 8" in usage_error("merge", *dirs[:3], other[3])
    assert "shard 4/4 missing: merge needs all 4" in usage_error("merge", *dirs[:3])
    assert "shard 2/4 given twice" in usage_error("merge", dirs[0], dirs[1], dirs[1], dirs[3])
    halves = explore_sharded(tmp_path / "c", "--strategy", "pct", "--runs", "8", shards=2)
    assert "shards of different --shard N" in usage_error("merge", *dirs[:2], halves[0])
    assert "no result.json" in usage_error("merge", str(tmp_path))
    unsharded = tmp_path / "whole"
    explore("--runs", "2", "--out", str(unsharded), "--", TARGET, "ok")
    assert "not a shard's result" in usage_error("merge", str(unsharded))
    assert "no SHARD_DIR given" in usage_error("merge")


# ---- coverage, --until-stale, --time-budget ------------------------------------------------
def test_the_report_counts_orders_tried_per_round_and_runs_without_anything_new(tmp_path):
    r = explore("--strategy", "exhaustive", "--runs", "30", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "coverage: orders tried per round (of those that exist): round 1 24/24, round 2 1/24, " \
        "round 3 1/24, round 4 1/24" in r.stdout
    assert "coverage: the last 0 runs in a row found no new schedule" in r.stdout
    coverage = json.loads((tmp_path / "result.json").read_text())["coverage"]
    assert coverage["distinct_schedules"] == 24
    assert coverage["rounds"][0] == {"spawn": 1, "round": 1, "tried": 24, "exist": 24, "capped": False}


def test_until_stale_stops_after_m_runs_in_a_row_without_a_new_schedule(tmp_path):
    # One round of 4 ranks (no yields): 24 schedules, so seeded runs soon
    # repeat themselves.
    r = explore("--strategy", "seeded", "--runs", "1000", "--until-stale", "10", "--out", str(tmp_path), "--",
                TARGET, "ok", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stopped: 10 runs in a row found no new schedule (--until-stale)" in r.stdout
    assert "coverage: the last 10 runs in a row found no new schedule" in r.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["stopped"] == "stale" and len(result["runs"]) < 1000


def test_time_budget_stops_cleanly_with_a_report(tmp_path):
    r = explore("--runs", "100000", "--time-budget", "1", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr  # pct draws samples: no bound to fall short of
    assert "stopped at the time budget (1 s)" in r.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["stopped"] == "time"
    assert [run["run"] for run in result["runs"]] == list(range(1, len(result["runs"]) + 1))


def test_an_exhaustive_exploration_cut_short_by_its_time_budget_exits_3(tmp_path):
    # 23 indices to cover; the budget ends before the first run can start
    r = explore("--strategy", "exhaustive", "--runs", "30", "--time-budget", "0.001", "--out", str(tmp_path), "--",
                TARGET, "ok")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "incomplete: stopped before the bound it was asked to cover (exit status 3)" in r.stdout


def test_bad_new_option_values_are_exit_2():
    assert "--jobs: must be at least 1, not 0" in usage_error("--jobs", "0", "--", TARGET, "ok")
    assert "--until-stale: must be at least 1, not 0" in usage_error("--until-stale", "0", "--", TARGET, "ok")
    assert "--time-budget: must be more than 0" in usage_error("--time-budget", "-1", "--", TARGET, "ok")


# ---- gdb --------------------------------------------------------------------------------------
def debug_command(stdout: str) -> list[str]:
    m = re.search(r": debug: (gdb .*)$", stdout, re.M)
    assert m, stdout
    return shlex.split(m.group(1))


def gdb_batch(stdout: str, *commands: str) -> str:
    argv = debug_command(stdout)
    at = argv.index("--args")  # after -x replay.gdb, which runs to the stop
    argv = argv[:at] + ["-batch"] + [x for c in commands for x in ("-ex", c)] + argv[at:]
    return subprocess.run(argv, capture_output=True, text=True, env=env_with_binding(), timeout=300).stdout


def test_the_debug_command_stops_the_c_replay_at_its_first_turn_out_of_rank_order(tmp_path):
    r = explore("--runs", "20", "--out", str(tmp_path), "--", TARGET, "bug")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "  round 4: 0 3 1 2 (round-robin: 0 1 2 3)" in r.stdout
    out = gdb_batch(r.stdout, "kb ranks", "bt")
    assert "stopped at the start of turn 14 (spawn 1, round 4: rank 3), the first that differs" in out, out
    # without debug info gdb reads the internal name's "__" as GNAT's dot: kb.turn_begin
    hit = re.search(r'Thread (\d+) "%s" hit Breakpoint \d+, .*kb(__|\.)turn_begin' % rank_thread_name(3), out)
    assert hit, out
    row = re.search(r"^ \*     3 +(\d+) +\d+ +%s +running$" % rank_thread_name(3), out, re.M)
    assert row and row.group(1) == hit.group(1), out  # rank 3's thread is the one stopped
    assert re.search(r"^       0 .* finished$", out, re.M), out
    assert re.search(r"^#\d+ .* in rank_main ", out, re.M), out


@pytest.mark.skipif(not os.path.exists("/usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py"),
                    reason="python3-dbg (py-bt) not installed")
def test_gdb_opens_the_python_replay_with_py_bt_at_the_first_turn_out_of_rank_order(tmp_path):
    # --gdb runs gdb on the terminal: here its commands come from stdin.
    r = subprocess.run([EXPLORE, "--gdb", "--runs", "20", "--out", str(tmp_path), "--", "/usr/bin/python3", PY_TARGET,
                        "bug"], input="kb ranks\npy-bt\n", capture_output=True, text=True, env=env_with_binding(),
                       timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stopped at the start of turn 14 (spawn 1, round 4: rank 3)" in r.stdout, r.stdout + r.stderr
    assert re.search(r"^ \*     3 +\d+ +\d+ +%s +running$" % rank_thread_name(3), r.stdout, re.M), r.stdout
    assert re.search(r'File ".*explore_target.py", line \d+, in rank_main', r.stdout), r.stdout


def test_a_script_given_as_the_command_gets_a_note_for_gdb(tmp_path):
    script = tmp_path / "run-target"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(TARGET)} bug\n")
    script.chmod(0o755)
    r = explore("--runs", "20", "--out", str(tmp_path / "o"), "--", str(script))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "gdb runs programs, not scripts" in r.stdout
