# SPDX-License-Identifier: MIT
"""Long schedules: a recording of 10^5 rounds of 64 ranks replays through
the library, and shrinking a failing schedule that long stays within the
explorer's replay bound (SHRINK_BUDGET).

Environment as for test_explore.py (tests/explore/CMakeLists.txt).
"""
from __future__ import annotations

import json
import os
import random
import subprocess

from explore_module import load_explore

EXPLORE = os.environ["KB_EXPLORE"]
TARGET = os.environ["KB_EXPLORE_TARGET"]
ROUNDS, RANKS = 100_000, 64



def test_a_recording_of_10_5_rounds_of_64_ranks_replays(tmp_path):
    # Every 1000th round in a shuffled order, the others in rank order.
    explore = load_explore()
    rng = random.Random(5)
    ranks = list(range(RANKS))
    orders = [rng.sample(ranks, RANKS) if r % 1000 == 0 else ranks for r in range(1, ROUNDS + 1)]
    lines = ["kbthreads-schedule 1", f"nprocs {RANKS}"]
    lines += [f"round {r} " + " ".join(map(str, order)) for r, order in enumerate(orders, 1)]
    recording = tmp_path / "long.schedule"
    recording.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, KB_REPLAY=str(recording), KB_RECORD=str(tmp_path / "again.schedule"))
    r = subprocess.run([TARGET, "long", str(ROUNDS)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == f"{RANKS} ranks, {ROUNDS} rounds: ok\n"
    [replayed] = explore.read_schedule(str(tmp_path / "again.schedule"))
    assert replayed.numbers == list(range(1, ROUNDS + 1))
    assert replayed.rounds == orders


class FakeRunner:
    """Stands for a 10^5-round, 64-rank program whose failure needs two
    rounds far apart in their recorded orders: reads the partial schedule
    each replay is given (through the explorer's reader) and writes the
    recording the program would."""

    NEEDED = (31_337, 77_777)  # round numbers

    def __init__(self, explore):
        self.explore = explore
        self.replays = 0

    def run(self, prefix, env, tag=0):
        self.replays += 1
        [partial] = self.explore.read_schedule(env["KB_REPLAY"])
        listed = {n: " ".join(map(str, order)) + "\n" for n, order in zip(partial.numbers, partial.rounds)}
        rank_order = " ".join(map(str, range(RANKS))) + "\n"
        with open(env["KB_RECORD"], "w") as f:
            f.write(f"kbthreads-schedule 1\nspawn 1\nnprocs {RANKS}\n")
            f.writelines(f"round {r} {listed.get(r, rank_order)}" for r in range(1, ROUNDS + 1))
        failing = all(r in listed for r in self.NEEDED)
        return self.outcome(1 if failing else 0)

    outcome = None  # set to the module's Outcome maker below


def test_shrinking_a_10_5_round_64_rank_schedule_stays_within_the_replay_bound(tmp_path):
    explore = load_explore()
    rng = random.Random(9)
    ranks = list(range(RANKS))
    orders = [rng.sample(ranks, RANKS) for _ in range(101)]  # none of them rank order
    original = [explore.Section(RANKS, [orders[r % 101] for r in range(ROUNDS)], "failed")]
    runner = FakeRunner(explore)
    runner.outcome = lambda code: explore.Outcome("exit", 1, "exit status 1") if code else explore.Outcome("ok", 0, "ok")
    result = explore.shrink(runner, str(tmp_path), original, explore.Outcome("exit", 1, "exit status 1"), jobs=1)
    assert result.reproduced
    assert runner.replays == result.replays <= explore.SHRINK_BUDGET
    assert explore.differing_rounds(result.recorded) == [(0, r - 1) for r in FakeRunner.NEEDED]


def test_coverage_of_many_runs_is_capped_and_merges_like_one_run():
    # 3000 runs of 3 rounds of 8 ranks (8! = 40320 orders a round): each
    # round index keeps ORDERS_CAP orders at most. Four shards' coverage,
    # merged up to run 2500, counts what one run's coverage counted then.
    explore = load_explore()
    rng = random.Random(3)
    ranks = list(range(8))
    runs = [(n, [[rng.sample(ranks, 8), sorted(ranks), rng.sample(ranks, 8) if n % 7 else sorted(ranks)]])
            for n in range(1, 3001)]
    one = explore.Coverage()
    for n, orders in runs[:2500]:
        one.add(n, str(n), orders)
    shards = [explore.Coverage() for _ in range(4)]
    for n, orders in runs:
        shards[n % 4].add(n, str(n), orders)
    merged = explore.Coverage()
    for shard in shards:
        merged.take_orders(json.loads(json.dumps(shard.to_json()))["orders"], 2500)
    assert one.rounds() == merged.rounds()
    assert [r["tried"] for r in one.rounds()] == [explore.ORDERS_CAP, 1, explore.ORDERS_CAP]
    assert [r["capped"] for r in one.rounds()] == [True, False, True]
