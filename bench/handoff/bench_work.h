/* SPDX-License-Identifier: MIT */
/*
 * Rank code's work between two suspension points, for the loops' --work
 * option: a fixed amount of computation, calibrated once per process to
 * take a given time on an otherwise idle CPU. It is work, not a wait on
 * the clock: a rank that is preempted, or shares its CPU with a hog,
 * takes longer to do it, as real rank code would.
 */
#ifndef KB_BENCH_WORK_H
#define KB_BENCH_WORK_H

#include <stdint.h>

/** Iterations of bench_work that take about ns nanoseconds here (0 for
 *  0). Calibrates on the first call (a few milliseconds); the fastest of
 *  several timings is kept, since being preempted only slows one down. */
uint64_t bench_work_iterations(long ns);

/** Run iters iterations of the work loop. */
void bench_work(uint64_t iters);

#endif
