# SPDX-License-Identifier: MIT
"""Measuring a job again when the machine was busy (bench/harness/run.py
--retry-busy, --retry-budget).

A timing job measured on a busy machine (others took more than BUSY_SHARE
of the CPUs) or started on one (the load above the idle gate's limit with
other tasks runnable) is run again after a pause, up to `times` more times
while the run's budget lasts, and the attempt on the quietest machine is
kept. Jobs that load the machine on purpose (deliberate: the hog and pair
sections) and jobs that are not timed (the largest-N search) run once;
so does a job longer than LONG_JOB_S (a retry would cost too much).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence, Tuple

from idle_gate import IdleGate
from launch import Attempt, attempt

PAUSE_S = 5
LONG_JOB_S = 30


class Retries:
    def __init__(self, times: int, budget_s: float) -> None:
        self.times = times
        self.budget_s = budget_s
        self.spent = 0.0  # seconds spent re-running jobs measured on a busy machine

    def again(self, a: Attempt, attempts: int, ok_codes: Sequence[Any], timing: bool,
              deliberate: Optional[str]) -> bool:
        """Whether to measure the job once more after this attempt."""
        return (timing and not deliberate and a.rc in ok_codes and bool(a.flags) and attempts <= self.times
                and a.elapsed <= LONG_JOB_S and self.spent <= self.budget_s)

    def measure(self, gate: IdleGate, label: str, argv: Sequence[str], ok_codes: Sequence[Any], timing: bool,
                deliberate: Optional[str], copies: int, preexec_fn: Optional[Callable[[], None]],
                timeout: float) -> Tuple[Attempt, int]:
        """(the attempt kept, the number of attempts). A hog job starts without waiting for the gate."""
        best: Optional[Attempt] = None
        attempts = 0
        while True:
            attempts += 1
            a = attempt(gate, argv, ok_codes, timing, timing and deliberate != "hog", copies, preexec_fn, timeout)
            if best is None or (a.rc in ok_codes and a.score < best.score):
                best = a
            if not self.again(a, attempts, ok_codes, timing, deliberate):
                return best, attempts
            print("  (busy machine: %s during %s; again in %d s)" % ("; ".join(a.flags), label, PAUSE_S),
                  flush=True)
            time.sleep(PAUSE_S)
            self.spent += PAUSE_S + a.elapsed
