/* SPDX-License-Identifier: MIT */
/*
 * A spawn's options (kb_spawn_opts) and the environment variables that
 * stand in for them: their checks, and the values a run keeps once they
 * are resolved (spawn_options.c). A new option touches this file, the
 * public header and whatever reads the value.
 */
#ifndef KB_SPAWN_OPTIONS_H
#define KB_SPAWN_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "kbthreads.h"

struct kb_run;

/* The options a run keeps, resolved against the environment when it is
 * created (kb__run_options_resolve) and fixed from then on, except cpu,
 * set by kb__run_create. Read by any thread of the run. */
struct kb_run_options {
    unsigned stall_ms; /* 0 = no watchdog */
    int stall_abort;
    int crash_report;
    size_t altstack_size; /* a worker's signal stack, with crash_report */
    int affinity;         /* kb_spawn_opts.affinity */
    int cpu;              /* with KB_AFFINITY_ONE_CPU: the CPU everyone runs on */
    int *cpus;            /* with KB_AFFINITY_SPREAD: the driver's CPUs; rank r runs on cpus[r % ncpus] */
    int ncpus;
    uint64_t max_rounds;   /* 0 = none */
    kb_spawn_stats *stats; /* the caller's, filled at the end, or NULL */
    int observe;           /* stats or a timeline: time turns */
};

/* kb_spawn / kb_start's argument checks: 0, KB_EINVAL, or KB_ENOTSUP
 * (an affinity option on a system that cannot pin threads). */
int kb__spawn_args_check(const kb_ctx *ctx, kb_rank_fn fn, int nprocs, const kb_spawn_opts *opts);
/* The same checks of nprocs and opts alone (kb_spawn_check). */
int kb__spawn_opts_check(int nprocs, const kb_spawn_opts *opts);

/* Resolve run->opt (all but observe and cpu) and run->strategy from opts
 * (NULL: the defaults) and the environment, and draw the strategy's
 * choices (kb__order_setup). A malformed variable is ignored with a warning
 * on stderr. 0 or KB_ENOMEM. Driver, before any rank exists. */
int kb__run_options_resolve(struct kb_run *run, const kb_spawn_opts *opts);

#endif
