# SPDX-License-Identifier: MIT
"""greenlet_ranks.ReferenceContext, the model of the reference that the
differential test (test_differential.py) runs random programs on, prints
for the programs of scenarios.py the traces the real greenlet reference
printed (expected_traces.py), with the binding's documented differences;
and for the binding-only programs it can run, the binding's traces. So the
model is held to the reference on every machine, greenlet 3 or not, the
reference module itself being needed only by test_reference_on_greenlet.py.

The programs run through a fake runtime like kbfake's (the same trace
events), whose context is the model's instead of a kbthreads.Context."""
from __future__ import annotations

import gc
import weakref

import pytest

import expected_traces as X
import kbfake
import scenarios

pytest.importorskip("greenlet")
import greenlet_ranks as G  # noqa: E402


class ModelDistributed(kbfake.FakeDistributed):
    """kbfake's fake distributed layer, its rank table keyed by the model's rank objects."""

    def get_rank(self) -> int:
        return self._ranks[G.getcurrent()]

    def is_worker(self) -> bool:
        return G.getcurrent() in self._ranks


class ModelFakeContext(G.ReferenceContext):
    """kbfake.FakeRuntimeContext on the model: the same events recorded."""

    def __init__(self) -> None:
        super().__init__(engine=kbfake.FakeEngine())
        self.distributed = ModelDistributed(self)

    def _who(self):
        return self.distributed._ranks.get(G.getcurrent(), "main")

    def wait(self, h, _meta=None) -> None:
        if h in self._completed:
            kbfake.rec("wait_fast", self._who(), h)
            super().wait(h, _meta)
            return
        r = self.distributed._ranks.get(G.getcurrent())
        if r is not None:
            kbfake.rec("wait_enqueue", r, h)
            super().wait(h, _meta)
            kbfake.rec("wait_done", r, h)
            return
        kbfake.rec("main_wait", h, f"meta={_meta}")
        super().wait(h, _meta)


class ModelT:
    """What scenarios.py calls T, on the model: kbfake's recording helpers,
    its own outcome recorder (the model raises its own SpawnException) and
    teardown (the greenlets of the ranks left alive)."""

    rec = staticmethod(kbfake.rec)
    traced = staticmethod(kbfake.traced)
    plan_body = staticmethod(kbfake.plan_body)
    ar = staticmethod(kbfake.ar)
    post_state = staticmethod(kbfake.post_state)

    @staticmethod
    def record_outcome(ctx, nprocs, call) -> None:
        rec = kbfake.rec
        try:
            ret = call()
        except G.SpawnException as e:
            order = list(e.errors.keys())
            first = order[0] if order else None
            ftype = type(e.errors[first]).__name__ if order else "None"
            rec("spawn_raised", "SpawnException")
            rec("error", "ranks=" + kbfake.fmt_tok(sorted(e.errors.keys())), f"first={first}", f"type={ftype}")
            for r, ex in e.errors.items():
                rec("error_entry", r, type(ex).__name__, repr(ex))
            rec("error_msg", str(e))
            cause = e.__cause__
            same = int(bool(order) and cause is e.errors[first])
            rec("error_cause", type(cause).__name__, f"same_as_first={same}")
        except BaseException as e:  # noqa: BLE001 - raw propagation is what we look at
            rec("spawn_raised", type(e).__name__, "raw")
        else:
            rec("spawn_return", ret)
        kbfake.post_state(ctx, nprocs)

    @classmethod
    def do_spawn(cls, ctx, fn, args=(), nprocs=1, join=None) -> None:
        kbfake.rec("spawn_begin", f"nprocs={nprocs}")
        cls.record_outcome(ctx, nprocs, lambda: ctx.multiprocessing.spawn(fn, args, nprocs))
        kbfake.rec("spawn_end")

    @classmethod
    def do_spawn_sliced(cls, ctx, fn, args=(), nprocs=1) -> None:
        cls.do_spawn(ctx, fn, args, nprocs)  # join=False: the same events, no join_round lines

    @staticmethod
    def teardown(ctx) -> None:
        kbfake.rec("teardown")
        refs = [(weakref.ref(w.greenlet), r) for w, r in ctx.distributed._bound]
        ctx.distributed._bound.clear()
        ctx.distributed._ranks.clear()
        gc.collect()
        leaked = [r for ref, r in refs if ref() is not None and not ref().dead]
        kbfake.rec("teardown_done", "leaked=" + kbfake.fmt_tok(leaked))


def model_trace(name: str) -> list[str]:
    kbfake.TRACE.clear()
    ctx = ModelFakeContext()
    getattr(scenarios, name)(ctx, ModelT)
    ModelT.teardown(ctx)
    return [kbfake.format_event(ev) for ev in kbfake.TRACE]


def reference_with_differences(name: str) -> list[str]:
    lines = X.REFERENCE_TRACES[name].splitlines()
    for ref_line, kb_line in X.DIFFERENCES.get(name, []):
        lines[lines.index(ref_line)] = kb_line
    return lines


@pytest.mark.parametrize("name", scenarios.REFERENCE)
def test_the_model_prints_the_references_trace_with_the_bindings_differences(name):
    assert model_trace(name) == reference_with_differences(name)


# The binding-only programs the model can run: not join=False (b_close_live_spawn)
# nor kbthreads.barrier() called by name (b_barrier; test_differential.py runs
# barriers through the context).
MODEL_BINDING_ONLY = [n for n in scenarios.BINDING_ONLY if n not in ("b_close_live_spawn", "b_barrier")]


@pytest.mark.parametrize("name", MODEL_BINDING_ONLY)
def test_the_model_prints_the_bindings_trace_where_the_binding_departs_from_the_reference(name):
    assert model_trace(name) == X.BINDING_TRACES[name].splitlines()


def test_the_model_refuses_a_spawn_from_a_rank_and_from_an_engine_hook():
    refused = []

    class Engine:
        def wait(self, h):
            try:
                ctx.spawn(lambda r: None)
            except G.KbError as e:
                refused.append(("hook", e.code))

    ctx = G.ReferenceContext(Engine())

    def rank_main(r):
        try:
            ctx.spawn(lambda r: None)
        except G.KbError as e:
            refused.append(("rank", e.code))
        ctx.wait(("h", r))

    ctx.spawn(rank_main, nprocs=2)
    assert refused == [("rank", G.EPERM), ("rank", G.EPERM), ("hook", G.EBUSY), ("hook", G.EBUSY)]


def test_the_models_barrier_lets_its_waiters_go_in_the_round_after_it_opened():
    events = []
    ctx = G.ReferenceContext()

    def rank_main(r):
        if r == 2:
            return  # a finished rank does not count
        if r == 1:
            ctx.yield_()
        events.append(("arrive", r, ctx._run.rounds))
        ctx.barrier()
        events.append(("pass", r, ctx._run.rounds))

    ctx.spawn(rank_main, nprocs=4)
    # round 1: 0 and 3 arrive; round 2: 1 arrives last and opens it; round 3: all pass in rank order
    assert events == [("arrive", 0, 1), ("arrive", 3, 1), ("arrive", 1, 2),
                      ("pass", 0, 3), ("pass", 1, 3), ("pass", 3, 3)]
