#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python binding (bindings/python, kbthreads) under the loops of kb_bench.

    /usr/bin/python3 py_bench.py yield|wait|collective|sim --n N --m M --reps R --lib PATH
                                 [--accel PATH | --ctypes] [--binding DIR --impl NAME]

Each rank runs the same loop as kb_bench's and peer_greenlet.py's, in
Python: ``kbthreads.yield_()``; ``ctx.wait(h)`` on a fresh handle (the
drain after the round calls the engine's ``wait(h)``); or a collective,
``ctx.pending_collectives.append((h, rank, None))`` then ``ctx.wait(h)``
(the drain's phase (b) completes it through the engine). The spawn is
``ctx.multiprocessing.spawn(fn, nprocs=N)``: the binding drives it with
timed kb_join slices, as every Python user's spawn is driven.

Timing as in kb_bench: every rank makes one warm-up call, stamps the clock,
makes M calls, stamps it again; ns per call = (latest last stamp - earliest
first stamp) / (N * M). A warm-up repetition (not reported) comes first.
Output: KBR lines (see bench_common.h), impl "kbthreads_py" (the binding
with its C accelerator, --accel: KBTHREADS_ACCEL) or "kbthreads_py_ctypes"
(--ctypes: KBTHREADS_NO_ACCEL=1, the pure-ctypes path). --binding DIR runs
the kbthreads package in DIR instead of this checkout's (an earlier
release's, say, with --impl naming its figures): a binding that predates
the accelerator runs as with --ctypes.

`sim` is the simulation-shaped job of issue 20 (bench/sim_model.py, the
same as `peer_greenlet.py sim` and `kb_bench sim`): M steps per repetition,
each 4 kernel waits drained by a heap-based engine, an all-reduce and a
yield; figures sim and sim_cpu (ns per operation) and a KBI sim_checksum.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["yield", "wait", "collective", "sim"])
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lib", required=True, help="the libkbthreads.so to load (KBTHREADS_LIBRARY)")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--accel", help="the binding's C accelerator to load (KBTHREADS_ACCEL)")
    how.add_argument("--ctypes", action="store_true", help="the pure-ctypes path (KBTHREADS_NO_ACCEL=1)")
    ap.add_argument("--binding", default=os.path.join(os.path.dirname(HERE), "bindings", "python"),
                    help="the folder holding the kbthreads package (default: this checkout's)")
    ap.add_argument("--impl", help="the impl name of the figures (default: kbthreads_py or kbthreads_py_ctypes)")
    a = ap.parse_args()
    os.environ["KBTHREADS_LIBRARY"] = a.lib
    if a.ctypes:
        os.environ["KBTHREADS_NO_ACCEL"] = "1"
    else:
        os.environ["KBTHREADS_ACCEL"] = a.accel
    sys.path.insert(0, a.binding)
    import kbthreads

    accelerated = getattr(kbthreads, "accelerated", lambda: False)  # older bindings: ctypes only

    class Engine:
        """Every wait completes at once (counted, so the hook is real)."""

        def __init__(self) -> None:
            self.waits = 0

        def wait(self, h: int) -> None:
            self.waits += 1

    n, m = a.n, a.m
    ctx = kbthreads.Context(Engine())
    t_first = [0] * n
    t_last = [0] * n
    base = [0]
    clock = time.perf_counter_ns
    yield_ = kbthreads.yield_
    wait = ctx.wait
    colls = ctx.pending_collectives

    if a.mode == "yield":
        def rank_fn(rank: int) -> None:
            yield_()
            t_first[rank] = clock()
            for _ in range(m):
                yield_()
            t_last[rank] = clock()
    elif a.mode == "wait":
        def rank_fn(rank: int) -> None:
            b = base[0]
            wait(b + 1 + rank)
            t_first[rank] = clock()
            for s in range(1, m + 1):
                wait(b + 1 + s * n + rank)
            t_last[rank] = clock()
    else:
        def rank_fn(rank: int) -> None:
            b = base[0]
            colls.append((b + 1 + rank, rank, None))
            wait(b + 1 + rank)
            t_first[rank] = clock()
            for s in range(1, m + 1):
                h = b + 1 + s * n + rank
                colls.append((h, rank, None))
                wait(h)
            t_last[rank] = clock()

    if accelerated() == a.ctypes:
        sys.exit("py_bench: the binding %s the accelerator" % ("loaded" if a.ctypes else "could not load"))
    impl = a.impl or ("kbthreads_py" if accelerated() else "kbthreads_py_ctypes")
    print("KBI,py_binding_path,%s" % ("accelerated" if accelerated() else "ctypes"))
    print("KBI,python_version,%s" % sys.version.split()[0])
    if a.mode == "sim":
        ctx.close()
        run_sim(kbthreads, a, impl)
        return
    for rep in range(-1, a.reps):
        ctx.multiprocessing.spawn(rank_fn, nprocs=n)
        base[0] += (m + 1) * n
        ops = n * m
        if rep >= 0:
            ns = (max(t_last) - min(t_first)) / ops
            print("KBR,%s,%s,0,%d,%d,%.3f,ns,%d" % (a.mode, impl, n, rep, ns, ops))
        sys.stdout.flush()
    ctx.close()


def run_sim(kbthreads, a, impl: str) -> None:
    """The simulation-shaped job through the binding (bench/sim_model.py)."""
    sys.path.insert(0, HERE)
    import sim_model

    sim_model.check_args("py_bench", a.n, a.m, a.reps)
    engine = sim_model.SimEngine(a.n, a.m + 1)
    ctx = kbthreads.Context(engine)
    colls = ctx.pending_collectives
    sim_model.run(impl, a.n, a.m, a.reps, engine, lambda fn, n: ctx.multiprocessing.spawn(fn, nprocs=n),
                  ctx.wait, kbthreads.yield_, lambda h, rank: colls.append((h, rank, None)))
    ctx.close()


if __name__ == "__main__":
    main()
