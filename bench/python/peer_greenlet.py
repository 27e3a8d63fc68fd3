#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Peer: a greenlet scheduler run the way the reference (Python) scheduler runs.

    /usr/bin/python3 peer_greenlet.py yield|wait|collective|sim|depth --n N --m M --reps R [--depth D]

The scheduler loop is the reference's shape, written here from its
description: every rank is a greenlet whose parent is the driver; a round
switches to each live rank in rank order; a rank yields by switching back to
the driver (one switch to the driver per yield); after every round the
driver drains the pending worker waits and collectives until both are empty.
`wait` makes every rank wait on a fresh handle per step (enqueue, then
switch to the driver until a drain completed it), like kb_bench wait;
`collective` appends (h, rank, None) to the backend's pending collectives
first, as the reference's collectives do, and the drain's phase (b)
completes it through ctx.wait on the driver side (the engine), like
kb_bench collective.

Timing as in kb_bench: every rank makes one warm-up call, stamps the clock,
makes M calls, stamps it again; ns per call = (latest last stamp - earliest
first stamp) / (N * M). A warm-up repetition (not reported) comes first.
Output: KBR lines (see bench_common.h).

`sim` is the simulation-shaped job of issue 20 (bench/python/sim_model.py: per
step, 4 kernel waits completed by a heap-based engine, an all-reduce, a
yield; M steps per repetition): figures sim and sim_cpu (ns per operation)
and a KBI sim_checksum line, compared by run.py with kb_bench sim's and
py_bench.py sim's.

`depth` is the yield loop run D levels deep in C (bench/python/depth_model.py,
the same as `py_bench.py depth`): each rank yields M times from inside
--depth nested map() calls back into Python, so every switch moves that
much more of the C stack; figure depth_<D>.
"""
import argparse
import sys
import time

try:
    from greenlet import greenlet, getcurrent
    import greenlet as _greenlet_module
except ImportError:  # pragma: no cover - the runner checks first
    print("peer_greenlet: python3-greenlet is not installed", file=sys.stderr)
    sys.exit(4)


class Engine:
    """A trivial engine: every wait completes at once (counted)."""

    def __init__(self):
        self.waits = 0

    def wait(self, handle):
        self.waits += 1


def yield_():
    """A bare yield: one switch to the driver (the rank's parent)."""
    getcurrent().parent.switch()


class Backend:
    def __init__(self):
        self.pending_collectives = []


class Distributed:
    def __init__(self):
        self.backend = Backend()


class Context:
    def __init__(self, engine):
        self.engine = engine
        self.distributed = Distributed()
        self.pending_waits = []
        self.completed = set()

    def wait(self, handle):
        """Rank side: return at once if completed, else queue it and switch
        to the driver until a drain has completed it."""
        if handle in self.completed:
            return
        self.pending_waits.append(handle)
        while handle not in self.completed:
            yield_()

    def drain(self):
        """After every round: worker waits first (FIFO), then collectives,
        until both queues are empty at once. The collective queue is looked
        up through the distributed backend every time, as the reference's
        drain does."""
        dist = getattr(self, "distributed", None)
        backend = getattr(dist, "backend", None) if dist is not None else None
        colls = getattr(backend, "pending_collectives", None) if backend is not None else None
        while self.pending_waits or colls:
            while self.pending_waits:
                h = self.pending_waits.pop(0)
                if h not in self.completed:
                    wait = getattr(self.engine, "wait", None)
                    if wait is not None:
                        wait(h)
                    self.completed.add(h)
            while colls:
                h, _sip, meta = colls.pop(0)
                self.driver_wait(h, _meta=meta)

    def driver_wait(self, handle, _meta=None):
        """Driver side (the reference's ctx.wait in the main greenlet): the
        engine runs until the handle completes."""
        if handle in self.completed:
            return
        self.engine.wait(handle)
        self.completed.add(handle)


def spawn(ctx, fn, nprocs):
    """Run fn(rank) on nprocs greenlets, round-robin, draining after each
    round; re-raise the first failure after killing the live siblings."""
    errors = {}

    def make_entry(rank):
        def entry():
            try:
                fn(rank)
            except Exception as e:  # recorded, then re-raised into the driver
                errors[rank] = e
                raise
        return entry

    ranks = [greenlet(make_entry(r)) for r in range(nprocs)]
    try:
        while True:
            live = [g for g in ranks if not g.dead]
            if not live:
                break
            for g in live:
                if not g.dead:
                    g.switch()
            ctx.drain()
    except Exception:
        for g in ranks:
            if not g.dead:
                try:
                    g.throw(SystemExit)
                except BaseException:
                    pass
        ctx.pending_waits.clear()
        ctx.distributed.backend.pending_collectives.clear()
        raise RuntimeError("spawn failed on ranks %s" % sorted(errors))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["yield", "wait", "collective", "sim", "depth"])
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--depth", type=int, default=0, help="depth: nested C calls at the yield (default 0)")
    a = ap.parse_args()
    if a.mode == "sim":
        run_sim(a)
        return
    if a.mode == "depth":
        run_depth(a)
        return
    n, m = a.n, a.m
    ctx = Context(Engine())
    t_first = [0] * n
    t_last = [0] * n
    base = [0]
    clock = time.perf_counter_ns

    if a.mode == "yield":
        def rank_fn(rank):
            yield_()
            t_first[rank] = clock()
            for _ in range(m):
                yield_()
            t_last[rank] = clock()
    elif a.mode == "wait":
        def rank_fn(rank):
            b = base[0]
            ctx.wait(b + 1 + rank)
            t_first[rank] = clock()
            for s in range(1, m + 1):
                ctx.wait(b + 1 + s * n + rank)
            t_last[rank] = clock()
    else:
        colls = ctx.distributed.backend.pending_collectives

        def rank_fn(rank):
            b = base[0]
            colls.append((b + 1 + rank, rank, None))
            ctx.wait(b + 1 + rank)
            t_first[rank] = clock()
            for s in range(1, m + 1):
                h = b + 1 + s * n + rank
                colls.append((h, rank, None))
                ctx.wait(h)
            t_last[rank] = clock()

    print("KBI,greenlet_version,%s" % _greenlet_module.__version__)
    print("KBI,python_version,%s" % sys.version.split()[0])
    for rep in range(-1, a.reps):
        spawn(ctx, rank_fn, n)
        base[0] += (m + 1) * n
        ops = n * m
        if rep >= 0:
            ns = (max(t_last) - min(t_first)) / ops
            print("KBR,%s,greenlet,0,%d,%d,%.3f,ns,%d" % (a.mode, n, rep, ns, ops))
        sys.stdout.flush()


def run_sim(a):
    """The simulation-shaped job on this scheduler (bench/python/sim_model.py)."""
    import sim_model

    sim_model.check_args("peer_greenlet", a.n, a.m, a.reps)
    engine = sim_model.SimEngine(a.n, a.m + 1)
    ctx = Context(engine)
    colls = ctx.distributed.backend.pending_collectives
    print("KBI,greenlet_version,%s" % _greenlet_module.__version__)
    print("KBI,python_version,%s" % sys.version.split()[0])
    sim_model.run("greenlet", a.n, a.m, a.reps, engine, lambda fn, n: spawn(ctx, fn, n), ctx.wait, yield_,
                  lambda h, rank: colls.append((h, rank, None)))


def run_depth(a):
    """The yield loop D levels deep in C on this scheduler (bench/python/depth_model.py)."""
    import depth_model

    depth_model.check_args("peer_greenlet", a.n, a.depth, a.m, a.reps)
    ctx = Context(Engine())
    print("KBI,greenlet_version,%s" % _greenlet_module.__version__)
    print("KBI,python_version,%s" % sys.version.split()[0])
    depth_model.run("greenlet", a.n, a.depth, a.m, a.reps, lambda fn, n: spawn(ctx, fn, n), yield_)


if __name__ == "__main__":
    main()
