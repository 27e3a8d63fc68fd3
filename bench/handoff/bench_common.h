/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the C benchmark programs: a monotonic clock, option
 * parsing, pinning, /proc/self/status readers and the one output format.
 *
 * Every program prints one line per measured repetition on stdout:
 *
 *   KBR,<bench>,<impl>,<pin>,<n>,<rep>,<value>,<unit>,<ops>
 *
 * bench: yield, wait, collective, spawn_cold, spawn_repeat, mem_idle,
 * mem_peak, handoff, switch, maxn; impl: kbthreads, kbthreads_spread (the
 * KB_AFFINITY_SPREAD spawn option), futex_ring, sem_ring, cond_bcast,
 * swapcontext, ...; pin: 1 if every thread shares one CPU; n:
 * the number of ranks (a ring of n + 1 threads for the floors); value in
 * unit (ns, KiB or ranks); ops: how many operations the value averages.
 * Lines starting with "KBI," are key/value facts about the run (for the
 * report); anything else is ignored by bench/harness/run.py.
 */
#ifndef KB_BENCH_COMMON_H
#define KB_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/** CPU time of the whole process (every thread: CLOCK_PROCESS_CPUTIME_ID) in
 *  nanoseconds. */
uint64_t bench_cpu_ns(void);

/** Print a KBR line (and flush). */
void bench_emit(const char *bench, const char *impl, int pin, long n, int rep, double value, const char *unit,
                uint64_t ops);

/** Print a KBI line (and flush). */
void bench_info(const char *key, const char *value);

/** Print "<prog>: <message>" on stderr and exit(2). */
__attribute__((noreturn, format(printf, 1, 2))) void bench_die(const char *fmt, ...);

/** Common options: --n N --m M --reps R --pin --spread --stack BYTES --k K --join MS --work NS. */
struct bench_opts {
    const char *mode; /* the first positional argument, or NULL */
    long n;           /* ranks (or ring members - 1) */
    long m;           /* yields / handoffs / iterations per repetition */
    int reps;         /* measured repetitions (a warm-up one comes first) */
    int pin;          /* pin every thread to the CPU the main thread is on */
    int spread;       /* kb_bench: ranks spread over the CPUs (KB_AFFINITY_SPREAD) */
    long stack;       /* stack size in bytes, 0 = default */
    long k;           /* a second count (spawns per repetition) */
    long join_ms;     /* kb_bench loops: drive with kb_start + kb_join(pc, join_ms) slices; -1 = kb_spawn */
    long work_ns;     /* kb_bench loops: work before each suspension point (bench_work.h); -1 = not given */
};

/** Parse argv into o (defaults: n 1, m 1000, reps 5, pin 0, spread 0, stack
 *  0, k 1, join -1, work -1). --pin together with --spread is a usage error (exit 2). */
void bench_parse(int argc, char **argv, struct bench_opts *o);

/** Pin the calling thread to the CPU it is running on; returns that CPU. */
int bench_pin_here(void);

/** A field of /proc/self/status in KiB (e.g. "VmRSS", "VmHWM"), or -1. */
long bench_status_kib(const char *field);
/** The same for any "Field:   N kB" file, such as /proc/meminfo. */
long bench_proc_kib(const char *path, const char *field);

#endif
