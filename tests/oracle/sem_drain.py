# SPDX-License-Identifier: MIT
"""Scenarios for tests/test_semantics_drain.c (rules 2 and 3: one drain per
round, nprocs=0, phase (a) then (b), FIFO, duplicates, loop until empty).
Run: /usr/bin/python3 sem_drain.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_lib import (E, H, complete, do_spawn, enq, main, plan_body, submit,  # noqa: E402,F401
                        traced)
from fakectx import post_state, rec  # noqa: E402


def s_one_drain_after_every_round(ctx):
    plans = {
        0: [enq(ctx, "e:0:0"), "y", enq(ctx, "e:0:1"), "y", enq(ctx, "e:0:2")],
        1: [enq(ctx, "e:1:0"), "y", enq(ctx, "e:1:1")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_drain_after_last_round_collective(ctx):
    plans = {0: [submit(ctx, "c:last", 0, "m-last")], 1: []}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def _old_entries(ctx):
    ctx._pending_worker_waits.append(H("old:w"))
    ctx.distributed._backend._pending_collective_handles.append((H("old:c"), 7, "m-old"))


def s_nprocs0_no_round_no_drain_keeps_entries(ctx):
    _old_entries(ctx)
    do_spawn(ctx, traced(plan_body(ctx, {})), (), 0)


def s_old_entries_drained_after_next_spawns_first_round(ctx):
    _old_entries(ctx)
    do_spawn(ctx, traced(plan_body(ctx, {})), (), 0)
    do_spawn(ctx, traced(plan_body(ctx, {0: ["y"]})), (), 1)


def s_phase_a_fifo_not_sorted(ctx):
    plans = {0: [enq(ctx, "q:3"), enq(ctx, "q:1"), enq(ctx, "q:2"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_duplicate_waited_once(ctx):
    plans = {0: [enq(ctx, "d:1"), enq(ctx, "d:1"), "y"], 1: [H("d:1")], 2: [H("d:1")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 3)


def s_completed_handle_in_queue_not_waited(ctx):
    plans = {0: [complete(ctx, "c:1"), enq(ctx, "c:1"), enq(ctx, "n:1"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_phase_a_before_b_collective_queued_first(ctx):
    plans = {
        0: [submit(ctx, "c:1", 0, "m1"), enq(ctx, "w:0"), "y"],
        1: [H("w:1")],
    }
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_phase_b_fifo_with_meta(ctx):
    plans = {0: [submit(ctx, "c:2", 0, "m2"), submit(ctx, "c:1", 1, "m1"), submit(ctx, "c:3", 2, "m3"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_phase_b_fast_when_phase_a_completed_it(ctx):
    plans = {0: [submit(ctx, "x:1", 0, "mx"), "y"], 1: [H("x:1")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_loop_engine_enqueues_wait_in_phase_a(ctx):
    ctx.engine.on_wait[H("a:1")] = lambda: ctx._pending_worker_waits.append(H("a:2"))
    plans = {0: [enq(ctx, "a:1"), enq(ctx, "a:3"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_loop_engine_submits_collective_in_phase_a(ctx):
    be = ctx.distributed._backend
    ctx.engine.on_wait[H("a:1")] = lambda: be._pending_collective_handles.append((H("c:new"), 5, "m-new"))
    plans = {0: [submit(ctx, "c:old", 4, "m-old"), enq(ctx, "a:1"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_loop_engine_enqueues_wait_in_phase_b(ctx):
    ctx.engine.on_wait[H("c:1")] = lambda: ctx._pending_worker_waits.append(H("w:late"))
    plans = {0: [submit(ctx, "c:1", 0, "m1"), submit(ctx, "c:2", 1, "m2"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_loop_chain_until_both_empty(ctx):
    be = ctx.distributed._backend
    ctx.engine.on_wait[H("k:1")] = lambda: be._pending_collective_handles.append((H("k:2"), 1, "m2"))
    ctx.engine.on_wait[H("k:2")] = lambda: ctx._pending_worker_waits.append(H("k:3"))
    ctx.engine.on_wait[H("k:3")] = lambda: be._pending_collective_handles.append((H("k:4"), 2, "m4"))
    plans = {0: [enq(ctx, "k:1"), H("k:4"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_wait_completed_by_later_rank_same_round_not_waited(ctx):
    plans = {0: [H("s:1")], 1: [complete(ctx, "s:1"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_collective_already_completed_not_waited(ctx):
    plans = {0: [complete(ctx, "cc:1"), submit(ctx, "cc:1", 0, "mcc"), submit(ctx, "cc:2", 1, "mcc2"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_engine_completing_queued_handles_skips_them(ctx):
    def cb():
        ctx._completed.add(H("z:2"))
        rec("driver_wait", H("z:3"))
        ctx.wait(H("z:3"))

    ctx.engine.on_wait[H("z:1")] = cb
    plans = {0: [enq(ctx, "z:1"), enq(ctx, "z:2"), enq(ctx, "z:3"), enq(ctx, "z:4"), "y"]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 1)


def s_bind_hook_enqueued_work_drained_after_round_one(ctx):
    orig = ctx.distributed._bind_rank

    def bind(g, r):
        orig(g, r)
        ctx._pending_worker_waits.append(H(f"bind:{r}"))

    ctx.distributed._bind_rank = bind
    plans = {0: ["y"], 1: []}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


def s_abort_hook_enqueued_work_is_cleared(ctx):
    bar = ctx.distributed._backend._barrier
    orig = bar.reset

    def reset():
        orig()
        ctx._pending_worker_waits.append(H("abort:w"))
        ctx.distributed._backend._pending_collective_handles.append((H("abort:c"), 9, "ma"))

    bar.reset = reset
    plans = {0: ["y"], 1: [E(5)("r1 fails")]}
    do_spawn(ctx, traced(plan_body(ctx, plans)), (), 2)


if __name__ == "__main__":
    main(sys.modules[__name__])
