# SPDX-License-Identifier: MIT
"""The program test_fault_injection.py runs on the fault-injection variant of
the compiled part (fault_accel.cmake, fault_seams.c), in a process of its own:

    KBTHREADS_ACCEL=<build>/bindings/python/fault/kbthreads/_accel*.so python3 fault_sweep.py

For each kind of call (library: the library's allocations, its KB_FAULT_ALLOC
seam; python: the allocations the extension makes through Python's
allocators, fault_seams.c says which; thread: pthread_create; sync: the
library's mutex and condition variable set-up), on a warm context (its
threads and queues made by earlier spawns) and on a cold one (new), for nth
= 1, 2, ... until a spawn no longer reaches its nth call of that kind: one
spawn with that call failing, then the next spawn on the same context with
nothing failing. Prints one JSON object: per sweep and nth, what the failing
spawn raised (and where the extension's failed allocation was made), the
threads left, whether the next spawn worked and the reference counts were
kept; and the memory measured over further sweeps (the C heap, Python's
allocated blocks and objects, tracemalloc)."""
from __future__ import annotations

import ctypes
import errno
import gc
import json
import os
import subprocess
import sys
import tracemalloc

import kbthreads
from kbthreads import _loader

# the kinds of call, as fault_seams.c numbers them: KB_FAULT_ALLOC, KBPYFAULT_PYTHON,
# KB_FAULT_THREAD, KB_FAULT_SYNC
KINDS = {"library": 0, "python": 100, "thread": 1, "sync": 2}
NPROCS = 4
MAX_NTH = 5000


class mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = mallinfo2
seams = ctypes.CDLL(_loader.accel.__file__)
seams.kbpyfault_calls.restype = ctypes.c_long
seams.kbpyfault_arm.argtypes = [ctypes.c_int, ctypes.c_long]
seams.kbpyfault_calls.argtypes = [ctypes.c_int]
seams.kbpyfault_site.restype = ctypes.c_long


class Engine:
    def __init__(self):
        self.waits = 0

    def wait(self, h, meta=None):
        self.waits += 1


class Barrier:
    def reset(self):
        pass


class Backend:
    def __init__(self):
        self._pending_collective_handles = []
        self._barrier = Barrier()


class Distributed:
    def __init__(self):
        self._backend = Backend()
        self.bound = {}

    def _bind_rank(self, rank_object, r):
        self.bound[r] = rank_object


META = {"kind": "all_reduce", "bytes": 64}
ENGINE = Engine()
ctx = kbthreads.Context(ENGINE, Distributed())  # the warm context: every sweep's spawns after its warm-up
cur = ctx  # the context the ranks use
done: list = []


def rank_main(r, tag):
    """Every suspension point and queue of the library: a worker wait, a
    collective as the reference submits it, the fast path, a barrier, a
    yield."""
    cur.wait(("w", tag, r))
    cur.pending_collectives.append((("c", tag), r, META))
    cur.wait(("c", tag))
    cur._completed.add(("done", tag, r))
    cur.wait(("done", tag, r))
    kbthreads.barrier()
    kbthreads.yield_()
    done.append(r)


ARGS = ("t",)
unraisable: list = []  # what sys.unraisablehook received (main)


def prepare(c) -> None:
    global cur
    cur = c
    done.clear()
    c.reset()  # the same handles every time: the same allocations


def threads() -> int:
    """This process's threads (the main one and the contexts' rank threads)."""
    return len(os.listdir("/proc/self/task"))


def names_memory(e: BaseException, seen=None) -> bool:
    """Does the exception say that memory ran out: a MemoryError, a KbError
    with ENOMEM, a SpawnException whose message, rank errors or drain error
    say it, or one whose cause does?"""
    seen = seen or set()
    if e is None or id(e) in seen:
        return False
    seen.add(id(e))
    if isinstance(e, MemoryError):
        return True
    if isinstance(e, kbthreads.KbError) and e.code == -errno.ENOMEM:
        return True
    if isinstance(e, kbthreads.SpawnException):
        if "memory" in str(e).lower():
            return True
        if any(names_memory(x, seen) for x in e.errors.values()) or names_memory(e.drain_error, seen):
            return True
    return names_memory(e.__cause__, seen) or names_memory(e.__context__, seen)


def refcounts(c) -> list[int]:
    return [sys.getrefcount(x) for x in (rank_main, ARGS, META, ENGINE, c.distributed, c)]


def one(kind: int, nth: int, cold: bool) -> dict | None:
    """A spawn with the nth allocation of kind failing, then a plain spawn
    on the same context; None when the spawn made fewer than nth such
    allocations. cold: on a new context (its first spawn creates the
    threads and grows the queues), closed after; else on the warm one."""
    global ctx
    c = kbthreads.Context(ENGINE, Distributed()) if cold else ctx
    try:
        prepare(c)
    except kbthreads.KbthreadsError:
        # the last failure left the warm context unusable (its next spawn
        # failed, and the test of that says so): go on with a new one
        ctx = c = kbthreads.Context(ENGINE, Distributed())
        prepare(c)
    gc.collect()
    before = refcounts(c)
    unraisable.clear()
    seams.kbpyfault_arm(kind, nth)
    raised = None
    try:
        c.spawn(rank_main, ARGS, NPROCS)
    except BaseException as e:  # noqa: BLE001 - what it raises is what we look at
        raised = {"type": type(e).__name__, "message": str(e)[:300], "names_memory": names_memory(e),
                  "kbthreads_error": isinstance(e, kbthreads.KbthreadsError)}
        del e
    calls = seams.kbpyfault_calls(kind)
    seams.kbpyfault_arm(kind, 0)
    result = {"nth": nth, "raised": raised, "ranks_done": sorted(done), "threads_after": threads(),
              "unraisable": list(unraisable)}
    if kind == KINDS["python"]:
        result["site"] = seams.kbpyfault_site()
    try:
        prepare(c)
        c.spawn(rank_main, ARGS, NPROCS)
        result["next_spawn"] = sorted(done) == list(range(NPROCS))
    except BaseException as e:  # noqa: BLE001
        result["next_spawn"] = f"{type(e).__name__}: {e}"
    gc.collect()
    after = refcounts(c)
    result["refcounts_kept"] = after == before or [before, after]
    if cold:
        prepare(ctx)
        try:
            c.close()
        except kbthreads.KbthreadsError as e:
            result["close"] = f"{type(e).__name__}: {e}"
        del c
        result["threads_after_close"] = threads()
    return result if calls >= nth else None


def sweep(kind: int, cold: bool) -> list[dict]:
    out = []
    for nth in range(1, MAX_NTH + 1):
        r = one(kind, nth, cold)
        if r is None:
            return out
        out.append(r)
    raise SystemExit(f"more than {MAX_NTH} allocations of kind {kind} in one spawn")


def name_sites(results: list[dict]) -> None:
    """Each result's site (an offset in the compiled part) as the function,
    file and line of the call that allocated (addr2line, from binutils)."""
    offsets = [r["site"] for r in results if "site" in r]
    if not offsets:
        return
    try:
        p = subprocess.run(["addr2line", "-f", "-s", "-e", _loader.accel.__file__] + [hex(o) for o in offsets],
                           capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return
    lines = p.stdout.splitlines()
    named = {o: f"{lines[2 * i]} ({lines[2 * i + 1]})" for i, o in enumerate(offsets)}
    for r in results:
        if "site" in r:
            r["site"] = named[r["site"]]


def memory() -> dict:
    gc.collect()
    return {"blocks": sys.getallocatedblocks(), "objects": len(gc.get_objects()),
            "malloc_in_use": libc.mallinfo2().uordblks}


# What is swept: (kind, cold). A warm context creates no thread and no
# mutex in a spawn; a cold one (new) does.
PLAN = [("library", False), ("library", True), ("python", False), ("python", True), ("thread", True),
        ("sync", True)]


def run_plan() -> dict:
    return {f"{name} {'cold' if cold else 'warm'}": sweep(KINDS[name], cold) for name, cold in PLAN}


def main() -> None:
    assert seams.kbpyfault_install() == 0
    # What the compiled part reports as unraisable (an engine hook that
    # could not run because Python ran out of memory: the drain then fails
    # with KB_ENOMEM), recorded instead of printed: printing a traceback
    # makes a text file object, whose codec lookups leave a new string in
    # CPython 3.11's method cache each time (bounded by its size, but seen
    # by tracemalloc).
    sys.unraisablehook = lambda u: unraisable.append(type(u.exc_value).__name__)
    for _ in range(3):  # warm-up: threads, caches, the wait policy's rank counts
        prepare(ctx)
        ctx.spawn(rank_main, ARGS, NPROCS)
    report = {"nprocs": NPROCS, "threads_idle": threads()}
    report["sweeps"] = run_plan()  # checked
    for results in report["sweeps"].values():
        name_sites(results)
    # Measured: the same sweeps again, their results dropped, after one more
    # (the first ones warmed the caches the failure paths use, and the
    # context keeps its last spawn's state): the C heap, the allocated
    # blocks and the objects over two; then, under tracemalloc, after one
    # more (what tracemalloc sees first includes what was made before it
    # started and made again), over one and over the next one.
    run_plan()
    before = memory()
    run_plan()
    run_plan()
    after = memory()
    own = [tracemalloc.Filter(False, tracemalloc.__file__, all_frames=True)]  # its snapshots
    tracemalloc.start(16)
    run_plan()
    windows = []
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces(own)
    for _ in range(2):
        run_plan()
        gc.collect()
        now = tracemalloc.take_snapshot().filter_traces(own)
        diff = now.compare_to(snap, "traceback")
        windows.append({"growth": sum(g.size_diff for g in diff),
                        "at": ["\n".join(g.traceback.format()[-6:]) + f"\n  {g.size_diff:+} B" for g in diff[:6]]})
        del now, diff
        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces(own)  # with the record just made
    tracemalloc.stop()
    report["memory"] = {"before": before, "after": after, "traced": windows,
                        "failures_per_pass": sum(len(v) for v in report["sweeps"].values())}
    prepare(ctx)
    ctx.close()
    report["threads_after_close"] = threads()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
