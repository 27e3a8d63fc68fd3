# SPDX-License-Identifier: MIT
"""kbthreads.barrier() follows kb_barrier's rule (docs/design.md, "Barrier"):
no rank returns from an opened barrier before the next round begins; in that
round every waiter returns at its turn, so the code after the barrier starts
in rank order, or in that round's order under a seeded schedule."""
import kbthreads
from kbthreads.explore import read_schedule


def run_plans(plans: dict[int, str], nprocs: int) -> list[str]:
    """Rank r runs plans[r]: 'y' yields, 'b' is a barrier; every step and
    barrier leaves a line, as in the C tests (tests/test_semantics_barrier.c)."""
    log: list[str] = []

    def fn(r: int) -> None:
        log.append(f"start {r}")
        try:
            for i, step in enumerate(plans.get(r, "")):
                log.append(f"step {r} {i}")
                if step == "y":
                    kbthreads.yield_()
                else:
                    log.append(f"bar_arrive {r}")
                    kbthreads.barrier()
                    log.append(f"bar_done {r}")
            log.append(f"end {r}")
        finally:
            log.append(f"finally {r}")

    kbthreads.spawn(fn, nprocs=nprocs)
    return log


# Round 2: rank 1 arrives last and opens the barrier; rank 3, after it in
# that round, stays. Round 3: ranks 0, 1, 3 leave in rank order. The second
# barrier opens when rank 1 finishes; the third at rank 3's arrival.
EXAMPLE_PLANS = {0: "bbb", 1: "ybyyy", 2: "", 3: "bbb"}
EXAMPLE = """\
start 0
step 0 0
bar_arrive 0
start 1
step 1 0
start 2
end 2
finally 2
start 3
step 3 0
bar_arrive 3
step 1 1
bar_arrive 1
bar_done 0
step 0 1
bar_arrive 0
bar_done 1
step 1 2
bar_done 3
step 3 1
bar_arrive 3
step 1 3
step 1 4
end 1
finally 1
bar_done 0
step 0 2
bar_arrive 0
bar_done 3
step 3 2
bar_arrive 3
bar_done 0
end 0
finally 0
bar_done 3
end 3
finally 3
""".splitlines()


def test_waiters_leave_in_rank_order_in_the_round_after_the_barrier_opens():
    assert run_plans(EXAMPLE_PLANS, 4) == EXAMPLE


def test_a_barrier_opened_by_a_finishing_rank_releases_the_waiters_in_the_next_round():
    # round 2: rank 1 finishes and opens the barrier; rank 2 stays a round
    assert run_plans({0: "b", 1: "y", 2: "b"}, 3) == [
        *("start 0", "step 0 0", "bar_arrive 0"),
        *("start 1", "step 1 0"),
        *("start 2", "step 2 0", "bar_arrive 2"),
        *("end 1", "finally 1"),
        *("bar_done 0", "end 0", "finally 0"),
        *("bar_done 2", "end 2", "finally 2"),
    ]


def recorded_rounds(path: str) -> list[list[int]]:
    """The orders of the one spawn KB_RECORD wrote to path."""
    [spawn] = read_schedule(path)
    return spawn.rounds


def test_under_a_seed_the_waiters_leave_in_the_next_rounds_order(tmp_path, monkeypatch):
    # Ranks 0, 2, 3 arrive in round 1, rank 1 in round 2; whichever ranks
    # come after rank 1 in round 2 stay, and all four leave in round 3 in
    # that round's order (KB_RECORD writes the orders the seed chose).
    plans = {0: "b", 1: "yb", 2: "b", 3: "b"}
    held = 0
    for seed in range(1, 7):
        record = str(tmp_path / f"seed{seed}.sched")
        monkeypatch.setenv("KB_SCHED_SEED", str(seed))
        monkeypatch.setenv("KB_RECORD", record)
        log = run_plans(plans, 4)
        rounds = recorded_rounds(record)
        assert len(rounds) == 3 and sorted(rounds[2]) == [0, 1, 2, 3]
        after_opening = log[log.index("bar_arrive 1") + 1 :]
        assert [int(ln.split()[1]) for ln in after_opening if ln.startswith("bar_done")] == rounds[2]
        assert not any(ln.startswith("bar_done") for ln in log[: log.index("bar_arrive 1")])
        held += rounds[1][-1] != 1
    assert held > 0
