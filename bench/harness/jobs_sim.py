# SPDX-License-Identifier: MIT
"""The simulation-shaped job of bench/harness/run.py (kb_sim.c, sim_model.py) in C,
in Python through the binding (also under each mode KB_WAIT_POLICY forces)
and on greenlet, each against the
--baseline-bindir build when given; the checksums of one N must agree."""
from __future__ import annotations

import os
from typing import List, Optional, Sequence, Tuple

from runner import Runner


def sim_argv(r: Runner, prog_dir: str, n: int, m: int) -> List[str]:
    return [os.path.join(prog_dir, "kb_bench"), "sim", "--n", str(n), "--m", str(m), "--reps", str(r.plan.reps)]


def py_sim_argv(r: Runner, n: int, m: int, lib: str, accel: str, binding: Optional[str] = None,
                impl: Optional[str] = None) -> List[str]:
    argv = [r.python, os.path.join(r.py_dir, "py_bench.py"), "sim", "--n", str(n), "--m", str(m),
            "--reps", str(r.plan.reps), "--lib", lib, "--accel", accel]
    if binding and impl:
        argv += ["--binding", binding, "--impl", impl]
    return argv


def record_checksum(r: Runner, impl: str, n: int, kbi: Sequence[Tuple[str, str]]) -> None:
    for key, value in kbi:
        if key == "sim_checksum":
            r.sim_checksums.setdefault(str(n), {})[impl] = value


# The modes KB_WAIT_POLICY can force (docs/design.md, the wait policy).
FORCED_MODES = ("look", "nudge", "sleep", "spin")


def python_forced_modes(r: Runner, n: int, m: int, binding: Tuple[str, str]) -> None:
    """The Python job under each mode KB_WAIT_POLICY forces (impl
    kbthreads_py_<mode>; spin only where every rank has a CPU): the best of
    them bounds what any wait policy can give against greenlet."""
    for mode in FORCED_MODES:
        if mode == "spin" and n >= len(os.sched_getaffinity(0)):
            continue
        r.run("sim N=%d python %s" % (n, mode), ["env", "KB_WAIT_POLICY=" + mode] + py_sim_argv(r, n, m, *binding),
              rename={"kbthreads_py": "kbthreads_py_" + mode})


def sim_family(r: Runner, n: int) -> None:
    """The sim job at N: C (the baseline build's beside it), Python through
    the binding (the baseline's binding too), the greenlet peer; the same M
    for all, so the checksums compare."""
    if not r.want("sim"):
        return
    m = r.plan.sim_m(n)
    _, kbi = r.run("sim N=%d C" % n, sim_argv(r, r.bindir, n, m))
    record_checksum(r, "kbthreads", n, kbi)
    if r.baseline_bindir:
        _, kbi = r.run("sim N=%d C baseline" % n, sim_argv(r, r.baseline_bindir, n, m),
                       rename={"kbthreads": "kbthreads_baseline"}, quiet_fail=True)
        record_checksum(r, "kbthreads_baseline", n, kbi)
    binding = r.python_binding()
    if binding:
        _, kbi = r.run("sim N=%d python" % n, py_sim_argv(r, n, m, *binding))
        record_checksum(r, "kbthreads_py", n, kbi)
        python_forced_modes(r, n, m, binding)
    base = r.baseline_python()
    if base:
        _, kbi = r.run("sim N=%d python baseline" % n, py_sim_argv(r, n, m, *base, impl="kbthreads_py_baseline"),
                       quiet_fail=True)
        record_checksum(r, "kbthreads_py_baseline", n, kbi)
    if r.greenlet_ok:
        _, kbi = r.run("sim N=%d greenlet" % n, [r.python, os.path.join(r.py_dir, "peer_greenlet.py"), "sim", "--n",
                                                 str(n), "--m", str(m), "--reps", str(r.plan.reps)])
        record_checksum(r, "greenlet", n, kbi)


def check_checksums(r: Runner) -> List[int]:
    """Every scheduler must have seen the same event order at each N: the Ns where they did not."""
    bad = []
    for n, by_impl in sorted(r.sim_checksums.items(), key=lambda kv: int(kv[0])):
        if len(set(by_impl.values())) > 1:
            bad.append(int(n))
            r.failures.append("sim N=%s: the event order differs between schedulers: %s" % (
                n, ", ".join("%s %s" % kv for kv in sorted(by_impl.items()))))
    return bad
