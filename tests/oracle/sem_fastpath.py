# SPDX-License-Identifier: MIT
"""Scenarios for tests/test_semantics_fastpath.c (rule 4 and the driver-side
fast path ruling). Run: /usr/bin/python3 sem_fastpath.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (H, complete, do_spawn, driver_wait, enq, main, mark,  # noqa: E402,F401
                        plan_body, traced)
from fakectx import post_state  # noqa: E402


def s_rank_wait_on_completed_handle_keeps_baton(ctx):
    plans = {
        0: [complete(ctx, "f:1"), H("f:1"), H("f:1"), "y"],
        1: [H("f:1")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_rank_second_wait_after_drain_is_fast(ctx):
    plans = {0: [H("g:1"), H("g:1")], 1: ["y", H("g:1")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_driver_wait_on_completed_handle_skips_engine(ctx):
    ctx._completed.add(H("d:1"))
    driver_wait(ctx, "d:1")
    post_state(ctx, 0)


def s_driver_wait_pending_calls_engine_never_enqueues(ctx):
    driver_wait(ctx, "d:2", meta="md")
    post_state(ctx, 0)
    driver_wait(ctx, "d:2", meta="md")
    post_state(ctx, 0)


def s_driver_wait_from_engine_hook(ctx):
    ctx.engine.on_wait[H("a:1")] = lambda: driver_wait(ctx, "x:1")
    plans = {0: [enq(ctx, "a:1"), "y", H("x:1")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


if __name__ == "__main__":
    main(sys.modules[__name__])
