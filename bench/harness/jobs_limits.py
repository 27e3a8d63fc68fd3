# SPDX-License-Identifier: MIT
"""The memory jobs of bench/harness/run.py: memory per idle rank (one process per
repetition) and the largest N whose spawn runs."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from machine import read_first, system_threads
from plan import SMALL_STACK
from runner import Runner

MAXN_START = 4096
MAXN_HEADROOM = 2048  # pids left to the machine's other processes
MAXN_RESOLUTION = 1024  # the bisection stops when the bracket is this narrow


def memory(r: Runner) -> None:
    p = r.plan
    if not r.want("kbthreads", "mem"):
        return
    for stack in (0, SMALL_STACK):
        for rep in range(p.reps):
            r.run("kbthreads memory N=%d stack=%s (%d/%d)" % (p.mem_n, stack or "default", rep + 1, p.reps),
                  [r.prog("kb_bench"), "mem", "--n", str(p.mem_n), "--stack", str(stack)])


def os_limit() -> int:
    """The most threads the kernel allows the machine (every rank is a thread)."""
    try:
        pid_max = int(read_first("/proc/sys/kernel/pid_max"))
        threads_max = int(read_first("/proc/sys/kernel/threads-max"))
        maps = int(read_first("/proc/sys/vm/max_map_count"))
    except ValueError:
        pid_max = threads_max = maps = 1 << 22
    return min(pid_max, threads_max, maps // 2)


def try_n(r: Runner, n: int, stack: int, tried: List[Dict[str, Any]]) -> bool:
    """One spawn of N ranks that each yield once (exit 3: it did not fit); recorded in tried."""
    rc, kbi = r.run("kbthreads maxn try N=%d stack=%s" % (n, stack or "default"),
                    [r.prog("kb_bench"), "maxn", "--n", str(n), "--stack", str(stack)], ok_codes=(0, 3), timing=False)
    detail = next((v for k, v in kbi if k == "maxn_try"), "exit %s" % rc)
    tried.append({"n": n, "ok": rc == 0, "detail": detail})
    return rc == 0


def search(r: Runner, stack: int, cap: int, tried: List[Dict[str, Any]]) -> Tuple[int, Optional[int]]:
    """(largest N that ran, first N that failed or None): doubling from
    MAXN_START up to cap, then bisecting; a smoke run tries 1024 once."""
    if r.plan.smoke:
        return (1024, None) if try_n(r, 1024, stack, tried) else (0, 1024)
    lo, hi, n = 0, None, MAXN_START
    while True:
        if not try_n(r, n, stack, tried):
            hi = n
            break
        lo = n
        if n >= cap:
            break
        n = min(cap, n * 2)
    while hi is not None and hi - lo > MAXN_RESOLUTION:
        mid = (lo + hi) // 2 // 256 * 256
        if try_n(r, mid, stack, tried):
            lo = mid
        else:
            hi = mid
    return lo, hi


def maxn(r: Runner) -> None:
    """The largest N whose spawn runs, per stack size, up to a cap that
    leaves pids for the rest of the machine (the kernel's pid_max is the
    usual limit here: every rank is a thread)."""
    if not r.want("kbthreads", "maxn") or r.args.no_maxn:
        return
    limit = os_limit()
    cap = max(MAXN_START, min(r.args.maxn_cap, limit - system_threads() - MAXN_HEADROOM))
    result: Dict[str, Any] = {"cap": cap, "os_limit": limit, "headroom": MAXN_HEADROOM, "by_stack": {}}
    for stack in (0, SMALL_STACK):
        impl = "kbthreads" if stack == 0 else "kbthreads-stack%dk" % (stack // 1024)
        tried: List[Dict[str, Any]] = []
        lo, hi = search(r, stack, cap, tried)
        result["by_stack"][impl] = {"largest_ok": lo, "first_failed": hi, "tries": tried,
                                    "capped": hi is None and not r.plan.smoke}
        if lo:
            r.samples.append({"bench": "maxn", "impl": impl, "pin": 0, "n": lo, "value": float(lo),
                              "unit": "ranks", "ops": 1})
    r.maxn_result = result
