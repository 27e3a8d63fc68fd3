# SPDX-License-Identifier: MIT
"""The simulation-shaped job (issue 20), shared by `py_bench.py sim` (the
binding) and `peer_greenlet.py sim` (the greenlet scheduler); `kb_bench sim`
(bench/handoff/kb_sim.c) is the same model in C, with the same handles, durations
and checksum, so all three print the same checksum when the event order is
the same.

Per step every rank launches 4 kernels (handles) on a heap-based engine and
waits for each in turn; the engine's wait pops the heap in simulated-time
order (ties by launch order) until the awaited kernel is completed,
advancing simulated time. Then the rank arrives at an all-reduce, submits it
(h, rank, None) to the pending collectives and waits for it: the engine
completes it only when every rank has arrived. Then the rank yields once.
Operations per rank and step: 4 waits + 1 collective + 1 yield.

The checksum folds every completion (local id, simulated time) in engine
order (FNV-1a style, 64 bits); a repetition whose checksum or number of
completions differs from the expected raises.
"""
import heapq
import sys
import time

KERNELS = 4
OPS_PER_STEP = KERNELS + 2  # 4 kernel waits, 1 collective, 1 yield
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def kernel_duration(step: int, rank: int, k: int) -> int:
    """Simulated duration of kernel k of rank at step: 1..1000 (the same
    integer mix as kb_sim.c's)."""
    x = (step * 2654435761 + rank * 40503 + k * 2246822519 + 12345) & M32
    x ^= x >> 13
    x = (x * 1274126177) & M32
    x ^= x >> 16
    return 1 + x % 1000


def coll_duration(n: int) -> int:
    """Simulated duration of one all-reduce over n ranks."""
    return 100 + n


class SimEngine:
    """The heap-based engine. Handles of a repetition: base + 1 + local id;
    kernel (s, r, k): (s * n + r) * 4 + k; the all-reduce of step s: the
    kernels' count + s."""

    def __init__(self, n: int, steps: int) -> None:
        self.n = n
        self.steps = steps  # steps per repetition, the warm-up step 0 included
        self.kernels = steps * n * KERNELS
        self.base = 0
        self.reset(0)

    def reset(self, base: int) -> None:
        self.base = base
        self.heap: list = []
        self.now = 0
        self.seq = 0
        self.done = bytearray(self.kernels + self.steps)
        self.arrivals = [0] * self.steps
        self.checksum = FNV_OFFSET
        self.events = 0

    def kernel(self, step: int, rank: int, k: int) -> int:
        return self.base + 1 + (step * self.n + rank) * KERNELS + k

    def collective(self, step: int) -> int:
        return self.base + 1 + self.kernels + step

    def launch(self, step: int, rank: int) -> None:
        for k in range(KERNELS):
            heapq.heappush(self.heap, (self.now + kernel_duration(step, rank, k), self.seq,
                                       (step * self.n + rank) * KERNELS + k))
            self.seq += 1

    def arrive(self, step: int) -> None:
        self.arrivals[step] += 1

    def _record(self, lid: int, t: int) -> None:
        self.done[lid] = 1
        c = ((self.checksum ^ lid) * FNV_PRIME) & M64
        self.checksum = ((c ^ t) * FNV_PRIME) & M64
        self.events += 1

    def wait(self, h: int, _meta=None) -> None:
        """The engine hook: run the simulation until h is completed."""
        lid = h - self.base - 1
        if self.done[lid]:
            return
        if lid < self.kernels:
            while not self.done[lid]:
                if not self.heap:
                    raise RuntimeError("sim: kernel %d awaited but never launched" % lid)
                t, _, x = heapq.heappop(self.heap)
                self.now = t
                self._record(x, t)
            return
        step = lid - self.kernels
        if self.arrivals[step] != self.n:
            raise RuntimeError("sim: the all-reduce of step %d completed with %d of %d ranks arrived"
                               % (step, self.arrivals[step], self.n))
        self.now += coll_duration(self.n)
        self._record(lid, self.now)

    def expected_events(self) -> int:
        return self.kernels + self.steps


def cpu_ns() -> int:
    """CPU time of the whole process (every thread), ns."""
    return time.process_time_ns()


def rank_body(engine: SimEngine, m: int, wait, yield_, submit, stamps: dict):
    """The rank function: a warm-up step 0, a clock stamp, steps 1..m, a
    stamp. stamps: t_first/t_last lists and cpu [first, last] (rank 0 takes
    the CPU time at its first stamp, the last rank at its last: the earliest
    and the latest stamps, as one rank runs at a time)."""
    n = engine.n
    clock = time.perf_counter_ns
    t_first, t_last, cpu = stamps["t_first"], stamps["t_last"], stamps["cpu"]

    def step(rank: int, s: int) -> None:
        engine.launch(s, rank)
        for k in range(KERNELS):
            wait(engine.kernel(s, rank, k))
        engine.arrive(s)
        h = engine.collective(s)
        submit(h, rank)
        wait(h)
        yield_()

    def rank_fn(rank: int) -> None:
        step(rank, 0)
        if rank == 0:
            cpu[0] = cpu_ns()
        t_first[rank] = clock()
        for s in range(1, m + 1):
            step(rank, s)
        t_last[rank] = clock()
        if rank == n - 1:
            cpu[1] = cpu_ns()

    return rank_fn


def check_args(prog: str, n: int, m: int, reps: int) -> None:
    """Exit 2 with a message for counts the job cannot run (a CLI's bad input)."""
    if n < 1 or m < 1 or reps < 0:
        print("%s: sim: --n and --m must be at least 1 and --reps at least 0 (got %d, %d, %d)"
              % (prog, n, m, reps), file=sys.stderr)
        sys.exit(2)


def run(impl: str, n: int, m: int, reps: int, engine: SimEngine, spawn, wait, yield_, submit) -> None:
    """Run the warm-up and the measured repetitions, print KBR lines (sim:
    wall ns per operation; sim_cpu: CPU ns per operation) and one KBI
    sim_checksum line; raise if the event order changed between repetitions."""
    stamps = {"t_first": [0] * n, "t_last": [0] * n, "cpu": [0, 0]}
    fn = rank_body(engine, m, wait, yield_, submit, stamps)
    first_sum = None
    base = 0
    for rep in range(-1, reps):
        engine.reset(base)
        spawn(fn, n)
        base += engine.kernels + engine.steps
        if engine.events != engine.expected_events():
            raise RuntimeError("sim: %d completions, expected %d" % (engine.events, engine.expected_events()))
        if first_sum is None:
            first_sum = engine.checksum
        elif engine.checksum != first_sum:
            raise RuntimeError("sim: the event order changed between repetitions (%016x, then %016x)"
                               % (first_sum, engine.checksum))
        ops = n * m * OPS_PER_STEP
        if rep >= 0:
            ns = (max(stamps["t_last"]) - min(stamps["t_first"])) / ops
            cpu = (stamps["cpu"][1] - stamps["cpu"][0]) / ops
            print("KBR,sim,%s,0,%d,%d,%.3f,ns,%d" % (impl, n, rep, ns, ops))
            print("KBR,sim_cpu,%s,0,%d,%d,%.3f,ns,%d" % (impl, n, rep, cpu, ops), flush=True)
    print("KBI,sim_checksum,%d:%d:%016x:%d" % (n, m, first_sum, engine.events), flush=True)
