# SPDX-License-Identifier: MIT
"""The jobs of bench/harness/run.py that load the machine on purpose: the default
yield and wait loops beside a CPU hog, and two simulations side by side,
each against the --baseline-bindir build when given. They are neither
retried nor flagged (bench/harness/retries.py: deliberate)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Dict, List, Tuple

from jobs_sim import py_sim_argv, sim_argv
from runner import Runner


def other_cpu() -> int:
    """The CPU the hog runs on: the last one this process may use (the
    taskset jobs use the first)."""
    return max(os.sched_getaffinity(0))


class Hog:
    """A busy loop (/bin/sh `while :; do :; done`) pinned to other_cpu(),
    started before a job and stopped (by its pid) after it."""

    def __init__(self) -> None:
        self.cpu = other_cpu()
        self.p: "subprocess.Popen[bytes] | None" = None

    def __enter__(self) -> "Hog":
        cpu = self.cpu
        self.p = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"],
                                  preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        time.sleep(0.3)  # let it take its CPU before the job starts
        return self

    def __exit__(self, *exc: object) -> bool:
        assert self.p is not None
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        return False


def hog_section(r: Runner) -> None:
    """Default yield and wait jobs with a busy loop pinned to the other CPU,
    the baseline build's beside them (impls kbthreads_hog, kbthreads_baseline_hog)."""
    if not r.want("hog"):
        return
    p = r.plan
    builds = [(r.bindir, "kbthreads_hog", "")]
    if r.baseline_bindir:
        builds.append((r.baseline_bindir, "kbthreads_baseline_hog", " baseline"))
    r.gate.before_job()  # an idle machine before the hog starts
    with Hog():
        for n in p.loaded_ns:
            for mode in ("yield", "wait"):
                m = p.m_for(p.kb_ops, n)
                for prog_dir, impl, tag in builds:
                    r.run("hog: kbthreads %s N=%d%s" % (mode, n, tag),
                          [os.path.join(prog_dir, "kb_bench"), mode, "--n", str(n), "--m", str(m), "--reps",
                           str(p.reps)], rename={"kbthreads": impl}, deliberate="hog", quiet_fail=bool(tag))


def pair_jobs(r: Runner, n: int) -> List[Tuple[str, List[str], Dict[str, str]]]:
    """(label, argv, rename) of the side-by-side jobs at N."""
    m = r.plan.sim_m(n)
    jobs = [("C sim N=%d" % n, sim_argv(r, r.bindir, n, m), {"kbthreads": "kbthreads_pair"})]
    if r.baseline_bindir:
        jobs.append(("C sim N=%d baseline" % n, sim_argv(r, r.baseline_bindir, n, m),
                     {"kbthreads": "kbthreads_baseline_pair"}))
    binding = r.python_binding()
    if binding:
        jobs.append(("python sim N=%d" % n, py_sim_argv(r, n, m, *binding), {"kbthreads_py": "kbthreads_py_pair"}))
    base = r.baseline_python()
    if base:
        jobs.append(("python sim N=%d baseline" % n, py_sim_argv(r, n, m, *base, impl="kbthreads_py_baseline"),
                     {"kbthreads_py_baseline": "kbthreads_py_baseline_pair"}))
    return jobs


def pair_section(r: Runner) -> None:
    """Two copies of the sim job started together (C; Python through the
    binding), the baseline build's beside them (impls *_pair)."""
    if not r.want("pair"):
        return
    for n in r.plan.loaded_ns:
        for label, argv, rename in pair_jobs(r, n):
            r.run("pair: " + label, argv, copies=2, rename=rename, deliberate="pair", quiet_fail="baseline" in label)

