# SPDX-License-Identifier: MIT
"""Base scenarios for tests/test_semantics_cancel.c. The cancel modes are C
only (the reference throws SystemExit); these give the rounds, the
cancellation order and the report those tests build on.
Run: /usr/bin/python3 sem_cancel.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (E, H, complete, do_spawn, main, mark, plan_body,  # noqa: E402,F401
                        traced, yield_convert)


def s_cancelled_while_yielding(ctx):
    # ranks 1 and 2 are suspended in a yield when rank 0 fails in round 2
    plans = {0: [complete(ctx, "done:1"), "y", E(5)("r0 fails in round 2")], 1: ["y"], 2: ["y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_cancelled_while_waiting(ctx):
    plans = {0: [H("pend:2")], 1: [E(5)("r1 fails")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_cancelled_rank_raising(ctx):
    plans = {0: ["y", E(5)("r0 fails")], 1: [yield_convert(ctx, 8, "r1 raised after its cancellation")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_cancelled_rank_never_returns_from_yield(ctx):
    plans = {0: ["y", E(5)("r0 fails")], 1: ["y", mark("r1 returned from its yield")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_raising_rank_cleanup(ctx):
    plans = {0: [complete(ctx, "done:1"), E(5)("r0 raises")], 1: ["y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


if __name__ == "__main__":
    main(sys.modules[__name__])
