# SPDX-License-Identifier: MIT
"""Collectives submitted from Python rank code: what the engine receives.

A collective reaches the engine through drain phase (b) with its meta, when
the engine's wait takes a second argument; ``Context.collective`` submits
and waits without queueing a worker wait, so phase (a) never completes it
first."""
from __future__ import annotations

import kbthreads


class RecordingEngine:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def wait(self, h, meta=None):
        self.calls.append((h, meta))


class OneArgEngine:
    def __init__(self) -> None:
        self.calls: list = []

    def wait(self, h):
        self.calls.append(h)


def test_engine_wait_receives_the_meta_of_a_collective_submitted_by_the_last_rank():
    eng = RecordingEngine()
    ctx = kbthreads.Context(engine=eng)

    def rank_main(rank):
        if rank == 2:  # the last to arrive submits; the others wait for it
            ctx.collective(("ar", 0), {"kind": "all_reduce", "bytes": 64})
        else:
            kbthreads.yield_()
            ctx.wait_completed(("ar", 0))

    ctx.spawn(rank_main, nprocs=3)
    assert eng.calls == [(("ar", 0), {"kind": "all_reduce", "bytes": 64})]


def test_every_rank_may_submit_the_same_collective_and_the_engine_waits_once():
    eng = RecordingEngine()
    ctx = kbthreads.Context(engine=eng)
    ctx.spawn(lambda r: ctx.collective(("bc", 7), ("broadcast", r)), nprocs=4)
    # the first entry's meta reaches the engine; the later entries find h completed
    assert eng.calls == [(("bc", 7), ("broadcast", 0))]


def test_a_worker_wait_reaches_the_engine_without_meta():
    eng = RecordingEngine()
    ctx = kbthreads.Context(engine=eng)
    ctx.spawn(lambda r: ctx.wait(("kernel", r)), nprocs=2)
    assert eng.calls == [(("kernel", 0), None), (("kernel", 1), None)]


def test_an_engine_whose_wait_takes_one_argument_gets_the_handle_only():
    eng = OneArgEngine()
    ctx = kbthreads.Context(engine=eng)
    ctx.spawn(lambda r: ctx.collective(("ar", 1), {"m": 1}), nprocs=2)
    assert eng.calls == [("ar", 1)]


def test_a_collective_on_a_completed_handle_returns_without_reaching_the_engine():
    eng = RecordingEngine()
    ctx = kbthreads.Context(engine=eng)
    ctx._completed.add(("done", 0))
    ctx.spawn(lambda r: ctx.collective(("done", 0), "meta"), nprocs=2)
    assert eng.calls == []


def test_collective_outside_a_rank_is_an_error():
    ctx = kbthreads.Context()
    try:
        ctx.collective(("x", 0), None)
    except RuntimeError as e:
        assert "outside a rank" in str(e)
    else:
        raise AssertionError("no error")


def test_replacing_the_engine_rereads_whether_its_wait_takes_meta():
    ctx = kbthreads.Context(engine=OneArgEngine())
    eng = RecordingEngine()
    ctx.engine = eng
    ctx.spawn(lambda r: ctx.collective(("ar", 2), "m"), nprocs=1)
    assert eng.calls == [(("ar", 2), "m")]
