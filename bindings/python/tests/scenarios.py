# SPDX-License-Identifier: MIT
"""Rank programs in the style of the reference oracle's scenarios.

Each s_<name>(ctx, T) runs one program: T is either tests/kbfake.py (the
programs run by kbthreads) or the reference oracle's fakectx (the same
programs run by the greenlet reference, when their expected traces were
recorded into expected_traces.py). Nothing here imports either.

REFERENCE lists the scenarios whose expected trace is the reference's;
the b_* ones (BINDING_ONLY) exercise behaviour the reference has no answer
for (join=False, escapes the reference lets out raw) and their expected
trace is derived by hand, explained next to it in expected_traces.py.
"""
from __future__ import annotations


# ---- the oracle's six example scenarios ----------------------------------------
def s02_nprocs4_yields3(ctx, T):
    """nprocs=4, every rank yields 3 times (yield count passed via args)."""

    def body(r, n):
        for i in range(n):
            T.rec("step", r, i)
            ctx.yield_()

    T.do_spawn(ctx, T.traced(body), (3,), 4)


def s04_worker_waits_fifo(ctx, T):
    """Drain order is FIFO (enqueue order, not sorted); a handle queued twice is
    engine-waited once; a handle completed earlier hits the fast path."""
    plans = {
        0: [("h", 40), "y", ("h", 10)],
        1: [("h", 30), ("h", 7)],
        2: [("h", 20), ("h", "shared")],
        3: [("h", 10), ("h", "shared"), "y"],
    }
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 4)


def s06_allreduce4(ctx, T):
    """all_reduce across 4 ranks (all arrive in the same round), two more steps."""
    plans = {r: ["y", T.ar(ctx, "ar0", 4), "y", "y"] for r in range(4)}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 4)


def s09_rank2_raises_step2(ctx, T):
    """Rank 2 raises in its 2nd step while rank 0 is parked in a 2-rank
    collective and rank 1 has enqueued its wait (both queues non-empty)."""
    plans = {
        0: ["y", T.ar(ctx, "g01", 2), "y"],
        1: ["y", T.ar(ctx, "g01", 2), "y"],
        2: ["y", ValueError("rank 2 boom at step 1")],
        3: ["y", "y", "y"],
    }
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 4)


def s10_rank0_raises_before_yield(ctx, T):
    """Rank 0 raises before its first yield: later ranks never start."""
    plans = {r: ["y", "y"] for r in range(4)}
    plans[0] = [ValueError("rank 0 boom before first yield")]
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 4)


def s24_drain_after_last_round(ctx, T):
    """The drain also runs after the final round: rank 0 appends a handle to
    the pending worker waits directly and returns; rank 1 returns at once."""

    def late(r):
        ctx._pending_worker_waits.append(("late", r))

    plans = {0: [late], 1: []}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)


# ---- collectives and the drain --------------------------------------------------
def s_allreduce_poll(ctx, T):
    """A collective nobody waits on as a worker: only drain phase (b)
    completes it, through the driver-side ctx.wait(h, _meta=meta)."""
    plans = {r: [T.ar(ctx, "p", 3, mode="poll"), "y"] for r in range(3)}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 3)


def s_phase_a_before_b(ctx, T):
    """A collective queued before a worker wait in the same round: phase (a)
    (worker waits) is emptied before phase (b) (collectives)."""
    plans = {
        0: [T.ar(ctx, "solo", 1, mode="poll")],
        1: [("h", 1), ("h", 2)],
    }
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)


def s_drain_loops_until_empty(ctx, T):
    """The engine's wait queues new work (a worker wait and a collective);
    the drain repeats until both queues are empty."""
    backend = ctx.distributed._backend

    def more():
        ctx._pending_worker_waits.append(("sub", "w"))
        backend._pending_collective_handles.append((("sub", "c"), 7, "made-by-engine"))

    ctx.engine.on_wait[("h", "root")] = more
    plans = {0: [("h", "root"), "y"], 1: ["y", ("sub", "c")]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)


def s_driver_side_wait(ctx, T):
    """ctx.wait on the driver, outside any spawn: the engine is called and
    the handle completed (never queued); the second wait is the fast path;
    a rank then finds it completed."""
    ctx.wait(("d", 1), _meta="m1")
    ctx.wait(("d", 1))
    T.post_state(ctx, 0)
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: [("d", 1), ("d", 2)]})), (), 1)


# ---- failure, cleanup order, root causes ------------------------------------------
def s_two_root_causes(ctx, T):
    """Rank 3 raises; rank 1's cleanup raises a different error while it is
    cancelled (a second root cause); rank 0 absorbs its cancellation and
    returns normally (no error); rank 2 never catches it."""

    def body(r):
        if r == 0:
            try:
                T.rec("step", r, 0)
                ctx.yield_()
                T.rec("step", r, 1)
                ctx.yield_()
            except SystemExit:
                T.rec("absorbed", r)
            return
        if r == 1:
            try:
                T.rec("step", r, 0)
                ctx.yield_()
                T.rec("step", r, 1)
                ctx.yield_()
            finally:
                raise RuntimeError("rank 1 cleanup failed")
        if r == 2:
            for i in range(3):
                T.rec("step", r, i)
                ctx.yield_()
        if r == 3:
            T.rec("step", r, 0)
            ctx.yield_()
            raise ValueError("rank 3 boom")

    T.do_spawn(ctx, T.traced(body), (), 4)


def s_failure_keeps_exception_objects(ctx, T):
    """errors[] holds the raised objects themselves (with their attributes)."""

    class Boom(Exception):
        def __init__(self, msg, payload):
            super().__init__(msg, payload)
            self.payload = payload

    def body(r):
        ctx.yield_()
        if r == 1:
            raise Boom("b", {"rank": r})
        ctx.yield_()

    T.do_spawn(ctx, T.traced(body), (), 3)


def s_cleanup_wait_fast(ctx, T):
    """A cancelled rank's cleanup waits on a handle that is already completed:
    the fast path returns (no suspension), the cleanup goes on."""

    def body(r):
        if r == 0:
            ctx.wait(("h", "done"))
            try:
                ctx.yield_()
            finally:
                T.rec("cleanup", r, "before")
                ctx.wait(("h", "done"))
                T.rec("cleanup", r, "after")
        else:
            ctx.yield_()
            raise KeyError("k")

    T.do_spawn(ctx, T.traced(body), (), 2)


def s_bind_raises(ctx, T):
    """distributed._bind_rank raises for rank 1: spawn raises it as it is,
    before any rank ran, with no reset; the queues keep what they had."""
    bind = ctx.distributed._bind_rank

    def failing_bind(g, r):
        bind(g, r)
        if r == 1:
            raise ValueError("bind failed")

    ctx.distributed._bind_rank = failing_bind
    ctx._pending_worker_waits.append(("h", "queued"))
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: ["y"], 1: ["y"], 2: ["y"]})), (), 3)
    ctx.distributed._bind_rank = bind
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: []})), (), 1)


# ---- binding only: what the reference lets escape, and what it lacks -----------------
def b_cleanup_wait_blocks(ctx, T):
    """A cancelled rank's cleanup waits on a handle that is not completed: it
    cannot suspend any more, so that wait raises SystemExit again. (The
    reference switches away and leaves the greenlet suspended for the
    garbage collector.)"""

    def body(r):
        if r == 0:
            try:
                ctx.yield_()
                ctx.yield_()  # cancelled here
            finally:
                T.rec("cleanup", r, "before")
                ctx.wait(("h", "never"))
                T.rec("cleanup", r, "unreachable")
        else:
            ctx.yield_()
            raise KeyError("k")

    T.do_spawn(ctx, T.traced(body), (), 2)


def b_swallow_and_yield_again(ctx, T):
    """A cancelled rank that swallows SystemExit and yields again gets
    SystemExit again at once (the reference would leave it suspended)."""

    def body(r):
        if r == 0:
            for i in range(3):
                try:
                    ctx.yield_()
                except SystemExit:
                    T.rec("swallowed", r, i)
        else:
            ctx.yield_()
            raise ValueError("v")

    T.do_spawn(ctx, T.traced(body), (), 2)


def b_rank_sysexit(ctx, T):
    """A rank nobody cancelled raises SystemExit: spawn re-raises it as it is
    (like the reference), after cancelling its siblings, which run their
    cleanup, and the barrier reset (the reference leaves them suspended)."""
    plans = {0: ["y", "y"], 1: [("h", 1), SystemExit(3)], 2: ["y", "y", "y"]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 3)


def b_rank_keyboardinterrupt(ctx, T):
    """Same for KeyboardInterrupt raised by rank code."""
    plans = {0: ["y", "y"], 1: ["y", KeyboardInterrupt()], 2: ["y", "y", "y"]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 3)


def b_engine_keyboardinterrupt(ctx, T):
    """KeyboardInterrupt from the engine's wait in a drain: the spawn fails
    and spawn re-raises it as it is."""
    ctx.engine.fail_on[("h", 1)] = KeyboardInterrupt()
    plans = {0: [("h", 1), "y"], 1: ["y", "y"]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)


def b_close_live_spawn(ctx, T):
    """join=False, one round, then close(): the live ranks are cancelled in
    rank order (cleanup runs), the barrier reset sees the queues, the queues
    are cleared; the context can spawn again."""
    plans = {0: ["y", "y"], 1: [("h", 1), "y"], 2: []}
    fn = T.traced(T.plan_body(ctx, plans))
    T.rec("spawn_begin", "nprocs=3")
    pc = ctx.multiprocessing.spawn(fn, (), 3, False)
    T.rec("join", pc.join(timeout=0))
    ctx._pending_worker_waits.append(("h", "queued"))
    T.post_state(ctx, 3)
    pc.close()
    T.rec("closed")
    T.post_state(ctx, 3)
    try:
        pc.join()
    except RuntimeError as e:
        T.rec("join_raised", type(e).__name__, str(e))
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: [("h", 1)]})), (), 1)


def b_barrier(ctx, T):
    """kbthreads.barrier(): every arrival yields; the waiters resume in their
    turns once the last not-finished rank arrived (a finished rank does not
    count)."""
    import kbthreads

    def body(r):
        T.rec("step", r, 0)
        if r == 2:
            return
        kbthreads.barrier()
        T.rec("passed", r, 1)
        if r == 1:
            ctx.yield_()
        kbthreads.barrier()
        T.rec("passed", r, 2)

    T.do_spawn(ctx, T.traced(body), (), 3)


def s_failure_in_round1_cancels_started_only(ctx, T):
    """Rank 1 raises in round 1: rank 0 (started) is cancelled, ranks 2 and 3
    never start and never run."""
    plans = {r: ["y", "y"] for r in range(4)}
    plans[1] = [ValueError("early")]
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 4)


def s_drain_failure_worker_wait(ctx, T):
    """The engine's wait raises in drain phase (a): every live rank is
    cancelled, the barrier reset sees the queues, no rank is an error.
    (The binding names the drain failure in the message: see
    expected_traces.DIFFERENCES.)"""
    ctx.engine.fail_on[("h", "bad")] = KeyError("engine boom")
    plans = {0: [("h", 1), "y"], 1: [("h", "bad"), "y"], 2: [("h", 3), "y"], 3: ["y", "y"]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 4)


def s_drain_failure_collective(ctx, T):
    """The engine's wait raises for a collective in drain phase (b)."""
    ctx.engine.fail_on[("coll", "x")] = RuntimeError("collective boom")
    plans = {r: [T.ar(ctx, "x", 2, mode="poll"), "y"] for r in range(2)}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)


# ---- spawns on one context ----------------------------------------------------------
def s_nprocs0_keeps_queue(ctx, T):
    """nprocs=0: no round, no drain; what was queued before stays queued
    (and a later spawn's drain takes it)."""
    ctx._pending_worker_waits.append(("h", "pre"))
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {})), (), 0)
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: []})), (), 1)


def s_respawn(ctx, T):
    """A second spawn numbers ranks from 0 again and keeps the completed set;
    a wait discarded by a failed spawn is waited again when queued again."""
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: ["y"], 1: [("h", "done")]})), (), 2)
    plans = {0: ["y", ("h", "lost")], 1: ["y", ValueError("2nd spawn fails")]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, {0: [("h", "done"), ("h", "lost")]})), (), 1)


# ---- join=False (the reference ignores join: same events, no join_round lines) -----
def s_sliced_yields(ctx, T):
    """join=False, then join(timeout=0) until done: one round per call."""

    def body(r, n):
        for i in range(n):
            T.rec("step", r, i)
            ctx.yield_()

    T.do_spawn_sliced(ctx, T.traced(body), (2,), 3)


def s_sliced_waits(ctx, T):
    """join=False with worker waits: every join(timeout=0) includes its drain."""
    plans = {0: [("h", 1), ("h", 2)], 1: [("h", 2), "y", "y"]}
    T.do_spawn_sliced(ctx, T.traced(T.plan_body(ctx, plans)), (), 2)


def s_sliced_failure(ctx, T):
    """join=False: the failure is raised by join()."""
    plans = {0: ["y", "y", "y"], 1: ["y", ("h", 1), ValueError("late")], 2: ["y", "y", "y", "y"]}
    T.do_spawn_sliced(ctx, T.traced(T.plan_body(ctx, plans)), (), 3)


def s_rank_raises_greenletexit(ctx, T):
    """A rank raising greenlet's GreenletExit: the reference's entry wrapper
    catches only Exception and greenlet takes GreenletExit leaving a
    greenlet for a normal death, so the rank just finishes: no error, no
    cleanup of its siblings, and spawn returns."""
    from greenlet import GreenletExit

    plans = {0: ["y", "y", "y"], 1: ["y", ("h", 1), GreenletExit()], 2: ["y", "y"]}
    T.do_spawn(ctx, T.traced(T.plan_body(ctx, plans)), (), 3)


REFERENCE = [
    "s02_nprocs4_yields3",
    "s04_worker_waits_fifo",
    "s06_allreduce4",
    "s09_rank2_raises_step2",
    "s10_rank0_raises_before_yield",
    "s24_drain_after_last_round",
    "s_allreduce_poll",
    "s_phase_a_before_b",
    "s_drain_loops_until_empty",
    "s_driver_side_wait",
    "s_two_root_causes",
    "s_failure_keeps_exception_objects",
    "s_cleanup_wait_fast",
    "s_bind_raises",
    "s_failure_in_round1_cancels_started_only",
    "s_drain_failure_worker_wait",
    "s_drain_failure_collective",
    "s_nprocs0_keeps_queue",
    "s_respawn",
    "s_sliced_yields",
    "s_sliced_waits",
    "s_sliced_failure",
    "s_rank_raises_greenletexit",
]

# The reference scenarios that raise greenlet's own exception: they import
# greenlet, so they run only where it imports (Debian's python3-greenlet
# serves Debian's python3 only); test_traces.py skips them elsewhere.
NEEDS_GREENLET = {"s_rank_raises_greenletexit"}

BINDING_ONLY = [
    "b_cleanup_wait_blocks",
    "b_swallow_and_yield_again",
    "b_rank_sysexit",
    "b_rank_keyboardinterrupt",
    "b_engine_keyboardinterrupt",
    "b_close_live_spawn",
    "b_barrier",
]
