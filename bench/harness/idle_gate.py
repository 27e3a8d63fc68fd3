# SPDX-License-Identifier: MIT
"""The idle gate bench/harness/run.py passes before every job, and the load it reads.

The 1-minute load average is what a user reads, but this suite raises it
itself (a spawn of 4096 yield-looking ranks takes it to 15 within a minute,
and it decays with a 60 s time constant), so waiting for it alone would
stall the run for minutes after every big job. Before each job the gate
reads both the load average and procs_running of /proc/stat (the runnable
tasks right now: the median of 5 samples 10 ms apart, less this script
itself), and lets the job start when the load is at most IDLE_LOAD_PER_CPU
per CPU or nothing else is runnable; otherwise it waits, up to
IDLE_MAX_WAIT seconds per job and IDLE_BUDGET seconds per run. The job
records both. A job that started with the load above the limit while other
tasks were runnable is flagged and measured again (bench/harness/retries.py).
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Dict

IDLE_LOAD_PER_CPU = 0.3
IDLE_MAX_WAIT = 30  # seconds one job may wait for an idle machine
IDLE_BUDGET = 300  # seconds the whole run may spend waiting


def loadavg1() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def procs_running() -> int:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 1


def others_runnable(samples: int = 5, gap: float = 0.01) -> int:
    """Runnable tasks other than this script (median of a few samples)."""
    seen = []
    for i in range(samples):
        if i:
            time.sleep(gap)
        seen.append(procs_running() - 1)
    return max(0, int(statistics.median(seen)))


class IdleGate:
    """Waits, bounded, for an idle machine before a job (enabled: smoke runs
    and --no-idle-wait only record the load); spent: seconds waited so far."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.ncpu = os.cpu_count() or 1
        self.limit = IDLE_LOAD_PER_CPU * self.ncpu
        self.spent = 0.0

    def before_job(self, wait: bool = True) -> Dict[str, Any]:
        """Wait (bounded) for an idle machine; return what the job started on."""
        waited = 0.0  # seconds slept (the sampling itself takes ~40 ms a job)
        while True:
            load, others = loadavg1(), others_runnable(5 if self.enabled else 1)
            idle = load <= self.limit or others == 0
            if (idle or not wait or not self.enabled or waited >= IDLE_MAX_WAIT
                    or self.spent + waited >= IDLE_BUDGET):
                break
            time.sleep(2)
            waited += 2
        self.spent += waited
        return {"load1": round(load, 2), "others_runnable": others, "waited_s": round(waited, 1),
                "started_busy": not idle}

    def params(self) -> Dict[str, Any]:
        """The gate as the results file records it (part of "idle")."""
        return {"load_per_cpu": IDLE_LOAD_PER_CPU, "max_wait_s": IDLE_MAX_WAIT, "budget_s": IDLE_BUDGET,
                "waited_s": round(self.spent, 1), "waiting": self.enabled}
