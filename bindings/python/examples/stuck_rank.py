# SPDX-License-Identifier: MIT
"""Four Python ranks training; at its second step rank 1 gets stuck in
load_checkpoint() (a long sleep) while it holds the baton, so every other
rank waits. What each tool shows (docs/debugging.md, "Python: my
simulation hangs"):

    KB_STALL_MS=200 python3 stuck_rank.py        # the stall report names the line
    python3 stuck_rank.py 30 & kbthreads-dump $!  # every rank's line, from outside

From the source tree: PYTHONPATH=bindings/python
KBTHREADS_LIBRARY=build/src/libkbthreads.so.0 python3 bindings/python/examples/stuck_rank.py
(and tools/kbthreads-dump). The argument is how long the rank is stuck, in
seconds (default 1).
"""
import sys
import time

import kbthreads


def load_checkpoint(seconds):
    time.sleep(seconds)  # stuck here, holding the baton


def train(rank, steps, stuck_for):
    for step in range(steps):
        if rank == 1 and step == 1:
            load_checkpoint(stuck_for)
        kbthreads.yield_()


if __name__ == "__main__":
    kbthreads.spawn(train, args=(3, float(sys.argv[1]) if len(sys.argv) > 1 else 1.0), nprocs=4)
    print("trained")
