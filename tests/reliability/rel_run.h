/* SPDX-License-Identifier: MIT */
/*
 * Running a program of rel_prog.h: on the library (rel_real.c) and on the
 * executable model (rel_model.c). Both write their trace with tr_add()
 * (tests/support/trace.h) in the formats below; the checker compares the
 * two texts.
 */
#ifndef REL_RUN_H
#define REL_RUN_H

#include "kbthreads.h"
#include "rel_prog.h"

/* Trace line formats shared by both sides (printing only, no semantics). */
#define RT_PHASE  "phase %d %s n=%d cm=%d seeded=%d max=%u"
#define RT_REPORT "report code=%d n=%zu dc=%d dh=%llu live=%zu"
#define RT_ENTRY  "  rank %d code %d: %s"
#define RT_LIVE   "  live %d at %d h=%llu"
#define RT_MSG    "  msg %s"
#define RT_STATS  "stats rounds=%llu turns=%llu handoffs=%llu drains=%llu ew=%llu colls=%llu rt=[%s]"

/* Optional hooks into the library run (the signal tests use them). */
struct rr_hooks {
    /* On a rank thread at the start of its rank function. */
    void (*rank_start)(int rank);
    /* On the driving thread before each kb_spawn / kb_start / kb_join. */
    void (*driver_enter)(void);
    /* On the driving thread: the run's ctx after kb_ctx_create, and NULL
     * before kb_ctx_destroy (for a watcher that reports a stuck run). */
    void (*ctx_live)(kb_ctx *ctx);
};

/* Run p on the library; the trace is left in tr_text(). clock (may be NULL)
 * gets the rounds each kb_join ran. hooks may be NULL. 0, or -1 if the
 * harness itself failed (kb_ctx_create and the like; the trace says why). */
int rr_run(const struct rp_prog *p, struct rp_clock *clock, const struct rr_hooks *hooks);

/* Deliberate errors in the model, to show that the checker catches a wrong
 * rule (test_rel_differential's mutation test). */
enum rm_mutant {
    RM_EXACT = 0,
    RM_CANCEL_REVERSE,     /* cancel live ranks in reverse rank order */
    RM_DRAIN_COLL_FIRST,   /* drain phase (b) before (a) */
    RM_WAIT_FAST_SWITCHES, /* a wait on a completed handle yields */
    RM_NO_FINAL_DRAIN,     /* no drain after the round in which the last rank finished */
    RM_ABORT_AFTER_CLEAR,  /* the abort hook sees the queues already cleared */
    RM_BARRIER_NO_YIELD,   /* the last arrival at a barrier does not yield */
    RM_BARRIER_SAME_ROUND, /* waiters leave an opened barrier in the round it opened in */
    RM_N
};

/* Run p on the model; the trace is left in tr_text(). clock gives the
 * rounds of kb_join calls with a positive timeout (NULL: run to the end). */
void rm_run(const struct rp_prog *p, const struct rp_clock *clock, enum rm_mutant mutant);

/* What the barriers of the last rm_run did, by phase kind ([0] round-robin,
 * [1] seeded): barriers a waiter then passed, by what opened them (the last
 * arrival, or a finishing rank), and turns a waiter spent at an opened
 * barrier because it opened earlier in the same round. */
struct rm_barrier_tally {
    long opened_by_arrival[2];
    long opened_by_finish[2];
    long held[2];
};
void rm_barrier_tally(struct rm_barrier_tally *out);

/* Run p on both and compare. 0 if the traces are identical; else 1, with
 * both traces and the first difference written to out (if not NULL). On
 * success tr_text() holds the (common) trace. */
int rel_check(const struct rp_prog *p, FILE *out);

#endif
