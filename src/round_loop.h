/* SPDX-License-Identifier: MIT */
/*
 * The round loop (round_loop.c): the driver's round and its drain, the
 * round boundary a rank runs when the driver has nothing to do, the baton
 * handoff, nudges, cancellation and the barrier's opening. The (B) fields
 * of struct kb_run (run.h) it reads and writes are the holder's only.
 */
#ifndef KB_ROUND_LOOP_H
#define KB_ROUND_LOOP_H

#include <time.h>

struct kb_rank;
struct kb_run;
struct kb_slot;

/* The CPU a rank's thread is pinned to under the run's affinity option,
 * -1 for none. */
int kb__wanted_cpu(const struct kb_run *run, int rank);

/* Driver, holding the baton: wait until no rank is between its post and
 * the end of its nudge (kb__pass_baton), so that every worker may be
 * freed. Ranks raise their nudging mark only while they hold the baton, so
 * none starts meanwhile. Costs N loads when nothing is in flight. */
void kb__wait_nudges(struct kb_run *run);

/* Hand the baton to `to` (KB_DRIVER or a rank). Caller holds the baton. */
void kb__handoff(struct kb_run *run, int to);

/* Driver: run one round and its drain. 1 = every rank has finished (after
 * this round's drain, or at once if none was live); 0 = a round ran and
 * ranks remain. The run stopped (its live ranks cancelled, the engine
 * aborted, the queues cleared) with: KB_ESPAWN = a rank or the drain
 * failed; KB_ETIMEDOUT = max_rounds reached; KB_EDIVERGED = the program
 * left the schedule being replayed (run->failure.detail says how);
 * KB_ENOMEM = checking a round against the replay ran out of memory. */
int kb__sched_round(struct kb_run *run);
/* Driver: cancel every not-finished rank in rank order, abort the engine,
 * clear both queues, mark the run failed. */
void kb__sched_cancel_all(struct kb_run *run);

/* Rank rk's function ended: it is no longer live. Baton holder only. */
void kb__rank_retire(struct kb_run *run, struct kb_rank *rk);
/* Open the barrier when every live rank has arrived: the next generation,
 * opened in the current round. Baton holder only. */
void kb__barrier_check(struct kb_run *run);
/* The baton pass: rank rk (holding the baton) ends its turn and hands the
 * baton to the next rank of the round; at the round's end to the driver,
 * or, when the driver has nothing to do, runs the round boundary itself
 * and hands it to the next round's first rank. With nudges it then wakes
 * the holder after next ahead of its turn. suspend: rk then waits for its
 * next turn, as the wait policy says (else its function has ended). */
void kb__pass_baton(struct kb_rank *rk, int suspend);
/* Driver, in a timed kb_join: the deadline at which to set join.due, or
 * NULL when there is none (not timed, or set already). */
const struct timespec *kb__join_deadline(const struct kb_run *run);
/* Driver, after a timed wait returned without the baton: set join.due if
 * the deadline has passed. */
void kb__join_expire(struct kb_run *run);

#endif
