"""kbthreads-explore, end to end: the build tree's script (and python3 -m
kbthreads.explore) on the planted bugs of explore_target.c and
explore_target.py, at fixed seeds (run i uses seed i), so every result here
is deterministic.

Environment (set by tests/explore/CMakeLists.txt): KB_EXPLORE (the build
tree's kbthreads-explore), KB_EXPLORE_TARGET (explore_target),
KBTHREADS_LIBRARY (the library the Python target loads), KB_BINDING_DIR
(bindings/python, for python3 -m kbthreads.explore).
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys

import pytest

EXPLORE = os.environ["KB_EXPLORE"]
TARGET = os.environ["KB_EXPLORE_TARGET"]
PY_TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "explore_target.py")
BINDING = os.environ["KB_BINDING_DIR"]
PYTHON = sys.executable


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
    for option in ("--runs", "--strategy", "--depth", "--timeout", "--compare-output", "--out", "COMMAND"):
        assert option in r.stdout
    for word in ("pct", "seeded", "exhaustive", "exit status", "shrunk.schedule"):
        assert word in r.stdout
