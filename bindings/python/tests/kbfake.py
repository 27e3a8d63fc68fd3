# SPDX-License-Identifier: MIT
"""The reference oracle's fake runtime context (fakectx.py), rebuilt on kbthreads.

The greenlet oracle (the reference spawn module run on a small fake runtime)
records every observable event of a rank program as one trace line; this
module records the same events, in the same format, for the same programs
run by kbthreads. The differences are only where greenlets must be replaced:

  * the fake context is a kbthreads.Context: its wait() records the events
    and leaves the waiting to the library (the reference fake switched to
    the greenlet's parent itself);
  * all_reduce parks with ctx.yield_() instead of a bare parent switch;
  * the rank table is keyed by kbthreads.getcurrent() (the rank's Worker)
    instead of greenlet.getcurrent();
  * wait_done has no "switches=K" (the library does not count them);
  * teardown destroys the context, then checks that none of its rank
    threads is left (/proc/self/task).

A scenario is a function main(ctx, T): T is this module here and the oracle's
fakectx (plus a tiny adapter) when its expected trace is recorded.
"""
from __future__ import annotations

import os
import time

import kbthreads

TRACE: list = []


def rec(*ev) -> None:
    TRACE.append(ev)


def fmt_tok(x) -> str:
    if isinstance(x, tuple):
        return ":".join(fmt_tok(p) for p in x)
    if isinstance(x, list):
        return "[" + ",".join(fmt_tok(p) for p in x) + "]"
    return str(x)


def format_event(ev) -> str:
    return " ".join(fmt_tok(t) for t in ev)


class FakeEngine:
    """engine.wait(h) records ('engine_wait', h); fail_on[h] makes it raise a
    fresh copy of an exception, on_wait[h] runs a callback after recording."""

    def __init__(self) -> None:
        self.fail_on: dict = {}
        self.on_wait: dict = {}

    def wait(self, h) -> None:
        rec("engine_wait", h)
        if h in self.fail_on:
            exc = self.fail_on[h]
            raise type(exc)(*exc.args)
        cb = self.on_wait.get(h)
        if cb is not None:
            cb()


class FakeBarrier:
    def __init__(self, ctx: "FakeRuntimeContext") -> None:
        self._ctx = ctx
        self.reset_count = 0

    def reset(self) -> None:
        self.reset_count += 1
        ctx = self._ctx
        rec(
            "barrier_reset",
            "pending_worker=" + fmt_tok(list(ctx._pending_worker_waits)),
            "pending_coll=" + fmt_tok([e[0] for e in ctx.distributed._backend._pending_collective_handles]),
        )


class FakeBackend:
    def __init__(self, ctx: "FakeRuntimeContext") -> None:
        # replaced by the context's library-backed queue when the
        # distributed layer is attached (kbthreads.Context.distributed)
        self._pending_collective_handles: list = []
        self._barrier = FakeBarrier(ctx)
        self._arrivals: dict = {}
        self._issued: dict = {}
        self._next_sip = 0


class FakeDistributed:
    def __init__(self, ctx: "FakeRuntimeContext") -> None:
        self._ctx = ctx
        self._backend = FakeBackend(ctx)
        self._ranks: dict = {}  # Worker -> rank
        self._bound: list = []  # [(Worker, rank)] in bind order, all spawns

    def _bind_rank(self, g, rank: int) -> None:
        self._ranks[g] = rank
        self._bound.append((g, rank))
        rec("bind", rank)

    def get_rank(self) -> int:
        return self._ranks[kbthreads.getcurrent()]

    def is_worker(self) -> bool:
        return kbthreads.getcurrent() in self._ranks

    def all_reduce(self, tag: str, world: int, value: int = 1, mode: str = "wait") -> int:
        ctx = self._ctx
        be = self._backend
        r = self.get_rank()
        h = ("coll", tag)
        arr = be._arrivals.setdefault(tag, [])
        arr.append((r, value))
        rec("coll_arrive", r, tag, f"n={len(arr)}/{world}")
        if len(arr) == world:
            sip = be._next_sip
            be._next_sip += 1
            result = sum(v for _, v in arr)
            be._issued[tag] = (h, result)
            be._pending_collective_handles.append((h, sip, f"all_reduce:{tag}"))
            rec("coll_issue", r, h, f"sip={sip}")
        else:
            while tag not in be._issued:
                ctx.yield_()
        if mode == "wait":
            ctx.wait(h)
        else:
            while h not in ctx._completed:
                ctx.yield_()
        result = be._issued[tag][1]
        rec("coll_done", r, tag, f"result={result}")
        return result


class FakeRuntimeContext(kbthreads.Context):
    def __init__(self) -> None:
        super().__init__(engine=FakeEngine())
        self.distributed = FakeDistributed(self)

    def _who(self):
        return self.distributed._ranks.get(kbthreads.getcurrent(), "main")

    def wait(self, h, _meta=None) -> None:
        # The library decides; these checks only choose what to record. The
        # fast path still calls the library: had it switched, other ranks'
        # events would show up before this rank's next one.
        if h in self._completed:
            rec("wait_fast", self._who(), h)
            super().wait(h, _meta)
            return
        r = self.distributed._ranks.get(kbthreads.getcurrent())
        if r is not None:
            rec("wait_enqueue", r, h)
            super().wait(h, _meta)
            rec("wait_done", r, h)
            return
        rec("main_wait", h, f"meta={_meta}")
        super().wait(h, _meta)  # driver side: the engine hook calls engine.wait(h)


def _gstate(g) -> str:
    if g.dead:
        return "dead"
    return "suspended" if bool(g) else "unstarted"


def post_state(ctx: FakeRuntimeContext, nprocs: int) -> None:
    bound = ctx.distributed._bound[len(ctx.distributed._bound) - nprocs:] if nprocs else []
    rec(
        "post",
        "ranks=" + fmt_tok([_gstate(g) for g, _ in bound]),
        "pending_worker=" + fmt_tok(list(ctx._pending_worker_waits)),
        "pending_coll=" + fmt_tok([e[0] for e in ctx.distributed._backend._pending_collective_handles]),
        "completed=" + fmt_tok(sorted(ctx._completed, key=fmt_tok)),
    )


def record_outcome(ctx, nprocs, call) -> None:
    """call() runs the spawn (or a join); records its outcome like do_spawn."""
    try:
        ret = call()
    except kbthreads.SpawnException as e:
        order = list(e.errors.keys())
        first = order[0] if order else None
        ftype = type(e.errors[first]).__name__ if order else "None"
        rec("spawn_raised", "SpawnException")
        rec("error", "ranks=" + fmt_tok(sorted(e.errors.keys())), f"first={first}", f"type={ftype}")
        for r, ex in e.errors.items():
            rec("error_entry", r, type(ex).__name__, repr(ex))
        rec("error_msg", str(e))
        cause = e.__cause__
        same = int(bool(order) and cause is e.errors[first])
        rec("error_cause", type(cause).__name__, f"same_as_first={same}")
        post_state(ctx, nprocs)
    except BaseException as e:  # noqa: BLE001 - raw propagation is what we look at
        rec("spawn_raised", type(e).__name__, "raw")
        post_state(ctx, nprocs)
    else:
        rec("spawn_return", ret)
        post_state(ctx, nprocs)


def do_spawn(ctx: FakeRuntimeContext, fn, args=(), nprocs=1, join=None) -> None:
    rec("spawn_begin", f"nprocs={nprocs}")
    if join is None:
        record_outcome(ctx, nprocs, lambda: ctx.multiprocessing.spawn(fn, args, nprocs))
    else:
        record_outcome(ctx, nprocs, lambda: ctx.multiprocessing.spawn(fn, args, nprocs, join))
    rec("spawn_end")


def do_spawn_sliced(ctx: FakeRuntimeContext, fn, args=(), nprocs=1) -> None:
    """spawn(join=False), then join(timeout=0) until done: one round per call,
    with a 'join_round' line after every round that did not finish. Without
    those lines the trace is the join=True one."""
    rec("spawn_begin", f"nprocs={nprocs}")

    def call():
        pc = ctx.multiprocessing.spawn(fn, args, nprocs, False)
        while not pc.join(timeout=0):
            rec("join_round")
        return None

    record_outcome(ctx, nprocs, call)
    rec("spawn_end")


def alive(native_ids, settle: float = 2.0) -> list:
    """The given thread ids that are still threads of this process once
    they had up to `settle` seconds to go. A joined thread can still be
    listed in /proc for a moment: the kernel wakes the joiner before it
    removes the task."""
    ids = [t for t in native_ids if t is not None]
    deadline = time.monotonic() + settle
    while True:
        left = [t for t in ids if os.path.exists(f"/proc/self/task/{t}")]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.001)


def teardown(ctx: FakeRuntimeContext) -> None:
    """Destroy the context (the library joins the threads it keeps parked for
    later spawns) and report the ranks whose threads are still there."""
    rec("teardown")
    bound = list(ctx.distributed._bound)
    ctx.distributed._bound.clear()
    ctx.distributed._ranks.clear()
    ctx.close()
    leaked = sorted({r for w, r in bound if alive([w.native_id])})
    rec("teardown_done", "leaked=" + fmt_tok(leaked))


def traced(body):
    def fn(r, *args):
        rec("start", r)
        try:
            body(r, *args)
            rec("end", r)
        except BaseException as e:  # noqa: BLE001
            rec("unwind", r, type(e).__name__)
            raise
        finally:
            rec("finally", r)

    return fn


def do_action(ctx: FakeRuntimeContext, r: int, act) -> None:
    if act == "y":
        ctx.yield_()
    elif isinstance(act, tuple):
        ctx.wait(act)
    elif isinstance(act, BaseException):
        raise type(act)(*act.args)
    elif callable(act):
        act(r)
    else:  # pragma: no cover
        raise TypeError(act)


def plan_body(ctx: FakeRuntimeContext, plans: dict):
    def body(r, *args):
        for i, act in enumerate(plans[r]):
            rec("step", r, i)
            do_action(ctx, r, act)

    return body


def ar(ctx: FakeRuntimeContext, tag: str, world: int, mode: str = "wait"):
    def act(r):
        ctx.distributed.all_reduce(tag, world, value=r + 1, mode=mode)

    return act


def run(main) -> list:
    """Run one scenario on a fresh context; its trace lines."""
    TRACE.clear()
    ctx = FakeRuntimeContext()
    try:
        main(ctx)
        teardown(ctx)
    finally:
        ctx.close()
    return [format_event(ev) for ev in TRACE]
