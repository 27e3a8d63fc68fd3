# SPDX-License-Identifier: MIT
"""The loop jobs of bench/harness/run.py: yield, wait, collective and spawn through
kb_spawn (default options, --spread, --pin, under one CPU, timed kb_join
slices, the condvar baton), the same loops in Python, the floors (futex,
semaphore and condvar rings; swapcontext) and the peers (greenlet, SimGrid).

For each N the jobs run in an order that keeps the figures compared with
each other close in time: libkbthreads, then the floors, then the peers;
the timed-join, Python, spread and taskset jobs right after the kb_spawn
job of the same loop.
"""
from __future__ import annotations

import os
from typing import List

from bench_shared import JOIN_SLICE_MS
from runner import Runner


def pin_cpu0() -> None:
    """preexec_fn of the taskset jobs: the whole process on the first CPU it
    may use (as `taskset -c 0` does)."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def taskset_job(r: Runner, mode: str, n: int, argv: List[str]) -> None:
    """The default options with the whole process on one CPU (impl kbthreads_taskset)."""
    if n in r.plan.spread_ns and r.want("kbthreads", "taskset", mode):
        r.run("kbthreads %s N=%d taskset" % (mode, n), argv, preexec_fn=pin_cpu0,
              rename={"kbthreads": "kbthreads_taskset"})


def swapcontext(r: Runner) -> None:
    if r.want("floors", "swapcontext"):
        r.run("swapcontext",
              [r.prog("kb_floor_swapcontext"), "--m", str(r.plan.swap_ops), "--reps", str(r.plan.reps)])


def floors(r: Runner, n: int, pin: int) -> None:
    """The rings at N, unpinned or pinned."""
    p, tag = r.plan, " pinned" if pin else ""
    tail = ["--reps", str(p.reps)] + (["--pin"] if pin else [])
    for word, kind, label, m in (("futex", "futex", "futex ring", p.ring_ops),
                                 ("sem", "sem", "semaphore ring", p.ring_ops),
                                 ("cond", "cond", "condvar broadcast", p.cond_handoffs(n))):
        if r.want("floors", word):
            r.run("%s N=%d%s" % (label, n, tag), [r.prog("kb_floor_ring"), kind, "--n", str(n), "--m", str(m)] + tail)


def yield_peers(r: Runner, n: int) -> None:
    """greenlet's and SimGrid's yield at N (SimGrid: one process per repetition)."""
    p = r.plan
    if r.want("peers", "greenlet") and r.greenlet_ok:
        r.run("greenlet yield N=%d" % n, [r.python, os.path.join(r.py_dir, "peer_greenlet.py"), "yield", "--n", str(n),
                                          "--m", str(p.m_for(p.greenlet_ops, n)), "--reps", str(p.reps)])
    if r.want("peers", "simgrid") and r.have("kb_peer_simgrid"):
        for factory in ("thread", "raw"):
            m = p.m_for(p.simgrid_ops[factory], n)
            for rep in range(p.reps):
                r.run("simgrid %s yield N=%d (%d/%d)" % (factory, n, rep + 1, p.reps),
                      [r.prog("kb_peer_simgrid"), "--cfg=contexts/factory:" + factory, "--log=root.thres:warning",
                       "--n", str(n), "--m", str(m)])


def yield_family(r: Runner, n: int) -> None:
    """The yield loop at N: unpinned (then join, Python, spread, taskset) and the floors, pinned, the peers."""
    p = r.plan
    argv = [r.prog("kb_bench"), "yield", "--n", str(n), "--m", str(p.m_for(p.kb_ops, n)), "--reps", str(p.reps)]
    for pin in (0, 1):
        if r.want("kbthreads", "yield"):
            r.run_kb("kbthreads yield N=%d%s" % (n, " pinned" if pin else ""), argv + (["--pin"] if pin else []))
        if not pin:
            python_jobs(r, "yield", n)
            if r.want_spread(n, "yield"):
                r.run_kb("kbthreads yield N=%d spread" % n, argv + ["--spread"])
            taskset_job(r, "yield", n, argv)
        floors(r, n, pin)
    yield_peers(r, n)


def drain_family(r: Runner, n: int) -> None:
    """The wait and collective loops at N (the condvar baton on wait only), then greenlet's."""
    p = r.plan
    m = p.m_for(p.kb_ops, n)
    for mode in ("wait", "collective"):
        argv = [r.prog("kb_bench"), mode, "--n", str(n), "--m", str(m), "--reps", str(p.reps)]
        run = r.run_kb if mode == "wait" else r.run
        if r.want("kbthreads", mode):
            run("kbthreads %s N=%d" % (mode, n), argv)
        python_jobs(r, mode, n)
        if r.want_spread(n, mode):
            run("kbthreads %s N=%d spread" % (mode, n), argv + ["--spread"])
        if mode == "wait" and n in p.spread_ns:
            if r.want("kbthreads", "pin", "wait"):  # --pin for the wait loop (yield has had it all along)
                r.run("kbthreads wait N=%d pinned" % n, argv + ["--pin"])
            taskset_job(r, mode, n, argv)
    if r.want("peers", "greenlet", "wait") and r.greenlet_ok:
        for mode in ("wait", "collective"):
            r.run("greenlet %s N=%d" % (mode, n),
                  [r.python, os.path.join(r.py_dir, "peer_greenlet.py"), mode, "--n", str(n), "--m",
                   str(p.m_for(p.greenlet_ops, n)), "--reps", str(p.reps)])


def python_jobs(r: Runner, mode: str, n: int) -> None:
    """Beside the kb_spawn job of the same mode and N: the C loop driven by
    timed kb_join slices (kbthreads_join), then the same loop in Python
    through the binding (kbthreads_py)."""
    p = r.plan
    m = p.m_for(p.kb_ops, n)
    reps = ["--reps", str(p.reps)]
    if r.want("kbthreads", "join", mode):
        r.run("kbthreads %s N=%d join" % (mode, n),
              [r.prog("kb_bench"), mode, "--n", str(n), "--m", str(m), "--join", str(JOIN_SLICE_MS)] + reps)
    binding = r.python_binding()
    if r.want("python", mode) and binding:
        r.run("python %s N=%d" % (mode, n), [r.python, os.path.join(r.py_dir, "py_bench.py"), mode, "--n", str(n),
                                            "--m", str(m), "--lib", binding[0]] + reps + ["--accel", binding[1]])


def spawn_family(r: Runner, n: int) -> None:
    """Cold and repeated spawns at N: unpinned, then the spread option, then pinned."""
    p = r.plan
    k = max(1, p.spawn_budget // n)
    argv = [r.prog("kb_bench"), "spawn", "--n", str(n), "--k", str(k), "--reps", str(p.reps)]
    for tag, extra in (("", []), (" spread", ["--spread"]), (" pinned", ["--pin"])):
        wanted = r.want_spread(n, "spawn") if tag == " spread" else r.want("kbthreads", "spawn")
        if wanted:
            r.run_kb("kbthreads spawn N=%d (K=%d)%s" % (n, k, tag), argv + extra)
