#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python binding (bindings/python, kbthreads) under the loops of kb_bench.

    /usr/bin/python3 py_bench.py yield|wait|collective|sim|depth --n N --m M --reps R --lib PATH --accel PATH
                                 [--depth D] [--binding DIR --impl NAME]

Each rank runs the same loop as kb_bench's and peer_greenlet.py's, in
Python: ``kbthreads.yield_()``; ``ctx.wait(h)`` on a fresh handle (the
drain after the round calls the engine's ``wait(h)``); or a collective,
``ctx.pending_collectives.append((h, rank, None))`` then ``ctx.wait(h)``
(the drain's phase (b) completes it through the engine). The spawn is
``ctx.multiprocessing.spawn(fn, nprocs=N)``: the binding drives it with
timed kb_join slices, as every Python user's spawn is driven.

Only the binding's public API is used (``Context``, ``yield_``, a
context's ``multiprocessing.spawn``, ``wait``, ``pending_collectives`` and
``close``), and the library and the compiled extension are named to it
through its two variables, KBTHREADS_LIBRARY (--lib) and KBTHREADS_ACCEL
(--accel): so the same script measures this checkout's binding and another
checkout's (--binding DIR, with --impl naming its figures), whatever their
insides.

Timing as in kb_bench: every rank makes one warm-up call, stamps the clock,
makes M calls, stamps it again; ns per call = (latest last stamp - earliest
first stamp) / (N * M). A warm-up repetition (not reported) comes first.
Output: KBR lines (see bench_common.h), impl "kbthreads_py" by default.

`sim` is the simulation-shaped job (bench/python/sim_model.py, the same as
`peer_greenlet.py sim` and `kb_bench sim`): M steps per repetition, each 4
kernel waits drained by a heap-based engine, an all-reduce and a yield;
figures sim and sim_cpu (ns per operation) and a KBI sim_checksum.

`depth` is the yield loop run D levels deep in C (bench/python/depth_model.py,
the same as `peer_greenlet.py depth`): each rank yields M times from inside
--depth nested map() calls back into Python; figure depth_<D>.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from types import ModuleType
from typing import Callable, List

HERE = os.path.dirname(os.path.abspath(__file__))


class Engine:
    """Every wait completes at once (counted, so the hook is real)."""

    def __init__(self) -> None:
        self.waits = 0

    def wait(self, h: int) -> None:
        self.waits += 1


class Stamps:
    """Each rank's first and last clock stamp of a repetition, and the handle
    base that keeps every repetition's handles fresh."""

    def __init__(self, n: int) -> None:
        self.first: List[int] = [0] * n
        self.last: List[int] = [0] * n
        self.base = 0

    def ns_per_op(self, ops: int) -> float:
        return (max(self.last) - min(self.first)) / ops


def rank_loop(kbthreads: ModuleType, ctx: object, mode: str, n: int, m: int,
              st: Stamps) -> Callable[[int], None]:
    """The rank function of one loop: one warm-up call, a stamp, M calls, a stamp."""
    clock = time.perf_counter_ns
    yield_ = kbthreads.yield_
    wait = ctx.wait  # type: ignore[attr-defined]
    colls = ctx.pending_collectives  # type: ignore[attr-defined]

    def yield_rank(rank: int) -> None:
        yield_()
        st.first[rank] = clock()
        for _ in range(m):
            yield_()
        st.last[rank] = clock()

    def wait_rank(rank: int) -> None:
        b = st.base
        wait(b + 1 + rank)
        st.first[rank] = clock()
        for s in range(1, m + 1):
            wait(b + 1 + s * n + rank)
        st.last[rank] = clock()

    def collective_rank(rank: int) -> None:
        b = st.base
        colls.append((b + 1 + rank, rank, None))
        wait(b + 1 + rank)
        st.first[rank] = clock()
        for s in range(1, m + 1):
            h = b + 1 + s * n + rank
            colls.append((h, rank, None))
            wait(h)
        st.last[rank] = clock()

    return {"yield": yield_rank, "wait": wait_rank, "collective": collective_rank}[mode]


def run_loop(kbthreads: ModuleType, a: argparse.Namespace, impl: str) -> None:
    """A warm-up repetition, then --reps reported ones, each one spawn of N ranks."""
    n, m = a.n, a.m
    ctx = kbthreads.Context(Engine())
    st = Stamps(n)
    fn = rank_loop(kbthreads, ctx, a.mode, n, m, st)
    for rep in range(-1, a.reps):
        ctx.multiprocessing.spawn(fn, nprocs=n)
        st.base += (m + 1) * n
        ops = n * m
        if rep >= 0:
            print("KBR,%s,%s,0,%d,%d,%.3f,ns,%d" % (a.mode, impl, n, rep, st.ns_per_op(ops), ops))
        sys.stdout.flush()
    ctx.close()


def run_sim(kbthreads: ModuleType, a: argparse.Namespace, impl: str) -> None:
    """The simulation-shaped job through the binding (bench/python/sim_model.py)."""
    sys.path.insert(0, HERE)
    import sim_model

    sim_model.check_args("py_bench", a.n, a.m, a.reps)
    engine = sim_model.SimEngine(a.n, a.m + 1)
    ctx = kbthreads.Context(engine)
    colls = ctx.pending_collectives
    sim_model.run(impl, a.n, a.m, a.reps, engine, lambda fn, n: ctx.multiprocessing.spawn(fn, nprocs=n),
                  ctx.wait, kbthreads.yield_, lambda h, rank: colls.append((h, rank, None)))
    ctx.close()


def run_depth(kbthreads: ModuleType, a: argparse.Namespace, impl: str) -> None:
    """The yield loop D levels deep in C through the binding (bench/python/depth_model.py)."""
    sys.path.insert(0, HERE)
    import depth_model

    depth_model.check_args("py_bench", a.n, a.depth, a.m, a.reps)
    ctx = kbthreads.Context(Engine())
    depth_model.run(impl, a.n, a.depth, a.m, a.reps, lambda fn, n: ctx.multiprocessing.spawn(fn, nprocs=n),
                    kbthreads.yield_)
    ctx.close()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["yield", "wait", "collective", "sim", "depth"])
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--depth", type=int, default=0, help="depth: nested C calls at the yield (default 0)")
    ap.add_argument("--lib", required=True, help="the libkbthreads.so to load (KBTHREADS_LIBRARY)")
    ap.add_argument("--accel", required=True, help="the binding's compiled extension to load (KBTHREADS_ACCEL)")
    ap.add_argument("--binding", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "bindings", "python"),
                    help="the folder holding the kbthreads package (default: this checkout's)")
    ap.add_argument("--impl", default="kbthreads_py", help="the impl name of the figures (default: kbthreads_py)")
    return ap.parse_args()


def main() -> None:
    a = parse_args()
    os.environ["KBTHREADS_LIBRARY"] = a.lib
    os.environ["KBTHREADS_ACCEL"] = a.accel
    sys.path.insert(0, a.binding)
    import kbthreads

    print("KBI,python_version,%s" % sys.version.split()[0])
    if a.mode == "sim":
        run_sim(kbthreads, a, a.impl)
    elif a.mode == "depth":
        run_depth(kbthreads, a, a.impl)
    else:
        run_loop(kbthreads, a, a.impl)


if __name__ == "__main__":
    main()
