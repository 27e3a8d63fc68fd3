/* SPDX-License-Identifier: MIT */
/*
 * A run's counters and turn accounting: what kb_spawn_stats reports
 * (stats.c). The counters are (B) fields: the baton holder bumps them.
 */
#ifndef KB_STATS_H
#define KB_STATS_H

#include <stdint.h>

#include "kbthreads.h"

struct kb_run;
struct kb_rank;

struct kb_counters {
    uint64_t rounds, turns, handoffs, drains, engine_waits, collectives;
    uint64_t start_ns;     /* when the run was created (CLOCK_MONOTONIC) */
    uint64_t *rank_turns;  /* per rank, when stats are wanted, else NULL */
    uint64_t *rank_cpu_ns; /* per rank, when stats are wanted, else NULL */
};

/* Driver, creating the run (run->opt.stats resolved): start the clock and
 * allocate the per-rank counters when stats are wanted. 0 or KB_ENOMEM. */
int kb__counters_init(struct kb_run *run);

/* Turn accounting (stats, timeline): called by a rank thread when its turn
 * starts and just before it hands the baton on. No-ops unless observed
 * (run->opt.observe). */
void kb__turn_begin(struct kb_rank *rk);
void kb__turn_end(struct kb_rank *rk);

/* Fill a kb_spawn_stats from the run. */
void kb__stats_fill(const struct kb_run *run, kb_spawn_stats *stats);

#endif
