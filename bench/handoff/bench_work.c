/* SPDX-License-Identifier: MIT */
#include "bench_work.h"

#include "bench_common.h"

/* Where the loop's result goes, so the compiler keeps the loop. */
static volatile uint64_t sink;

void bench_work(uint64_t iters)
{
    /* xorshift64: a dependent chain of cheap operations, no memory traffic. */
    uint64_t x = sink | 1u;
    for (uint64_t i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    sink = x;
}

#define CALIBRATION_ITERS 2000000u
#define CALIBRATION_TRIES 5

static double iters_per_ns;

uint64_t bench_work_iterations(long ns)
{
    if (ns <= 0)
        return 0;
    if (iters_per_ns == 0) {
        uint64_t best = UINT64_MAX;
        for (int t = 0; t < CALIBRATION_TRIES; t++) {
            uint64_t t0 = bench_now_ns();
            bench_work(CALIBRATION_ITERS);
            uint64_t dt = bench_now_ns() - t0;
            best = dt < best ? dt : best;
        }
        iters_per_ns = (double)CALIBRATION_ITERS / (double)(best ? best : 1);
    }
    uint64_t n = (uint64_t)(iters_per_ns * (double)ns + 0.5);
    return n ? n : 1;
}
