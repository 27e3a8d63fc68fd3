# SPDX-License-Identifier: MIT
"""kbthreads-explore --strategy delay, end to end, on delay_target.c (and
delay_target.py): every schedule with at most D delays, level by level,
each once; the guarantee it states; --jobs, --shard and merge; shrinking;
replaying through KB_SCHED_DELAYS and KB_REPLAY; the closed form of the
level counts that docs/scheduling.md gives ("Delays").

Environment (tests/explore/CMakeLists.txt): KB_EXPLORE, KB_TOOLS_DIR,
KB_EXPLORE_TARGET, KB_DELAY_TARGET, KBTHREADS_LIBRARY, KB_BINDING_DIR.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys

import pytest

EXPLORE = os.environ["KB_EXPLORE"]
TARGET = os.environ["KB_DELAY_TARGET"]
EXPLORE_TARGET = os.environ["KB_EXPLORE_TARGET"]
PY_TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay_target.py")
BINDING = os.environ["KB_BINDING_DIR"]
PYTHON = sys.executable

# delay_target bug: 3 ranks, 20 rounds, every rank live in each: 60 turns.
# The bug needs a delay at turn 10 (round 4's first: 1 2 0) and one at
# turn 50 (round 17's second: 0 2 1).
NPROCS, ROUNDS = 3, 20


def env_with_binding() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = BINDING + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name in ("KB_SCHED_SEED", "KB_SCHED_PCT", "KB_SCHED_EXHAUSTIVE", "KB_SCHED_DELAYS", "KB_REPLAY", "KB_RECORD"):
        env.pop(name, None)
    return env


def explore(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([EXPLORE] + list(args), capture_output=True, text=True, env=env_with_binding(),
                          timeout=timeout)


# ---- docs/scheduling.md's closed form -------------------------------------------------
def round_polynomial(m: int) -> list[int]:
    """The schedules of one round of m live ranks by their number of
    delays: the coefficients of (1)(1 + q)(1 + q + q^2)...(1 + ... + q^(m-1))."""
    p = [1]
    for j in range(1, m + 1):
        q = [0] * (len(p) + j - 1)
        for i, a in enumerate(p):
            for k in range(j):
                q[i + k] += a
        p = q
    return p


def level_counts(n: int, r: int, most: int) -> list[int]:
    """The schedules of n ranks and r rounds (no early exit) with 0, 1,
    ..., most delays: the coefficients of round_polynomial(n) ** r."""
    total = [1]
    one = round_polynomial(n)
    for _ in range(r):
        q = [0] * (len(total) + len(one) - 1)
        for i, a in enumerate(total):
            for k, b in enumerate(one):
                q[i + k] += a * b
        total = q
    return (total + [0] * (most + 1))[: most + 1]


def closed_form(n: int, r: int, level: int) -> int:
    """docs/scheduling.md's explicit counts of levels 1 to 3 (3: n >= 3)."""
    a1, a2, a3 = n - 1, (n - 2) * (n + 1) // 2, n * (n * n - 7) // 6
    return {1: r * a1,
            2: r * a2 + math.comb(r, 2) * a1 ** 2,
            3: r * a3 + r * (r - 1) * a1 * a2 + math.comb(r, 3) * a1 ** 3}[level]


@pytest.mark.parametrize("n,r", [(2, 5), (3, 4), (4, 2), (3, 20), (5, 7)])
def test_the_docs_explicit_counts_agree_with_the_product(n, r):
    counts = level_counts(n, r, 3)
    assert [closed_form(n, r, k) for k in (1, 2)] == counts[1:3]
    if n >= 3:
        assert closed_form(n, r, 3) == counts[3]


# ---- reading the report ---------------------------------------------------------------
def levels_run(stdout: str) -> list[tuple[int, int]]:
    """(ran, schedules) per level from 1, from "delays: runs per level: ..."."""
    m = re.search(r": delays: runs per level: level 0: 1 \(the baseline\)((?:, level \d+: \d+ of \d+)*)$", stdout,
                  re.M)
    assert m, stdout
    return [(int(a), int(b)) for a, b in re.findall(r"level \d+: (\d+) of (\d+)", m.group(1))]


def replay_env(stdout: str, variable: str) -> tuple[dict[str, str], list[str]]:
    m = re.search(r": replay: (%s=.*)$" % variable, stdout, re.M)
    assert m, stdout
    words = shlex.split(m.group(1))
    env = env_with_binding()
    env[variable] = words[0].split("=", 1)[1]
    return env, words[1:]


def replay(stdout: str, variable: str) -> subprocess.CompletedProcess:
    env, argv = replay_env(stdout, variable)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def normalized(stdout: str, *dirs) -> str:
    """Without the output directories and the run files' numbers (a shard
    numbers its runs in its own order)."""
    for d in sorted(map(str, dirs), key=len, reverse=True):
        stdout = stdout.replace(d, "DIR")
    return re.sub(r"runs/\d+\.", "runs/N.", stdout)


def result(d) -> dict:
    with open(os.path.join(d, "result.json"), encoding="utf-8") as f:
        return json.load(f)


# ---- the two-delay bug --------------------------------------------------------------------
def assert_found_at_level_2(r: subprocess.CompletedProcess, out=None) -> None:
    """The report (and, given its --out, the result file) of the bug found."""
    assert r.returncode == 1, r.stdout + r.stderr
    level1, level2 = closed_form(NPROCS, ROUNDS, 1), closed_form(NPROCS, ROUNDS, 2)
    assert level1 == ROUNDS * (NPROCS - 1) == 40
    # the failing schedule is the 250th of level 2 in delay order: after the
    # 222 whose first delay is before turn 10, and 27 of its own
    assert f": run {level1 + 250} (level 2, KB_SCHED_DELAYS=10,50) failed: exit status 1" in r.stdout, r.stdout
    assert levels_run(r.stdout) == [(level1, level1), (250, level2)]
    assert f": delays: every schedule with at most 1 delay was run: {1 + level1} of them, none failed" in r.stdout
    assert f": delays: level 2 stopped at the failure: 250 of its {level2} schedules were run" in r.stdout
    if out is not None:
        delays = result(out)["delays"]
        assert delays["complete"] == 1 and delays["complete_schedules"] == 1 + level1
        assert delays["guarantee"] == f"every schedule with at most 1 delay was run: {1 + level1} of them, none failed"
        assert delays["cut"] == {"level": 2, "ran": 250, "schedules": level2, "why": "stopped at the failure"}
    assert "shrunk in 1 replay: 2 of 20 rounds differ from round-robin" in r.stdout
    assert "  round 4: 1 2 0 (round-robin: 0 1 2)\n  round 17: 0 2 1 (round-robin: 0 1 2)\n" in r.stdout
    assert ": shrunk to 2 delays: turns 10, 50 (none can be dropped: every schedule with fewer delays passed)" \
        in r.stdout


def test_delay_finds_the_c_bug_at_level_2_after_every_one_delay_schedule_passed(tmp_path, capsys):
    r = explore("--strategy", "delay", "--runs", "1000", "--out", str(tmp_path / "delay"), "--", TARGET, "bug")
    assert_found_at_level_2(r, tmp_path / "delay")
    for variable in ("KB_SCHED_DELAYS", "KB_REPLAY"):
        replayed = replay(r.stdout, variable)
        assert replayed.returncode == 1, (variable, replayed.stdout, replayed.stderr)
        assert "stale snapshot" in replayed.stderr
    # PCT with the same budget of runs, for comparison (it gives no bound)
    budget = closed_form(NPROCS, ROUNDS, 1) + 250
    pct = explore("--strategy", "pct", "--runs", str(budget), "--out", str(tmp_path / "pct"), "--", TARGET, "bug")
    assert pct.returncode in (0, 1), pct.stdout + pct.stderr
    found = re.search(r": run (\d+) \(pct [^)]*\) failed", pct.stdout)
    with capsys.disabled():
        print(f"\ndelay: found at run {budget} (level 2: KB_SCHED_DELAYS=10,50), every schedule with at most "
              f"1 delay ({1 + closed_form(NPROCS, ROUNDS, 1)}) passed; pct --depth 3 with --runs {budget}: "
              + (f"found at run {found.group(1)}" if found else "not found"))


def test_delay_with_2_jobs_gives_the_report_of_1_job(tmp_path):
    one = explore("--strategy", "delay", "--runs", "1000", "--jobs", "1", "--out", str(tmp_path / "1"), "--", TARGET,
                  "bug")
    two = explore("--strategy", "delay", "--runs", "1000", "--jobs", "2", "--out", str(tmp_path / "2"), "--", TARGET,
                  "bug")
    assert_found_at_level_2(two, tmp_path / "2")
    assert normalized(one.stdout, tmp_path / "1") == normalized(two.stdout, tmp_path / "2")
    assert (tmp_path / "1" / "shrunk.schedule").read_text() == (tmp_path / "2" / "shrunk.schedule").read_text()


def explore_shards(tmp_path, *options: str, shards: int = 4, command=(TARGET, "bug")) -> list[str]:
    dirs = []
    for k in range(1, shards + 1):
        d = str(tmp_path / f"shard-{k}")
        r = explore(*options, "--shard", f"{k}/{shards}", "--out", d, "--", *command)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        assert f"shard {k}/{shards}: tried" in r.stdout
        dirs.append(d)
    return dirs


def test_four_delay_shards_merged_give_the_report_of_one_run(tmp_path):
    dirs = explore_shards(tmp_path, "--strategy", "delay", "--runs", "1000")
    merged = explore("merge", "--out", str(tmp_path / "merged"), *dirs)
    assert_found_at_level_2(merged)  # merge writes no result file
    one = explore("--strategy", "delay", "--runs", "1000", "--out", str(tmp_path / "one"), "--", TARGET, "bug")
    assert normalized(merged.stdout, tmp_path / "merged", *dirs) == normalized(one.stdout, tmp_path / "one")
    assert (tmp_path / "merged" / "shrunk.schedule").read_text() == (tmp_path / "one" / "shrunk.schedule").read_text()
    assert replay(merged.stdout, "KB_SCHED_DELAYS").returncode == 1


def test_the_shards_of_a_level_partition_it(tmp_path):
    dirs = explore_shards(tmp_path, "--strategy", "delay", "--runs", "1000", command=(TARGET, "ok"))
    for level in (1, 2):
        got = [tuple(map(tuple, run["delays"])) for d in dirs for run in result(d)["runs"] if run["level"] == level]
        assert len(got) == len(set(got)) == closed_form(NPROCS, ROUNDS, level)
        assert sum(result(d)["delays"]["levels"][level - 1]["schedules"] for d in dirs) == len(got)


@pytest.mark.parametrize("options, status", [
    pytest.param(("--runs", "100"), 3, id="cut-by-runs"),
    pytest.param(("--runs", "40"), 3, id="cut-at-a-level-boundary"),
    pytest.param(("--runs", "1000", "--delays", "1"), 0, id="complete"),
])
def test_delay_shards_merged_give_the_report_of_one_run_when_nothing_fails(tmp_path, options, status):
    dirs = explore_shards(tmp_path, "--strategy", "delay", *options, command=(TARGET, "ok"))
    merged = explore("merge", "--out", str(tmp_path / "merged"), *dirs)
    one = explore("--strategy", "delay", *options, "--out", str(tmp_path / "one"), "--", TARGET, "ok")
    assert merged.returncode == one.returncode == status, merged.stdout + merged.stderr + one.stdout + one.stderr
    assert normalized(merged.stdout, tmp_path / "merged", *dirs) == normalized(one.stdout, tmp_path / "one")


def test_delay_without_runs_covers_its_bound_and_finds_a_bug_past_100_runs(tmp_path):
    # The bug needs two delays: it is run 290, the 250th of level 2 (after
    # the 40 of level 1). A cap of 100 runs, the sampling strategies'
    # default, stopped before it and said "no failure" with exit status 0.
    r = explore("--strategy", "delay", "--out", str(tmp_path), "--", TARGET, "bug")
    assert_found_at_level_2(r, tmp_path)


def test_delay_cut_short_by_runs_before_the_bug_says_so_in_its_exit_status(tmp_path):
    r = explore("--strategy", "delay", "--runs", "100", "--out", str(tmp_path), "--", TARGET, "bug")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "incomplete: stopped before the bound it was asked to cover (exit status 3)" in r.stdout


def test_delay_finds_the_python_bug_at_level_2(tmp_path):
    r = explore("--strategy", "delay", "--runs", "1000", "--out", str(tmp_path), "--", PYTHON, PY_TARGET, "bug")
    assert_found_at_level_2(r, tmp_path)
    replayed = replay(r.stdout, "KB_SCHED_DELAYS")
    assert replayed.returncode == 1
    assert "stale snapshot" in replayed.stderr


# ---- what a level holds -----------------------------------------------------------------
@pytest.mark.parametrize("n,r", [(2, 5), (3, 4), (4, 2)])
def test_each_level_holds_the_closed_forms_count_of_distinct_schedules(tmp_path, n, r):
    r_ = explore("--strategy", "delay", "--delays", "3", "--runs", "100000", "--out", str(tmp_path), "--", TARGET,
                 "count", str(n), str(r))
    assert r_.returncode == 0, r_.stdout + r_.stderr
    want = level_counts(n, r, 4)
    assert levels_run(r_.stdout) == [(c, c) for c in want[1:4]]
    total = sum(want[:4])
    assert f"no failure: tried {total - 1} runs, {total} distinct schedules (the baseline's included)" in r_.stdout
    assert f": delays: every schedule with at most 3 delays was run: {total} of them, none failed" in r_.stdout
    if want[4]:
        assert f"were not tried (--delays 3): level 4 holds {want[4]} schedules" in r_.stdout


def test_levels_follow_each_runs_own_trace_and_end_when_no_schedule_is_left(tmp_path):
    # delay_target exits: which ranks run in rounds 2 and 3 depends on
    # round 1's order; 20 schedules, by delays 1, 4, 7, 6, 2
    # (docs/scheduling.md works them out).
    r = explore("--strategy", "delay", "--delays", "10", "--runs", "1000", "--out", str(tmp_path / "d"), "--", TARGET,
                "exits")
    assert r.returncode == 0, r.stdout + r.stderr
    assert levels_run(r.stdout) == [(4, 4), (7, 7), (6, 6), (2, 2), (0, 0)]
    assert ": delays: every schedule with at most 4 delays was run: 20 of them, none failed; that is every " \
        "schedule of the program (none has more than 4 delays)" in r.stdout
    assert result(tmp_path / "d")["delays"]["every_schedule"] is True
    # exhaustive, over every order of all three rounds, sees the same 20
    ex = explore("--strategy", "exhaustive", "--runs", "216", "--out", str(tmp_path / "e"), "--", TARGET, "exits")
    assert ex.returncode == 0, ex.stdout + ex.stderr
    assert "no failure: tried 215 runs, 20 distinct schedules" in ex.stdout


def test_a_complete_exploration_says_how_many_schedules_the_next_level_holds(tmp_path):
    r = explore("--strategy", "delay", "--runs", "1000", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 0, r.stdout + r.stderr
    want = level_counts(NPROCS, ROUNDS, 3)
    assert ": delays: every schedule with at most 2 delays was run: %d of them, none failed" % sum(want[:3]) in r.stdout
    assert ": delays: schedules with more than 2 delays were not tried (--delays 2): level 3 holds %d schedules" \
        % want[3] in r.stdout
    assert result(tmp_path)["delays"]["beyond"] == want[3] == closed_form(NPROCS, ROUNDS, 3)


def test_runs_cut_a_level_short_and_the_report_says_how_much_of_it_ran(tmp_path):
    r = explore("--strategy", "delay", "--runs", "100", "--out", str(tmp_path), "--", TARGET, "ok")
    assert r.returncode == 3, r.stdout + r.stderr  # no failure, but short of the bound
    assert "no failure: tried 100 runs, 101 distinct schedules (the baseline's included); " \
        "stopped after --runs 100 runs" in r.stdout
    assert ": delays: every schedule with at most 1 delay was run: 41 of them, none failed" in r.stdout
    assert ": delays: level 2 cut short by --runs 100: 60 of its 800 schedules were run" in r.stdout
    assert result(tmp_path)["delays"]["cut"] == {"level": 2, "ran": 60, "schedules": 800,
                                                 "why": "cut short by --runs 100"}


def test_a_time_budget_cuts_a_level_short_and_the_report_says_how_much_of_it_ran(tmp_path):
    # 200 rounds: 400 schedules of one delay, 80 000 of two
    r = explore("--strategy", "delay", "--runs", "100000", "--time-budget", "1", "--out", str(tmp_path), "--",
                TARGET, "count", "3", "200")
    assert r.returncode == 3, r.stdout + r.stderr  # no failure, but short of the bound
    m = re.search(r": delays: level (\d) cut short by the time budget \(1 s\): (\d+) of its (\d+) schedules were run",
                  r.stdout)
    assert m, r.stdout
    level, ran, schedules = map(int, m.groups())
    assert schedules == closed_form(3, 200, level) and ran < schedules
    assert f"every schedule with at most {plural_delays(level - 1)} was run" in r.stdout


def plural_delays(k: int) -> str:
    return f"{k} delay" + ("" if k == 1 else "s")


def test_delays_in_a_later_spawn_are_listed_after_a_slash(tmp_path):
    # explore_target spawn3: spawns of 3, 2 and 4 ranks; only the third has
    # the bug, which one delay shows
    r = explore("--strategy", "delay", "--runs", "1000", "--out", str(tmp_path), "--", EXPLORE_TARGET, "spawn3")
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r": run \d+ \(level 1, KB_SCHED_DELAYS=//\d+\) failed", r.stdout), r.stdout
    assert re.search(r": shrunk to 1 delay: spawn 3 turn \d+ ", r.stdout), r.stdout
    replayed = replay(r.stdout, "KB_SCHED_DELAYS")
    assert replayed.returncode == 1
    assert replayed.stdout.startswith("3 ranks: sum 60 (want 60)\n2 ranks: sum 30 (want 30)\n")


def test_the_debug_command_stops_at_the_first_delayed_turn(tmp_path):
    r = explore("--strategy", "delay", "--runs", "1000", "--out", str(tmp_path), "--", TARGET, "bug")
    assert r.returncode == 1, r.stdout + r.stderr
    m = re.search(r": debug: (gdb .*)$", r.stdout, re.M)
    assert m, r.stdout
    argv = shlex.split(m.group(1))
    at = argv.index("--args")
    argv = argv[:at] + ["-batch", "-ex", "kb ranks"] + argv[at:]
    out = subprocess.run(argv, capture_output=True, text=True, env=env_with_binding(), timeout=300).stdout
    # turn 10 is rank 0's, which the delay moves behind: rank 1 runs it
    assert "stopped at the start of turn 10 (spawn 1, round 4: rank 1), the first that differs" in out, out


# ---- bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("value,message", [
    ("0", "--delays: must be at least 1, not 0"),
    ("-1", "--delays: must be at least 1, not -1"),
    ("x", "--delays: not an integer: 'x'"),
    ("1.5", "--delays: not an integer: '1.5'"),
    ("", "--delays: not an integer: ''"),
])
def test_bad_delays_values_are_exit_2(value, message):
    r = explore("--strategy", "delay", "--delays", value, "--", TARGET, "ok")
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr


def test_delays_without_the_delay_strategy_is_exit_2():
    r = explore("--strategy", "pct", "--delays", "2", "--", TARGET, "ok")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--delays is for --strategy delay, not pct" in r.stderr


def test_a_program_that_chooses_its_own_schedule_is_exit_2(tmp_path):
    r = explore("--strategy", "delay", "--out", str(tmp_path), "--", TARGET, "coded")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--strategy delay: spawn 1 of %s runs the schedule its code chose (seeded 1), not round-robin: it would " \
        "ignore KB_SCHED_DELAYS" % TARGET in r.stderr


def test_a_bad_KB_SCHED_DELAYS_is_ignored_by_the_program_with_a_warning_that_says_why():
    env = dict(env_with_binding(), KB_SCHED_DELAYS="10,x")
    r = subprocess.run([TARGET, "bug"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr  # round-robin: the bug does not show
    assert "kbthreads: ignoring KB_SCHED_DELAYS=10,x ('x' at character 4 is not part of a turn number; want turn " \
        "numbers from 1 in ascending order" in r.stderr


def test_help_documents_the_delay_strategy():
    r = explore("--help")
    assert r.returncode == 0
    for word in ("delay", "--delays", "KB_SCHED_DELAYS"):
        assert word in r.stdout
