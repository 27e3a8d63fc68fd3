# SPDX-License-Identifier: MIT
"""The CPU time around a job of bench/harness/run.py: the machine's busy time (from
/proc/stat), the hypervisor's steal, and this process's with its
waited-for children (getrusage), so that what other processes took while a
job ran is the machine's busy time less the job's own.
"""
from __future__ import annotations

import os
import resource
from typing import NamedTuple


class CpuTimes(NamedTuple):
    busy: float  # seconds the whole machine was busy (user, nice, system, irq, softirq)
    steal: float  # seconds the hypervisor took
    mine: float  # CPU seconds of this process and its waited-for children


def cpu_times() -> CpuTimes:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    tck = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return CpuTimes((user + nice + system + irq + softirq) / tck, steal / tck, mine)


def others_share(before: CpuTimes, after: CpuTimes, elapsed: float) -> float:
    """The share of the machine's CPU time that other processes (or the
    hypervisor, as steal) took while a job ran: 0 = a quiet machine."""
    busy = (after.busy - before.busy) - (after.mine - before.mine)
    steal = after.steal - before.steal
    total = elapsed * (os.cpu_count() or 1)
    return max(0.0, min(1.0, (busy + steal) / total)) if total > 0 else 0.0
