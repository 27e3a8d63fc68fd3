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
 *
 * A ctx remembers what its reactive spawns learnt (struct kb_wait_memory,
 * one record per shape: rank count and CPUs), so the next spawn of that
 * shape on the ctx starts in the mode the last one ended in, with its
 * estimates, back-offs and rationed time, instead of learning again from
 * the static choice. The records are the driver's: read when a spawn is
 * resolved and written when its run is destroyed, both with the ctx owned.
 */
#ifndef KB_BATON_WAIT_REACTIVE_H
#define KB_BATON_WAIT_REACTIVE_H

#include <stdint.h>

#include "kbthreads.h"

struct kb_run;
struct kb_spawn_stats;

/* Shapes a ctx remembers (the least recently used is replaced): a
 * simulator alternating a few rank counts on one ctx keeps each. */
#define KB_WAIT_MEMORY_SHAPES 4

/* What one reactive spawn of a shape left for the next one. */
struct kb_wait_shape {
    int nprocs, ncpu; /* the shape; nprocs 0 = an empty record */
    uint64_t used;    /* kb_wait_memory.uses when last written (least recent is replaced) */
    int home;         /* the mode chosen at the end */
    uint64_t est[KB_WAIT_MODES];
    unsigned backoff[KB_WAIT_MODES];
    /* the slot (baton_wait_reactive.c: the monotonic clock over the
     * shape's slot length) from which the mode may be tried */
    uint64_t due[KB_WAIT_MODES];
    uint64_t est_at_choice;
    unsigned gather_turn;          /* rank_seat.h: kb__seat_gather */
    uint64_t elapsed_ns, probe_ns; /* measured time at this shape, and the tries' part of it */
};

struct kb_wait_memory {
    uint64_t uses;
    struct kb_wait_shape shape[KB_WAIT_MEMORY_SHAPES];
};

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
    uint64_t t0, h0, d0;         /* the open window: its start (ns), handoffs and driver drains then */
    int driver_out;              /* the driver ran no drain in home's last whole window */
    uint64_t bank_ns, bank_h;    /* home's window before the pauses it spans (kb__wait_reactive_pause) */
    uint64_t t_start;            /* when the first window opened (ns): the time tries are rationed against */
    uint64_t try_at;             /* a try is due: the slot start it waits for (ns), else 0 */
    uint64_t probe_t0;           /* when the current try began (its settling round included) */
    uint64_t probe_ns;           /* time spent in tries so far (earlier spawns' included, when resumed) */
    uint64_t prior_ns;           /* measured time of earlier spawns of this shape on the ctx */
    uint64_t t_last;             /* the last round boundary's clock reading (ns) */
    int after_probe;             /* the settling round follows a try: its time is the try's */
    int resumed;                 /* started from a kb_wait_shape */
    uint64_t est[KB_WAIT_MODES]; /* ns per handoff, 0 = not measured */
    uint64_t next_probe[KB_WAIT_MODES]; /* the slot from which the mode may be tried again */
    unsigned backoff[KB_WAIT_MODES];    /* slots between two tries of the mode */
    uint64_t est_at_choice;             /* est[home] when home was last chosen or confirmed */
    unsigned gather_turn;               /* kb__seat_gather's turn: tries of a gathered look that lost */
    uint64_t switches, probes;
    /* KB_WAIT_ABLATE (issue 45's ablation, a measuring aid): mechanisms
     * switched off, KB_ABLATE_* bits (baton_wait_policy.c reads them). */
    unsigned ablate;
    uint64_t origin; /* KB_ABLATE_SLOTS: slots count from the run's first window, not from 0 */
};

#define KB_ABLATE_SLOTS     0x001u /* tries at slots of the process's own clock origin, not shared ones */
#define KB_ABLATE_GATHER    0x002u /* looks after nudges (or after a try) are not gathered on one CPU */
#define KB_ABLATE_SEAT      0x004u /* no seating (and so no gathering) */
#define KB_ABLATE_MEMORY    0x008u /* a ctx remembers nothing between spawns */
#define KB_ABLATE_EARLY     0x010u /* a losing try is not judged early */
#define KB_ABLATE_BACKOFF   0x020u /* a mode that lost is tried again at the next slot */
#define KB_ABLATE_SPIN_RULE 0x040u /* spin tried at n = c whether or not the driver drains */
#define KB_ABLATE_CUTOFF    0x080u /* tries at any rank count */
#define KB_ABLATE_BANK      0x100u /* a timed join's pause drops home's partial window */
#define KB_ABLATE_DEGRADE   0x200u /* home growing slower does not bring the tries back */

/* Driver, at resolution: start steering the run of nprocs ranks on ncpu
 * CPUs from mode home with the given candidates (the reactive policy), or
 * move through cand[] every round (cycle != 0). When mem (may be NULL)
 * has a record of this shape whose mode is a candidate, the run starts
 * from it instead (not under cycle). Sets run->rank_wait. */
void kb__wait_reactive_start(struct kb_run *run, int nprocs, int ncpu, int home, const int *cand, int ncand,
                             int cycle, const struct kb_wait_memory *mem);

/* Driver, when the run ends: record what it learnt in mem (may be NULL) for the next
 * spawn of its shape (nothing when it was not steered reactively or never
 * measured its mode). */
void kb__wait_reactive_save(const struct kb_run *run, struct kb_wait_memory *mem);

/* The policy's work at a round boundary (round_loop.c: begin_round
 * calls it when active and the handoff count reached next_check: one
 * compare per round otherwise). Holder. */
void kb__wait_reactive_tick(struct kb_run *run);
/* The same with the clock read given: now, in nanoseconds (the unit tests
 * drive the policy with a clock of their own). */
void kb__wait_reactive_step(struct kb_run *run, uint64_t now);

/* A timed kb_join returns with the run live: rounds pause, for a time
 * that is not the ranks'. Home's open window keeps what it measured up to
 * now (one clock read per return) and goes on after the pause, so a
 * window spans many short joins (the Python binding joins in 50 ms
 * slices; beside a CPU hog 256 handoffs can take longer). Holder (the
 * driver). */
void kb__wait_reactive_pause(struct kb_run *run);
/* The same with the clock read given (as kb__wait_reactive_step). */
void kb__wait_reactive_pause_at(struct kb_run *run, uint64_t now);

/* The driver resumes rounds after a pause (the next kb_join): a settling
 * round, then home's window goes on from what it kept at the pause; a try
 * cut off by the pause is dropped. Holder (the driver). */
void kb__wait_reactive_restart(struct kb_run *run);

/* Fill the stats' wait fields. */
void kb__wait_reactive_fill(const struct kb_run *run, struct kb_spawn_stats *st);

#endif
