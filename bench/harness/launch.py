# SPDX-License-Identifier: MIT
"""Launching one job of bench/harness/run.py: the idle gate first, then the
program (or several copies started together), with the machine's CPU time
read around it.

An Attempt is one such launch: its outputs, its wall time, the share of the
CPUs other processes took meanwhile, the job's own CPU time, the load it
started on, and the flags that make it a busy measurement.
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from bench_shared import BUSY_SHARE
from cpu_accounting import cpu_times, others_share
from idle_gate import IdleGate

# (exit status or "timeout", stdout, stderr) of one process.
Output = Tuple[Any, str, str]


def launch(argv: Sequence[str], copies: int, preexec_fn: Optional[Callable[[], None]],
           timeout: float) -> List[Output]:
    """Start copies of argv together; [(rc, stdout, stderr)] once all ended."""
    procs = [subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=preexec_fn) for _ in range(copies)]
    deadline = time.monotonic() + timeout
    outs: List[Output] = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            outs.append((p.returncode, out, err))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            outs.append(("timeout", out or "", "timed out after %ss" % timeout))
    return outs


@dataclass
class Attempt:
    outs: List[Output]
    rc: Any  # the first status not in ok_codes, else the first copy's
    elapsed: float
    share: float  # others' share of the CPUs while it ran
    cpu_s: float  # the job's own CPU seconds
    start: Dict[str, Any]  # IdleGate.before_job's record
    flags: List[str] = field(default_factory=list)  # why it counts as busy (timing jobs only)

    @property
    def score(self) -> float:
        """Lower is quieter: the others' share, plus 1 for a busy start."""
        return self.share + (1.0 if self.start["started_busy"] else 0.0)


def attempt(gate: IdleGate, argv: Sequence[str], ok_codes: Sequence[Any], timing: bool, wait: bool,
            copies: int, preexec_fn: Optional[Callable[[], None]], timeout: float) -> Attempt:
    """One launch behind the idle gate, with what the machine did meanwhile."""
    start = gate.before_job(wait=wait)
    before = cpu_times()
    t0 = time.monotonic()
    outs = launch(argv, copies, preexec_fn, timeout)
    elapsed = time.monotonic() - t0
    after = cpu_times()
    share = others_share(before, after, elapsed)
    rc = next((r for r, _, _ in outs if r not in ok_codes), outs[0][0])
    a = Attempt(outs, rc, elapsed, share, after.mine - before.mine, start)
    if timing and share > BUSY_SHARE:
        a.flags.append("others used %.0f%% of the CPUs" % (100 * share))
    if timing and start["started_busy"]:
        a.flags.append("started at load %.2f with %d other task(s) runnable"
                       % (start["load1"], start["others_runnable"]))
    return a
