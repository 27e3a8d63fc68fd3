# SPDX-License-Identifier: MIT
"""Scenarios for tests/test_semantics_failure.c (rule 5: a rank fails).
Run: /usr/bin/python3 sem_failure.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (E, H, complete, do_spawn, enq, main, mark, plan_body,  # noqa: E402,F401
                        submit, traced)


def s_own_cleanup_first_then_siblings_in_rank_order(ctx):
    plans = {r: ["y", "y", "y"] for r in range(4)}
    plans[2] = ["y", E(5)("r2 fails in round 2")]
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_rest_of_round_skipped(ctx):
    plans = {
        0: ["y", mark("r0 round2"), "y"],
        1: ["y", E(5)("r1 fails")],
        2: ["y", mark("r2 round2"), "y"],
        3: ["y", mark("r3 round2"), "y"],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_no_drain_after_failing_round(ctx):
    plans = {
        0: [enq(ctx, "q:0"), "y", H("q:0")],
        1: [H("w:1")],
        2: [E(5)("r2 fails before the drain")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_never_started_ranks_never_run(ctx):
    plans = {0: ["y"], 1: [E(5)("r1 fails at once")], 2: ["y"], 3: ["y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_finished_ranks_untouched(ctx):
    plans = {0: [], 1: ["y", E(5)("r1 fails")], 2: ["y"], 3: ["y", "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_abort_once_with_queues_full_then_cleared(ctx):
    plans = {
        0: [enq(ctx, "a:0"), submit(ctx, "c:0", 0, "m0"), "y"],
        1: [H("w:1")],
        2: [submit(ctx, "c:2", 1, "m2"), E(5)("r2 fails")],
        3: ["y"],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_completed_set_kept(ctx):
    plans = {
        0: [H("k:0"), "y", "y"],
        1: [complete(ctx, "k:1"), "y", E(5)("r1 fails in round 2")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_last_live_rank_fails(ctx):
    plans = {0: ["y", "y", E(5)("r0 fails alone")], 1: []}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_failure_while_siblings_in_collective(ctx):
    plans = {
        0: [lambda r: ctx.distributed.all_reduce("t3", 3, r + 1, "wait")],
        1: [lambda r: ctx.distributed.all_reduce("t3", 3, r + 1, "poll")],
        2: ["y", E(5)("r2 fails")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


if __name__ == "__main__":
    main(sys.modules[__name__])
