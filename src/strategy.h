/* SPDX-License-Identifier: MIT */
/*
 * Round orders of the exploring strategies (kb_spawn_opts.schedule):
 * seeded, PCT, exhaustive and delays, and of a partial schedule being
 * replayed.
 * Each permutes run->order[0..norder), which holds the round's live ranks
 * in rank order when called. Baton holder only (the driver, or the rank
 * running a round boundary), once per round, in round order.
 */
#ifndef KB_STRATEGY_H
#define KB_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

struct kb_run;

/* The run's exploring strategy (kb_spawn_opts.schedule), resolved against
 * the environment before the first round (spawn_options.c), drawn by
 * kb__order_setup, then advanced here once per round: (B) once ranks run. */
struct kb_strategy {
    int kind;     /* kb_schedule */
    uint64_t rng; /* KB_SCHED_SEEDED, KB_SCHED_PCT: the generator's state */
    uint64_t seed;
    /* KB_SCHED_PCT */
    unsigned pct_depth;
    uint64_t pct_rounds;
    int *pct_list;         /* every rank, by descending priority */
    uint64_t *pct_changes; /* the change rounds, ascending */
    uint64_t npct_changes;
    uint64_t pct_next; /* the first change round not reached */
    /* KB_SCHED_EXHAUSTIVE */
    uint64_t ex_index, ex_limit;
    uint64_t ex_fact; /* nprocs!, the base the index is read in */
    uint64_t ex_rest; /* the index's digits not used yet */
    unsigned ex_k;    /* rounds enumerated */
    /* KB_SCHED_DELAYS: the turns to delay at, ascending (malloc'd, NULL
     * when none), the first not reached yet, and the turns of the rounds
     * begun so far (so the next round's turns are dl_base + 1, ...). */
    uint64_t *dl_turns;
    size_t dl_n, dl_next;
    uint64_t dl_base;
};

/* The next value of the splitmix64 stream whose state is *s. */
uint64_t kb__splitmix64(uint64_t *s);

/* KB_SCHED_EXHAUSTIVE: the number of rounds k whose orders an index
 * enumerates and the number of schedules, (n!)^k <= limit (k 0, count 1
 * when even one round has more orders than limit, or n < 2). */
void kb__exhaustive_span(int nprocs, uint64_t limit, unsigned *k, uint64_t *count);

/* Draw what the run's strategy needs before its first round (PCT's
 * priorities and change rounds). 0 or KB_ENOMEM. */
int kb__order_setup(struct kb_run *run);
void kb__order_free(struct kb_run *run);
/* The text of the recording's "schedule" line (malloc), or NULL. */
char *kb__order_describe(const struct kb_run *run);

void kb__order_seeded(struct kb_run *run);
void kb__order_pct(struct kb_run *run, uint64_t round);
void kb__order_exhaustive(struct kb_run *run, uint64_t round);
/* The round's turns are dl_base + 1 .. dl_base + norder; at each turn
 * with c delays the rank whose turn it is moves behind the ranks still to
 * run, c times over (the rest of the order rotates by c modulo its
 * length: nothing at the round's last turn). */
void kb__order_delays(struct kb_run *run);
/* A partial schedule's round: want's live ranks in want's order, then the
 * other live ranks in rank order. */
void kb__order_partial(struct kb_run *run, const int *want, int nwant);

#endif
