/*
 * Round orders of the exploring strategies (kb_spawn_opts.schedule):
 * seeded, PCT and exhaustive, and of a partial schedule being replayed.
 * Each permutes run->order[0..norder), which holds the round's live ranks
 * in rank order when called. Baton holder only (the driver, or the rank
 * running a round boundary), once per round, in round order.
 */
#ifndef KB_ORDER_H
#define KB_ORDER_H

#include <stdint.h>

struct kb_run;

/* The next value of the splitmix64 stream whose state is *s. */
uint64_t kb_splitmix64(uint64_t *s);

/* KB_SCHED_EXHAUSTIVE: the number of rounds k whose orders an index
 * enumerates and the number of schedules, (n!)^k <= limit (k 0, count 1
 * when even one round has more orders than limit, or n < 2). */
void kb_exhaustive_span(int nprocs, uint64_t limit, unsigned *k, uint64_t *count);

/* Draw what the run's strategy needs before its first round (PCT's
 * priorities and change rounds). 0 or KB_ENOMEM. */
int kb_order_setup(struct kb_run *run);
void kb_order_free(struct kb_run *run);
/* The text of the recording's "schedule" line (malloc), or NULL. */
char *kb_order_describe(const struct kb_run *run);

void kb_order_seeded(struct kb_run *run);
void kb_order_pct(struct kb_run *run, uint64_t round);
void kb_order_exhaustive(struct kb_run *run, uint64_t round);
/* A partial schedule's round: want's live ranks in want's order, then the
 * other live ranks in rank order. */
void kb_order_partial(struct kb_run *run, const int *want, int nwant);

#endif
