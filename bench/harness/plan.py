# SPDX-License-Identifier: MIT
"""How much work each job of bench/harness/run.py does, and at which N.

Every budget is an operation count per repetition, scaled down 20x for a
smoke run; a loop's M (operations per rank) is its budget spread over the N
ranks, so a figure costs about the same wall time at every N and the full
run stays within ~15-25 minutes on 2 CPUs.
"""
from __future__ import annotations

import math
from typing import Dict, List

NS_FULL = [1, 2, 8, 64, 512, 4096]
NS_SMOKE = [1, 8, 64]
# The smoke run exercises --spread (and the best-of-configurations jobs) at
# this N only: more ranks than CPUs, so handoffs cross CPUs and the holder
# after next is woken.
SPREAD_SMOKE_N = 8
SMALL_STACK = 64 * 1024
# The simulation-shaped job and the deliberately loaded sections (hog, pair).
SIM_NS_FULL = [1, 2, 8, 64, 512]
SIM_NS_SMOKE = [1, 8]
LOADED_NS_FULL = [1, 2, 8, 64]
LOADED_NS_SMOKE = [8]
# Operations (waits + collectives + yields) per repetition of the sim job.
SIM_OPS_FULL = 12000
SIM_OPS_SMOKE = 600
SIM_OPS_PER_STEP = 6
# The depth job (issue 30): the yield loop of N ranks suspended D levels deep
# in C, greenlet against the binding. Up to 400 levels: the greenlet
# cost was still climbing there; smoke: one shallow and one deep nest.
DEPTH_N = 8
DEPTHS_FULL = [0, 10, 50, 100, 150, 200, 300, 400]
DEPTHS_SMOKE = [0, 50]
# The wait-policy jobs (issue 31, bench/harness/jobs_policy.py): work in ns before
# each suspension point, and processes per configuration and cell
# (interleaved: five, since three processes of one configuration differed
# by 100-230% at 64-512 ranks in the run of 2026-12-03), each of
# POLICY_REPS repetitions.
POLICY_WORKS = [0, 2000]
POLICY_PROCESSES_FULL = 5
POLICY_REPS_FULL = 3
POLICY_NS_SMOKE = [8]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Plan:
    """How much work each repetition does (ops per repetition), and the Ns."""

    def __init__(self, smoke: bool, reps: int) -> None:
        self.smoke = smoke
        self.reps = reps if reps else (2 if smoke else 7)
        self.ns = NS_SMOKE if smoke else NS_FULL
        # The Ns of the --spread jobs (the same repetitions and work as the
        # unpinned ones), and of the taskset and pinned-wait jobs.
        self.spread_ns = [SPREAD_SMOKE_N] if smoke else list(self.ns)
        self.sim_ns = SIM_NS_SMOKE if smoke else SIM_NS_FULL
        self.loaded_ns = LOADED_NS_SMOKE if smoke else LOADED_NS_FULL
        s = 0.05 if smoke else 1.0  # scale of every budget
        self.kb_ops = max(200, int(40000 * s))  # yields per repetition (~5 us each)
        self.ring_ops = max(200, int(40000 * s))  # handoffs per repetition
        self.cond_budget = max(400, int(60000 * s))  # cond handoffs x ring size
        self.swap_ops = max(1000, int(500000 * s))
        self.greenlet_ops = max(500, int(100000 * s))
        self.simgrid_ops = {"thread": max(200, int(20000 * s)), "raw": max(2000, int(200000 * s))}
        self.spawn_budget = max(64, int(4000 * s))  # rank spawns per repetition
        # Yields per repetition of the depth job, the same for both schedulers
        # (~4 us each through the binding, up to ~15 us for greenlet at D=400:
        # about 20 s for the whole job in a full run).
        self.depth_ops = max(400, int(40000 * s))
        self.depths = DEPTHS_SMOKE if smoke else DEPTHS_FULL
        self.depth_n = DEPTH_N
        # The wait-policy jobs: about 60 ms per repetition at 5 us per operation.
        self.policy_works = POLICY_WORKS
        self.policy_ns = POLICY_NS_SMOKE if smoke else list(self.ns)
        self.policy_ops = max(600, int(12000 * s))
        self.policy_reps = 2 if smoke else POLICY_REPS_FULL
        self.policy_processes = 1 if smoke else POLICY_PROCESSES_FULL
        self.mem_n = 256 if smoke else 4096
        self.timeout = 120 if smoke else 600

    def m_for(self, ops: int, n: int, floor: int = 4) -> int:
        return max(floor, ceil_div(ops, n))

    def cond_handoffs(self, n: int) -> int:
        return max(16 if not self.smoke else 4, min(self.ring_ops, self.cond_budget // max(n, 2)))

    def sim_m(self, n: int) -> int:
        """Steps per repetition of the sim job at N (the same for C, Python and
        greenlet: the checksum covers the whole repetition)."""
        ops = SIM_OPS_SMOKE if self.smoke else SIM_OPS_FULL
        return max(4, math.ceil(ops / (SIM_OPS_PER_STEP * n)))

    def params(self) -> Dict[str, object]:
        """The plan as the results file records it ("params")."""
        return {
            "reps": self.reps, "ns": self.ns, "spread_ns": self.spread_ns, "kb_ops": self.kb_ops,
            "ring_ops": self.ring_ops, "cond_budget": self.cond_budget, "greenlet_ops": self.greenlet_ops,
            "simgrid_ops": self.simgrid_ops, "spawn_budget": self.spawn_budget, "mem_n": self.mem_n,
            "small_stack": SMALL_STACK, "swap_ops": self.swap_ops,
            "depth": {"n": self.depth_n, "depths": self.depths, "ops": self.depth_ops,
                      "m": self.m_for(self.depth_ops, self.depth_n)},
            "policy": {"works": self.policy_works, "ns": self.policy_ns, "ops": self.policy_ops,
                       "reps": self.policy_reps, "processes": self.policy_processes},
        }

    def sim_params(self) -> Dict[str, object]:
        """The sim job's Ns and steps as the results file records them (part of "sim")."""
        ns: List[int] = self.sim_ns
        return {"ns": ns, "loaded_ns": self.loaded_ns, "m": {str(n): self.sim_m(n) for n in ns},
                "ops_per_step": SIM_OPS_PER_STEP}
