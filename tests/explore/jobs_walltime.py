#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kbthreads-explore --jobs, timed: 200 runs of a target that sleeps 20 ms
per run (explore_target sleep), with --jobs 1 and then --jobs 2, side by
side. Not a test (no timed assertions): a figure to take on a quiet
machine.

    python3 tests/explore/jobs_walltime.py [BUILD_DIR]     (default build)
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time


def main(build: str) -> int:
    tool = os.path.join(build, "kbthreads-explore")
    target = os.path.join(build, "tests", "explore", "explore_target")
    times = {}
    for jobs in (1, 2):
        with tempfile.TemporaryDirectory() as out:
            start = time.monotonic()
            r = subprocess.run([tool, "--runs", "200", "--jobs", str(jobs), "--out", out, "--", target, "sleep"],
                               capture_output=True, text=True)
            times[jobs] = time.monotonic() - start
            if r.returncode != 0:
                print(r.stdout + r.stderr, file=sys.stderr)
                return 1
    print("200 runs of explore_target sleep (20 ms a run), wall time:")
    for jobs, t in times.items():
        print(f"  --jobs {jobs}: {t:6.2f} s")
    print(f"  speed-up: {times[1] / times[2]:.2f}x on {len(os.sched_getaffinity(0))} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build"))
