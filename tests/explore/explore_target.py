# SPDX-License-Identifier: MIT
"""A Python rank program with a planted rank-order bug, for
kbthreads-explore's tests (tests/explore/explore_target.c has the C one).

    python3 explore_target.py bug   4 ranks sum their values after three
                                    yields; rank 3 publishes the sum,
                                    assuming it arrives last (exit 1 when not)
    python3 explore_target.py ok    the last to arrive publishes it
    python3 explore_target.py late  like ok, but the sum is wrong when ranks 3
                                    and 0 are the first two to start (1 order
                                    in 12: a failure that takes some runs)
"""
from __future__ import annotations

import sys

import kbthreads

NPROCS = 4


def main(mode: str) -> int:
    state = {"sum": 0, "arrived": 0, "published": 0}
    started: list[int] = []

    def rank_main(rank: int) -> None:
        started.append(rank)
        for _ in range(3):
            kbthreads.yield_()
        state["sum"] += 10 * (rank + 1)
        state["arrived"] += 1
        last = state["arrived"] == NPROCS if mode in ("ok", "late") else rank == NPROCS - 1
        if last:
            state["published"] = state["sum"] - (mode == "late" and started[:2] == [3, 0])

    kbthreads.spawn(rank_main, nprocs=NPROCS)
    want = 10 * NPROCS * (NPROCS + 1) // 2
    print(f"{NPROCS} ranks: sum {state['published']} (want {want})")
    if state["published"] != want:
        print(f"explore_target.py: wrong result {state['published']}, want {want}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bug"))
