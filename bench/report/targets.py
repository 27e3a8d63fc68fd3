# SPDX-License-Identifier: MIT
"""Every target the report checks, with its threshold: one data table.

A target names the figures it compares, its limit and how the report states
it; the report's sections (report_floors_peers.py, report_python.py,
report_best_config.py, report_simulation.py, report_load.py) look their
limits up here by key and never hold a threshold of their own. Why a target
is met or missed is hand-written in bench/report/report-notes.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Target:
    key: str
    section: str  # the report section whose verdict table holds it
    limit: float  # the largest value that meets it (a ratio, ns or KiB)
    unit: str  # "x" (a ratio of medians), "ns" or "KiB"
    what: str  # the figures it compares


TARGETS = [
    # Floors and peers (issue 4): the libkbthreads yield loop.
    Target("floor", "floors and peers", 1.25, "x",
           "yield / one handoff of the faster ring (futex, semaphore), same N and pin"),
    Target("simgrid", "floors and peers", 0.25, "x", "yield / SimGrid thread factory's yield, every N"),
    Target("flat", "floors and peers", 1.5, "x", "yield at N=4096 / yield at N=8"),
    Target("spawn_repeat", "floors and peers", 10000.0, "ns", "repeated spawn on one ctx, per rank, every N"),
    Target("mem_idle", "floors and peers", 64.0, "KiB", "resident memory per idle rank at N=4096, default options"),
    Target("spare_yield", "floors and peers", 1000.0, "ns", "yield with a spare CPU (N < CPUs), and below greenlet's"),
    # Python ranks and timed joins (issue 12).
    Target("join_vs_spawn", "Python ranks", 1.1, "x", "C loop driven by timed kb_join slices / kb_spawn, every N"),
    Target("py_vs_greenlet", "Python ranks", 1.0, "x", "Python yield / greenlet's, N = 1, 2"),
    Target("py_vs_c", "Python ranks", 1.3, "x", "Python yield, wait, collective / the C library's"),
    # The default against the best configuration (issue 20).
    Target("default_vs_best", "idle vs best configuration", 1.25, "x",
           "default options / the best of --pin, --spread, taskset, per yield and wait, every N"),
    Target("wait_n1", "idle vs best configuration", 1500.0, "ns", "a wait at N=1, default options"),
    # The simulation-shaped job (issue 20): Python / greenlet, by N (sim_py_N).
    Target("sim_py_1", "simulation", 1.25, "x", "Python simulation / greenlet's at N=1"),
    Target("sim_py_2", "simulation", 1.5, "x", "Python simulation / greenlet's at N=2"),
    Target("sim_py_8", "simulation", 2.5, "x", "Python simulation / greenlet's at N=8"),
    Target("sim_py_64", "simulation", 2.5, "x", "Python simulation / greenlet's at N=64"),
    Target("sim_py_512", "simulation", 2.5, "x", "Python simulation / greenlet's at N=512"),
    # The reactive wait policy (issue 31, report_policy.py): the default
    # against the forced modes and the library's own in the same run.
    Target("policy_idle_forced", "reactive wait policy", 1.15, "x",
           "default / the best forced unpinned mode, idle, yield and wait, 0 and 2 us of work, every N"),
    Target("policy_idle_own", "reactive wait policy", 1.25, "x",
           "default / the best of KB_AFFINITY_ONE_CPU, KB_AFFINITY_SPREAD, taskset -c 0, the same cells"),
    Target("policy_loaded_forced", "reactive wait policy", 1.15, "x",
           "default / the best forced mode, with a CPU hog and two simulations side by side"),
    Target("policy_measuring", "reactive wait policy", 1.03, "x",
           "default / the forced mode it ended in, N = 1, 2, idle"),
    Target("policy_sim_py_1", "reactive wait policy", 1.25, "x", "Python simulation / greenlet's at N=1"),
    Target("policy_sim_py_2", "reactive wait policy", 2.0, "x", "Python simulation / greenlet's at N=2"),
    Target("policy_sim_py_8", "reactive wait policy", 3.0, "x", "Python simulation / greenlet's at N=8"),
    Target("policy_sim_py_64", "reactive wait policy", 3.0, "x", "Python simulation / greenlet's at N=64"),
    Target("policy_sim_py_512", "reactive wait policy", 3.0, "x", "Python simulation / greenlet's at N=512"),
    # A loaded machine (issue 20): the new build against --baseline-bindir's.
    Target("loaded_vs_baseline", "load", 1.0, "x", "new / baseline, with a CPU hog and two side by side"),
]

BY_KEY: Dict[str, Target] = {t.key: t for t in TARGETS}


def limit(key: str) -> float:
    return BY_KEY[key].limit


def sim_py_limits(prefix: str = "sim_py_") -> Dict[int, float]:
    """{N: limit} of the Python simulation against greenlet (issue 20's targets)."""
    return {int(t.key.rsplit("_", 1)[1]): t.limit for t in TARGETS if t.key.startswith(prefix)}


def policy_sim_limits() -> Dict[int, float]:
    """{N: limit} of the Python simulation against greenlet that issue 31 set."""
    return sim_py_limits("policy_sim_py_")
