# SPDX-License-Identifier: MIT
"""Scenarios for tests/test_semantics_respawn.c (rule 9: a second spawn on
the same context). Run: /usr/bin/python3 sem_respawn.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (E, H, do_spawn, enq, main, mark, plan_body,  # noqa: E402,F401
                        submit, traced)


def s_second_spawn_renumbers_and_keeps_completed(ctx):
    do_spawn(ctx, traced(plan_body(ctx, {0: [H("k:1")], 1: ["y"]})), (), 2)
    do_spawn(ctx, traced(plan_body(ctx, {0: [H("k:1")], 1: ["y"], 2: [H("k:2")]})), (), 3)


def s_wait_discarded_by_failed_spawn_waited_again(ctx):
    plans1 = {0: [enq(ctx, "lost:1"), submit(ctx, "lostc:1", 0, "ml"), "y"], 1: [E(5)("first spawn fails")]}
    do_spawn(ctx, traced(plan_body(ctx, plans1)), (), 2)
    do_spawn(ctx, traced(plan_body(ctx, {0: [H("lost:1"), H("lostc:1")]})), (), 1)


def s_handle_failed_in_drain_waited_again(ctx):
    ctx.engine.fail_on[H("flaky:1")] = E(42)("engine says no")
    do_spawn(ctx, traced(plan_body(ctx, {0: [H("flaky:1")]})), (), 1)
    del ctx.engine.fail_on[H("flaky:1")]
    do_spawn(ctx, traced(plan_body(ctx, {0: [H("flaky:1")]})), (), 1)


if __name__ == "__main__":
    main(sys.modules[__name__])
