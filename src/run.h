/* SPDX-License-Identifier: MIT */
/*
 * A run: one spawn (kb_spawn) or process context (kb_start), its ranks and
 * their threads.
 *
 * Baton invariant. Exactly one of {the driver, rank 0..nprocs-1} holds the
 * baton; run->holder names it. Only the holder reads or writes the
 * scheduler fields marked (B) below, and it hands them over by writing
 * run->holder and posting the next holder's slot (baton.h), which orders
 * every write before the post with every read after the wait.
 *
 * What a thread does without the baton touches no (B) field: a waiting
 * thread looks at its own slot (spinning or yielding, wait_policy.h) and
 * sleeps on it; a rank that has just posted may nudge the slot of the
 * holder after next (round_loop.c: nudge_target), raising its worker's nudging mark
 * while it does; a parked worker looks at its own slot; a rank after its
 * last turn runs only glibc's thread exit, which the driver waits for with
 * pthread_join. The driver, waiting for the baton, reads only ck_pr words
 * (join.due, the watchdog's stamps) and the nudging marks.
 */
#ifndef KB_RUN_H
#define KB_RUN_H

#include <sys/types.h>
#include <stdint.h>
#include <time.h>

#include "baton.h"
#include "ctx.h"
#include "error.h"
#include "kbthreads.h"
#include "strategy.h"
#include "run_files.h"
#include "spawn_options.h"
#include "stats.h"
#include "wait_policy.h"
#include "watchdog.h"
#include "worker.h"

#define KB_DRIVER (-1)

enum kb_rank_state {
    KB_RS_NEW = 0,      /* thread exists, fn not called yet */
    KB_RS_STARTED = 1,  /* fn running or suspended */
    KB_RS_FINISHED = 2, /* fn returned or unwound, or cancelled before start */
};

enum kb_susp {
    KB_SUSP_NONE = 0,
    KB_SUSP_YIELD = 1,
    KB_SUSP_WAIT = 2,
    KB_SUSP_BARRIER = 3,
};

/* Whether the rank that handed the baton to the driver failed. The driver
 * resets it before every round and every cancellation; a debugger reads it
 * to show a failing run. */
enum kb_stop {
    KB_STOP_NONE = 0,
    KB_STOP_FAILED = 2, /* a rank failed; run->failed_rank says which (2: debuggers know it by value) */
};

struct kb_run;

struct kb_rank {
    struct kb_worker *w; /* the thread running this rank */
    struct kb_run *run;
    int index;
    /* (B) scheduler fields */
    int state;     /* enum kb_rank_state */
    int cancelled; /* set by the driver before it posts this rank to cancel it */
    int unwinding; /* set by the rank itself before pthread_exit */
    int failed;    /* a failure of this rank is in run->failure.errors */
    int susp;      /* enum kb_susp: where it last suspended */
    kb_handle susp_handle;
    pid_t tid; /* its worker's kernel thread id (debuggers) */
    /* with run->opt.observe: the current turn's start (wall and CPU time) */
    uint64_t turn_start_ns;
    uint64_t turn_cpu_ns;
};

/* A kb_start()ed spawn. It outlives its run: once the run finished (threads
 * joined, run freed) kb_join answers the cached result until it is freed.
 * The ctx stays busy (ctx->pc) until kb_process_context_free. */
struct kb_process_context {
    kb_ctx *ctx;
    struct kb_run *run;   /* NULL once finished */
    int result;           /* once finished: 1 or what kb__sched_round stopped with */
    kb_spawn_stats final; /* once finished: the totals (no per-rank arrays) */
};

struct kb_run {
    kb_ctx *ctx; /* its driver's slot is ctx->driver_slot */
    kb_rank_fn fn;
    void *arg;
    int nprocs;
    kb_cancel_mode cancel_mode;
    size_t stack_size;
    struct kb_rank *ranks;
    /* (B) scheduler fields (round_loop.c, rank.c) */
    int holder;        /* KB_DRIVER or a rank index */
    int nlive;         /* number of not-finished ranks */
    int *order;        /* this round's ranks in visiting order (capacity nprocs) */
    int norder;        /* entries in order */
    int pos;           /* index in order of the rank holding the baton */
    uint64_t round_t0; /* with a timeline: when the current round began */
    int stop;          /* enum kb_stop, written by the rank handing to the driver */
    int failed_rank;   /* with KB_STOP_FAILED */
    /* the barrier (round_loop.c: kb__barrier_check, rank.c: kb_barrier): arrivals
     * at the current generation; the generation, which grows by one each
     * time it opens; and the round it last opened in. A waiter leaves once
     * the generation it arrived at has passed and a later round has begun. */
    struct {
        int arrived;
        unsigned gen;
        uint64_t open_round;
    } barrier;
    struct kb_failure failure;   /* (B) error.h */
    struct kb_counters counters; /* (B) stats.h */
    struct kb_strategy strategy; /* (B) once running; strategy.h */
    /* A timed kb_join (spawn.c, round_loop.c). timed and deadline are the
     * driver's. due is a ck_pr word, the one scheduler field written
     * without the baton: the driver sets it while ranks run (round_loop.c:
     * driver_wait) once the deadline passed, and clears it at the start of
     * each kb_join, holding the baton; ranks only read it, and a rank
     * ending a round hands the baton to the driver while it is set
     * (round_loop.c: round_boundary). */
    struct {
        int timed;                /* a timed kb_join is driving: due is to be set at... */
        struct timespec deadline; /* ...this absolute CLOCK_MONOTONIC time */
        int due;
    } join;
    /* How threads wait for the baton (wait_policy.h): the holder's. */
    struct kb_wait_policy *wait;
    /* (B) some rank nudged (round_loop.c: nudge_target found a slot): kb__wait_nudges
     * must look at the workers' nudging marks. */
    int nudged;
    pid_t driver_tid;             /* the thread driving now or last (debuggers) */
    struct kb_run_options opt;    /* fixed once created; spawn_options.h */
    struct kb_run_files files;    /* run_files.h */
    struct kb_watch_stamps watch; /* watchdog.h */
    /* the registry of live runs (registry.c), under its lock */
    struct {
        struct kb_run *prev, *next;
    } registry;
};

/* Create a run (run.c): resolve its options and the environment's
 * (spawn_options.c), open its files (run_files.c), give every rank a
 * worker (parked ones from the ctx's pool first, then new threads; each
 * waits for its rank's first turn), register it for debuggers and bind
 * every rank. 0; or, with nothing left behind: KB_ENOMEM; KB_EAGAIN or
 * KB_EINVAL (a thread could not be created, or not with that stack size);
 * a negative errno (a record, replay or trace file could not be opened);
 * KB_EINVAL (a malformed recording); KB_EDIVERGED (a recording for another
 * nprocs, or not that many recordings in the file). Driver, owning ctx. */
int kb__run_create(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                   struct kb_run **out);
/* Write the run's outputs (record, timeline, the caller's statistics),
 * return every worker still there to the ctx's pool (those whose rank
 * unwound were joined already) and free the run. Every rank must be
 * finished. Driver, owning ctx. */
void kb__run_destroy(struct kb_run *run);

#endif
