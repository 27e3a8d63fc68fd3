# SPDX-License-Identifier: MIT
"""Scenarios for tests/test_semantics_rounds.c (rules 1 and 2: binding, lazy
start, round order, finished ranks skipped). Run: /usr/bin/python3 sem_rounds.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (H, complete, do_spawn, enq, main, mark, plan_body,  # noqa: E402,F401
                        traced)


def s_bind_all_before_any_runs(ctx):
    plans = {0: [], 1: [], 2: []}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_lazy_start_sees_earlier_ranks(ctx):
    # rank 1 starts only after rank 0 yielded: it sees rank 0's completion
    plans = {0: [complete(ctx, "lz:1"), "y"], 1: [H("lz:1"), "y"], 2: [H("lz:1")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_round_order_uneven_lengths(ctx):
    plans = {0: ["y"], 1: ["y", "y", "y"], 2: [], 3: ["y", "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_finished_ranks_skipped(ctx):
    # rank 1 finishes in round 1: later rounds visit ranks 0 and 2 only;
    # a drain after each round shows where each round ends
    plans = {
        0: [enq(ctx, "r:0:0"), "y", enq(ctx, "r:0:1"), "y", enq(ctx, "r:0:2")],
        1: [enq(ctx, "r:1:0")],
        2: [enq(ctx, "r:2:0"), "y", enq(ctx, "r:2:1"), "y"],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_single_rank(ctx):
    plans = {0: ["y", "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


if __name__ == "__main__":
    main(sys.modules[__name__])
