# SPDX-License-Identifier: MIT
"""The depth job (issue 30), shared by `py_bench.py depth` (the binding) and
`peer_greenlet.py depth` (the greenlet scheduler): the cost of one yield
against the depth of C frames at the point where the rank suspends.

A rank "D levels deep in C" runs its yield loop inside D nested C calls
that call back into Python: each level is a Python function calling
``list(map(next_level, [0]))``, so every level puts the C frames of list()
and map() (and the call back into the interpreter) on the rank's stack. A
greenlet switch copies the part of the C stack the greenlet uses in and
out, so its cost grows with D; a kbthreads rank keeps its own thread's
stack, so its cost should not.

Timing as in kb_bench's yield loop: every rank, at the bottom of its
nest, makes one warm-up yield, stamps the clock, makes M yields and stamps
it again; ns per yield = (latest last stamp - earliest first stamp) / (N *
M). A warm-up repetition (not reported) comes first. The figure is named
``depth_<D>`` (one figure per depth, as the results are keyed by bench,
impl, pin and N), pin 0, at N ranks.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, List

ONE = [0]  # the one-element list every level maps over
# Python frames each level adds (the level function), plus a margin for the
# frames above the nest: the recursion limit must let the deepest nest run.
FRAMES_PER_LEVEL = 1
FRAME_MARGIN = 200


def bench_name(depth: int) -> str:
    """The figure of one depth: depth_0, depth_50, ..."""
    return "depth_%d" % depth


def nest(depth: int, bottom: Callable[[], None]) -> Callable[[], None]:
    """A function that calls bottom() from inside `depth` nested map() calls."""
    def level_over(inner: Callable[[int], None]) -> Callable[[int], None]:
        def level(_x: int) -> None:
            list(map(inner, ONE))
        return level

    fn: Callable[[int], None] = lambda _x: bottom()
    for _ in range(depth):
        fn = level_over(fn)
    return lambda: fn(0)


def check_args(prog: str, n: int, depth: int, m: int, reps: int) -> None:
    if n < 1 or depth < 0 or m < 1 or reps < 1:
        sys.exit("%s depth: need --n >= 1, --depth >= 0, --m >= 1, --reps >= 1" % prog)
    # Python counts the nest's frames against the recursion limit, on every thread.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), FRAMES_PER_LEVEL * depth + FRAME_MARGIN))


def run(impl: str, n: int, depth: int, m: int, reps: int, spawn: Callable[[Callable[[int], None], int], None],
        yield_: Callable[[], None]) -> None:
    """A warm-up repetition, then `reps` reported ones: one KBR line each (bench_common.h)."""
    first: List[int] = [0] * n
    last: List[int] = [0] * n
    clock = time.perf_counter_ns

    def rank_fn(rank: int) -> None:
        def bottom() -> None:
            yield_()
            first[rank] = clock()
            for _ in range(m):
                yield_()
            last[rank] = clock()
        nest(depth, bottom)()

    for rep in range(-1, reps):
        spawn(rank_fn, n)
        ops = n * m
        if rep >= 0:
            ns = (max(last) - min(first)) / ops
            print("KBR,%s,%s,0,%d,%d,%.3f,ns,%d" % (bench_name(depth), impl, n, rep, ns, ops))
        sys.stdout.flush()
