# SPDX-License-Identifier: MIT
"""The state of one bench/harness/run.py run and its one way to run a job.

Runner.run launches a program behind the idle gate (bench/harness/launch.py),
measures it again while the machine was busy (bench/harness/retries.py), and turns
its output into samples, facts and a job record (bench/harness/aggregate.py). The
job families (bench/harness/jobs_*.py) are functions of a Runner.
"""
from __future__ import annotations

import argparse
import os
import subprocess
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import aggregate
from idle_gate import IdleGate
from plan import Plan
from retries import Retries

HERE = os.path.dirname(os.path.abspath(__file__))
# The interpreter of the Python jobs (the binding's and the greenlet peer's):
# $BENCH_PY_PYTHON, else the test venv's (the top Makefile's `make venv`:
# greenlet 3 from bindings/python/requirements-test.txt, in a venv made by
# Debian's python3, the CPython the binding's compiled part is built for),
# else Debian's python3 with its python3-greenlet (2.0.2 on Debian 12).
# bench/ and the repository root; the Python programs (py_bench.py, peer_greenlet.py) are in bench/python/.
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
PYTHON_DIR = os.path.join(BENCH, "python")
_VENV_PYTHON = os.path.join(ROOT, "build", "venv", "bin", "python")
PYTHON = os.environ.get("BENCH_PY_PYTHON") or (_VENV_PYTHON if os.access(_VENV_PYTHON, os.X_OK)
                                                else "/usr/bin/python3")


def read_paths(path: str) -> Dict[str, str]:
    """A kb_python_paths.txt (library=, binding=, accel=) as a dict; {} when missing."""
    try:
        with open(path) as f:
            return dict(line.strip().split("=", 1) for line in f if "=" in line)
    except OSError:
        return {}


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.plan = Plan(args.smoke, args.reps)
        self.bindir = os.path.abspath(args.bindir)
        self.condvar_bindir = os.path.abspath(args.condvar_bindir) if args.condvar_bindir else None
        self.baseline_bindir = os.path.abspath(args.baseline_bindir) if args.baseline_bindir else None
        self.only = args.only
        self.samples: List[aggregate.Sample] = []
        self.info: Dict[str, str] = {}
        self.notes: List[str] = []
        self.failures: List[str] = []
        self.jobs: List[Dict[str, Any]] = []
        # Smoke runs record the load but never wait for it (CI).
        self.gate = IdleGate(enabled=not args.smoke and not args.no_idle_wait)
        self.retries = Retries(args.retry_busy, args.retry_budget)
        self.sim_checksums: Dict[str, Dict[str, str]] = {}  # str(N) -> {impl: "N:M:checksum:events"}
        self.maxn_result: Optional[Dict[str, Any]] = None
        self.policy: List[Dict[str, Any]] = []  # bench/harness/jobs_policy.py's cells
        self.py_paths: Dict[str, str] = {}
        self.greenlet_ok = False
        self.python = PYTHON
        self.py_dir = PYTHON_DIR  # the Python programs' folder

    def want(self, *words: str) -> bool:
        return not self.only or any(w in self.only for w in words)

    def want_spread(self, n: int, *words: str) -> bool:
        """Run the --spread job of this family at this N? (--only spread: every spread job.)"""
        return n in self.plan.spread_ns and self.want("kbthreads", "spread", *words)

    def prog(self, name: str) -> str:
        return os.path.join(self.bindir, name)

    def have(self, name: str) -> bool:
        return os.access(self.prog(name), os.X_OK)

    def run_kb(self, label: str, argv: List[str]) -> None:
        """A kb_bench job, then (--condvar-bindir) the same job on the condvar baton."""
        self.run(label, argv)
        if self.condvar_bindir:
            self.run(label + " condvar", [os.path.join(self.condvar_bindir, "kb_bench")] + argv[1:])

    def run(self, label: str, argv: Sequence[str], ok_codes: Sequence[Any] = (0,), quiet_fail: bool = False,
            timing: bool = True, rename: Optional[Dict[str, str]] = None,
            preexec_fn: Optional[Callable[[], None]] = None, copies: int = 1,
            deliberate: Optional[str] = None) -> Tuple[Any, List[Tuple[str, str]]]:
        """Run one program (copies > 1: that many started together) and keep
        its figures; (exit status, its KBI facts). timing=False: not timed
        (never retried nor flagged). rename: impl names of its figures to
        change. deliberate ("hog" or "pair"): a section that loads the
        machine on purpose: never retried nor flagged; "hog" starts without
        waiting for the gate. quiet_fail: a failure is printed, not counted."""
        a, attempts = self.retries.measure(self.gate, label, argv, ok_codes, timing, deliberate, copies,
                                           preexec_fn, self.plan.timeout)
        flag = "" if deliberate else "; ".join(a.flags)
        self.jobs.append(aggregate.job_record(label, a, attempts, copies, deliberate, flag))
        samples, kbi = aggregate.parse_output(a, bool(flag), rename)
        self.samples += samples
        # Facts of the run come from its own programs, not a renamed (baseline) job's.
        if not rename:
            self.info.update((k, v) for k, v in kbi if k not in ("maxn_try", "sim_checksum"))
        self.print_outcome(label, a, ok_codes, quiet_fail, flag)
        return a.rc, kbi

    def print_outcome(self, label: str, a: Any, ok_codes: Sequence[Any], quiet_fail: bool, flag: str) -> None:
        """One line per job; a failure's last lines of stderr (counted unless quiet_fail)."""
        if a.rc in ok_codes:
            print("  %-48s %6.2fs  others %3.0f%%  load %.2f  cpu %.2fs%s" % (
                label, a.elapsed, 100 * a.share, a.start["load1"], a.cpu_s, "  FLAGGED: " + flag if flag else ""),
                flush=True)
            return
        err = next((e for r, _, e in a.outs if r not in ok_codes), "")
        tail = " | ".join(err.strip().splitlines()[-3:])
        if not quiet_fail:
            self.failures.append("%s: exit %s: %s" % (label, a.rc, tail))
        print("  FAILED %s (exit %s) %s" % (label, a.rc, tail), flush=True)

    def detect_peers(self) -> None:
        """Which of the Python binding, greenlet and SimGrid this run can measure (notes for the others)."""
        paths_file = self.prog("kb_python_paths.txt")
        self.py_paths = read_paths(paths_file)
        if not self.py_paths:
            self.notes.append("Python binding figures skipped: %s not found (build with bench/CMakeLists.txt)"
                              % paths_file)
        elif not self.py_paths.get("accel"):
            self.notes.append("the Python binding's compiled part was not built (python3-dev missing): "
                              "no Python figures")
        if not os.access(PYTHON, os.X_OK):
            self.notes.append("greenlet peer skipped: %s not found" % PYTHON)
        elif subprocess.run([PYTHON, "-c", "import greenlet"], capture_output=True).returncode != 0:
            self.notes.append("greenlet peer skipped: python3-greenlet is not installed for %s "
                              "(make venv, or apt-get install python3-greenlet)" % PYTHON)
        else:
            self.greenlet_ok = True
        if not self.have("kb_peer_simgrid"):
            self.notes.append("SimGrid peer skipped: kb_peer_simgrid was not built (libsimgrid-dev or a C++ "
                              "compiler missing at configure time: apt-get install libsimgrid-dev g++)")

    def python_binding(self) -> Optional[Tuple[str, str]]:
        """(library, accel) of this build's Python binding, or None when it cannot run."""
        lib, accel = self.py_paths.get("library"), self.py_paths.get("accel")
        return (lib, accel) if lib and accel else None

    def baseline_python(self) -> Optional[Tuple[str, str, str]]:
        """(library, accel, binding folder) of the --baseline-bindir build's Python binding, or None."""
        if not self.baseline_bindir:
            return None
        paths = read_paths(os.path.join(self.baseline_bindir, "kb_python_paths.txt"))
        if not paths.get("library") or not paths.get("binding") or not paths.get("accel"):
            return None
        return paths["library"], paths["accel"], paths["binding"]
