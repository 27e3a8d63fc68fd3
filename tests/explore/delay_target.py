# SPDX-License-Identifier: MIT
"""A Python rank program whose bug needs two delays, 13 rounds apart, for
kbthreads-explore --strategy delay (tests/explore/delay_target.c has the
C one, and tells the story).

    python3 delay_target.py bug   3 ranks, 20 steps: rank 1's snapshot of
                                  the config is stale when it runs before
                                  rank 0 at step 3, and its check fails
                                  (exit 1) when it runs after rank 2, which
                                  runs after rank 0, at step 16
    python3 delay_target.py ok    the check upgrades a stale snapshot
"""
from __future__ import annotations

import sys

import kbthreads

NPROCS, STEPS = 3, 20


def main(mode: str) -> int:
    state = {"config": 1, "snapshot": 0, "migrating": False, "v1_dropped": False, "failed": False}

    def rank_main(rank: int) -> None:
        for step in range(STEPS):
            if step == 3 and rank == 0:
                state["config"] = 2
            if step == 3 and rank == 1:
                state["snapshot"] = state["config"]
            if step == 16 and rank == 0:
                state["migrating"] = True
            if step == 16 and rank == 2 and state["migrating"]:
                state["v1_dropped"] = True
            if step == 16 and rank == 1:
                if state["snapshot"] == 1 and mode == "ok":
                    state["snapshot"] = state["config"]
                if state["snapshot"] == 1 and state["v1_dropped"]:
                    state["failed"] = True
            if step + 1 < STEPS:
                kbthreads.yield_()

    kbthreads.spawn(rank_main, nprocs=NPROCS)
    print(f"snapshot {state['snapshot']}, check {'failed' if state['failed'] else 'passed'}")
    if state["failed"]:
        print("delay_target.py: rank 1 checked a stale snapshot after version 1 was dropped", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bug"))
