# SPDX-License-Identifier: MIT
"""Scenarios for tests/test_semantics_report.c (rules 6 and 7: root causes,
message, drain failure). Run: /usr/bin/python3 sem_report.py

Messages: the C library's text for a rank function that returned a nonzero
code without kb_fail/kb_raise is "rank function returned N"; scenarios that
model that raise E<N>("rank function returned N") so the normalised reference
message equals the C one."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (E, H, absorbing, do_spawn, enq, main, mark, plan_body,  # noqa: E402,F401
                        submit, traced, yield_absorb, yield_convert)
from fakectx import rec  # noqa: E402


def s_raise_records_code_and_message(ctx):
    plans = {0: ["y", "y"], 1: ["y", E(5)("boom five")], 2: ["y", "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_nonzero_return_recorded(ctx):
    plans = {0: ["y", "y"], 1: ["y", E(7)("rank function returned 7")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_cancelled_rank_converting_is_recorded_sorted_first_named(ctx):
    # rank 3 fails first; rank 1 turns its cancellation into E6: both are
    # root causes, the message lists [1, 3] and names rank 3
    plans = {
        0: ["y", "y"],
        1: ["y", yield_convert(ctx, 6, "r1 converted its cancellation")],
        2: ["y", "y"],
        3: ["y", E(5)("r3 fails")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_cancelled_rank_absorbing_not_recorded(ctx):
    plans = {0: ["y", E(5)("r0 fails")], 1: [yield_absorb(ctx), "y"], 2: ["y", "y"]}
    do_spawn(ctx, traced(absorbing(plan_body(ctx, plans))), (), 3)


def s_drain_failure_phase_a(ctx):
    ctx.engine.fail_on[H("h:bad")] = E(42)("engine says no")
    plans = {
        0: [H("ok:0"), "y"],
        1: [H("h:bad"), "y"],
        2: [enq(ctx, "later:2"), submit(ctx, "c:2", 0, "m2"), "y"],
        3: [],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 4)


def s_drain_failure_phase_b(ctx):
    ctx.engine.fail_on[H("c:bad")] = E(43)("engine says no")
    plans = {
        0: [submit(ctx, "c:ok", 0, "mok"), submit(ctx, "c:bad", 1, "mbad"), submit(ctx, "c:after", 2, "mafter"), "y"],
        1: [H("w:1"), "y"],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_drain_failure_in_last_round(ctx):
    ctx.engine.fail_on[H("h:bad")] = E(44)("engine says no")
    plans = {0: [enq(ctx, "h:bad")], 1: []}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


if __name__ == "__main__":
    main(sys.modules[__name__])
