/* SPDX-License-Identifier: MIT */
/*
 * The library's clocks, one helper per job: CLOCK_MONOTONIC for every
 * timestamp, deadline and timeout, and the calling thread's CPU time for
 * the per-rank statistics.
 */
#ifndef KB_CLOCK_H
#define KB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t kb__now_ns(void);
/* Nanoseconds of CPU time the calling thread has used. */
uint64_t kb__thread_cpu_ns(void);
/* The absolute CLOCK_MONOTONIC time ms milliseconds from now. */
struct timespec kb__deadline_after_ms(long ms);
/* Has the absolute CLOCK_MONOTONIC time t passed? */
int kb__time_passed(const struct timespec *t);

#endif
