# SPDX-License-Identifier: MIT
"""Context.reset(): a new simulation on a context that ran one. Two
identical simulations on one context, with a reset between them, give the
same trace; without it the second finds the first one's handles completed
and never waits for them (the engine is never asked)."""
import heapq

import pytest

import kbthreads


class ClockEngine:
    """Completes a handle at its simulated time: ("k", rank, step) after
    rank + step + 1 time units; records what it was asked, in order."""

    def __init__(self):
        self.now = 0
        self.trace = []

    def wait(self, h):
        _, r, step = h
        self.now = max(self.now, r + step + 1)
        self.trace.append((self.now, h))


STEPS = 3


def simulate(ctx):
    log = []

    def rank_main(r):
        for step in range(STEPS):
            log.append(("rank", r, "waits", step))
            ctx.wait(("k", r, step))  # the same handle names in every simulation
            kbthreads.yield_()

    ctx.engine = ClockEngine()  # the engine's own state is the engine's to reset
    ctx.multiprocessing.spawn(rank_main, nprocs=3)
    return log, ctx.engine.trace


def test_two_identical_simulations_on_one_context_give_the_same_trace_after_reset():
    ctx = kbthreads.Context()
    first = simulate(ctx)
    assert len(first[1]) == 3 * STEPS
    ctx.reset()
    assert simulate(ctx) == first
    ctx.close()


def test_without_reset_the_second_simulation_finds_the_first_ones_handles_completed():
    ctx = kbthreads.Context()
    simulate(ctx)
    log, engine_trace = simulate(ctx)
    assert engine_trace == []  # every wait took the fast path on the first run's completions
    ctx.close()


def test_reset_empties_the_completed_set_and_both_queues():
    ctx = kbthreads.Context()
    ctx._completed.add(("done", 1))
    ctx._pending_worker_waits.append(("w", 1))
    ctx.pending_collectives.append((("c", 1), 0, {"op": "sum"}))
    ctx.reset()
    assert list(ctx._completed) == [] and list(ctx._pending_worker_waits) == []
    assert list(ctx.pending_collectives) == [] and ctx._metas == {}
    ctx.close()


def test_reset_from_a_rank_is_refused():
    ctx = kbthreads.Context()
    errors = []

    def rank_main(r):
        try:
            ctx.reset()
        except kbthreads.KbError as e:
            errors.append(e.code)

    ctx.multiprocessing.spawn(rank_main, nprocs=1)
    assert errors == [kbthreads._loader.accel.KB_EPERM]
    ctx.close()


def test_reset_while_a_spawn_started_with_join_false_is_live_is_refused():
    ctx = kbthreads.Context()
    ctx._completed.add(("done", 1))
    with ctx.multiprocessing.spawn(lambda r: kbthreads.yield_(), nprocs=2, join=False):
        with pytest.raises(kbthreads.KbError) as e:
            ctx.reset()
        assert e.value.code == kbthreads._loader.accel.KB_EBUSY
    assert ("done", 1) in ctx._completed  # the refused reset changed nothing
    ctx.close()
