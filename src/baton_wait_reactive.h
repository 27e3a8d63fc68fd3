/* SPDX-License-Identifier: MIT */
/*
 * The reactive wait policy (baton_wait_reactive.c): measures the wall
 * time per handoff of the mode ranks wait in, over windows that begin and
 * end at round boundaries, tries the other modes for short windows now
 * and then, and moves run->rank_wait to the mode that measured fastest.
 * docs/design.md ("Waiting for the baton: the wait policy") explains what
 * it measures, when it switches and what that costs.
 *
 * Every field is (B): written and read only by the thread holding the
 * baton (the driver or a rank doing the round boundary), so the switches
 * are ordered with the handoffs like every other scheduler field. A rank
 * copies run->rank_wait while it still holds the baton (rank.c: pass_on),
 * so a switch reaches each rank at its next suspension: within one round.
 */
#ifndef KB_BATON_WAIT_REACTIVE_H
#define KB_BATON_WAIT_REACTIVE_H

#include <stdint.h>

#include "kbthreads.h"

struct kb_run;
struct kb_spawn_stats;

struct kb_wait_reactive {
    int active;       /* this run's rank_wait is steered here (reactive, or cycle) */
    int cycle;        /* KB_WAIT_POLICY=cycle: the next mode every round, nothing measured */
    int mode;         /* the kb_wait_mode rank_wait holds now */
    int home;         /* the mode chosen (mode differs while another is tried) */
    int phase;        /* baton_wait_reactive.c: enum phase */
    int nprocs, ncpu; /* the counts the budgets are made for */
    int ncand;        /* candidate modes in cand[] */
    int cand[KB_WAIT_MODES];
    int nudged;                  /* some mode with nudges was used: kb__wait_nudges must look */
    uint64_t next_check;         /* handoffs at which a round boundary next looks (one compare per round) */
    uint64_t t0, h0;             /* the open window: its start (ns) and the handoff count then */
    uint64_t t_start;            /* when the first window opened (ns): the time tries are rationed against */
    uint64_t probe_t0;           /* when the current try began (its settling round included) */
    uint64_t probe_ns;           /* time spent in tries so far */
    uint64_t est[KB_WAIT_MODES]; /* ns per handoff, 0 = not measured */
    uint64_t next_probe[KB_WAIT_MODES]; /* handoffs after which the mode may be tried again */
    unsigned backoff[KB_WAIT_MODES];    /* windows between two tries of the mode */
    uint64_t est_at_choice;             /* est[home] when home was last chosen or confirmed */
    uint64_t switches, probes;
};

/* Driver, at resolution: start steering the run of nprocs ranks on ncpu
 * CPUs from mode home with the given candidates (the reactive policy), or
 * move through cand[] every round (cycle != 0). Sets run->rank_wait. */
void kb__wait_reactive_start(struct kb_run *run, int nprocs, int ncpu, int home, const int *cand, int ncand,
                             int cycle);

/* The policy's work at a round boundary (round_loop.c: begin_round
 * calls it when active and the handoff count reached next_check: one
 * compare per round otherwise). Holder. */
void kb__wait_reactive_tick(struct kb_run *run);
/* The same with the clock read given: now, in nanoseconds (the unit tests
 * drive the policy with a clock of their own). */
void kb__wait_reactive_step(struct kb_run *run, uint64_t now);

/* The driver resumes rounds after a pause that is not the ranks' (a
 * kb_join after a timed one returned): the open window, which would
 * count the pause, is dropped. Holder (the driver). */
void kb__wait_reactive_restart(struct kb_run *run);

/* Fill the stats' wait fields. */
void kb__wait_reactive_fill(const struct kb_run *run, struct kb_spawn_stats *st);

#endif
