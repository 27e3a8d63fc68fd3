/* SPDX-License-Identifier: MIT */
/*
 * Race-detector precision, clean half: ranks share plain (non-atomic) data
 * with no locks, across thousands of handoffs, and ThreadSanitizer, Helgrind
 * and DRD must report nothing. Every access below is ordered only by the
 * baton (or by the ctx ownership handover between driver threads), so a
 * report means an edge of the protocol is missing from the annotations.
 *
 * What is shared, and across which edges:
 *   - rank -> next rank (rank-to-rank handoff): a counter, a log of who ran
 *     last, a string buffer, and a linked list whose nodes one rank mallocs
 *     and a later rank frees;
 *   - rank -> driver and driver -> rank (round ends, drains): the engine's
 *     wait hook reads what ranks wrote and writes what waiting ranks read;
 *   - barrier openings, kb_wait completions, RETURN and UNWIND cancellation
 *     (cleanup handlers and KB_ECANCELED paths touch the data too), a failed
 *     rank's record, rank thread exit and join;
 *   - driver thread -> driver thread: kb_start on the main thread, kb_join
 *     on another thread, kb_process_context_free on the main thread again.
 *
 * Usage: kb_share_clean [ITERATIONS]  (default 1000: 8 ranks x 1000 turns)
 * Exits 0 when every shared value is what the round-robin order implies.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kbthreads.h"

#define NRANKS 8

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "kb_share_clean: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* ---- plain shared data ------------------------------------------------- */

struct node {
    struct node *next;
    int rank, turn;
};

static long counter;       /* +1 per rank turn */
static int last_rank = -1; /* who ran last */
static char text[64];      /* rewritten by every turn */
static struct node *list;  /* pushed by one rank, freed by a later one */
static long list_pushed, list_freed;
static long from_driver;    /* written by the engine's wait hook */
static long seen_by_driver; /* ranks' counter as the hook last saw it */
static long hook_calls;
static pthread_t hook_thread; /* the driver thread that ran the last hook */
static int hook_thread_set;
static long driver_switches; /* hooks that ran on another thread than the last */
static int barrier_passes[NRANKS];
static long cleanup_runs; /* UNWIND cleanup handlers and RETURN paths */

static long iterations = 1000;

/* ---- the engine: completes every handle, touching shared data ----------- */

static int engine_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)self;
    (void)meta;
    (void)origin;
    hook_calls++;
    /* Driver-side data handed between driver threads (phase 4). */
    if (hook_thread_set && !pthread_equal(hook_thread, pthread_self()))
        driver_switches++;
    hook_thread = pthread_self();
    hook_thread_set = 1;
    seen_by_driver = counter;  /* rank data, read on the driver */
    from_driver = (long)h * 3; /* driver data, read by the waiting rank */
    return 0;
}

static void abort_hook(void *self, kb_ctx *ctx)
{
    (void)self;
    (void)ctx;
    snprintf(text, sizeof text, "aborted after %ld turns", counter);
}

/* ---- phase 1: long run, every suspension kind ---------------------------- */

/* One turn's worth of shared-data work. */
static void touch(int rank)
{
    counter++;
    last_rank = rank;
    snprintf(text, sizeof text, "rank %d turn %ld", rank, counter);
    struct node *n = malloc(sizeof *n);
    CHECK(n != NULL);
    n->next = list;
    n->rank = rank;
    n->turn = (int)counter;
    list = n;
    list_pushed++;
    /* Free a node another rank pushed (the allocation crosses the baton). */
    if (list->next && list->next->rank != rank) {
        struct node *old = list->next;
        list->next = old->next;
        free(old);
        list_freed++;
    }
}

static int long_rank(int rank, void *arg)
{
    kb_ctx *ctx = arg;
    for (long i = 0; i < iterations; i++) {
        /* Round-robin: the previous turn was the previous rank's. */
        CHECK(last_rank == (rank + NRANKS - 1) % NRANKS || (last_rank == -1 && rank == 0 && i == 0));
        touch(rank);
        if (i % 10 == 5) {
            kb_handle h = (kb_handle)(1000 + i * NRANKS + rank);
            CHECK(kb_wait(ctx, h) == 0);
            CHECK(from_driver >= 3000); /* some drain's value, written on the driver */
        } else if (i % 50 == 27) {
            CHECK(kb_barrier() == 0);
            barrier_passes[rank]++;
        } else {
            CHECK(kb_yield() == 0);
        }
        CHECK(strncmp(text, "rank ", 5) == 0 || strncmp(text, "aborted", 7) == 0);
    }
    return 0;
}

/* ---- phase 2 and 3: failure, then RETURN / UNWIND cancellation ----------- */

static void cleanup(void *arg)
{
    (void)arg;
    cleanup_runs++;
    touch(kb_rank());
}

static int failing_rank(int rank, void *arg)
{
    (void)arg;
    /* volatile: pthread_cleanup_push is a setjmp, and -Os keeps rc in a
     * register it could clobber (-Wclobbered in a MinSizeRel build). */
    volatile int rc = 0;
    pthread_cleanup_push(cleanup, NULL);
    for (int i = 0; i < 20 && rc == 0; i++) {
        touch(rank);
        if (rank == 2 && i == 10)
            kb_raise(7, "rank %d gives up at turn %ld", rank, counter);
        rc = kb_yield();
    }
    if (rc == KB_ECANCELED) {
        /* RETURN mode: the rank's own code runs after the cancellation. */
        cleanup_runs++;
        touch(rank);
    }
    pthread_cleanup_pop(0);
    return rc;
}

/* ---- phase 4: two driver threads take turns joining one process context - */

static int pc_rank(int rank, void *arg)
{
    kb_ctx *ctx = arg;
    for (int i = 0; i < 50; i++) {
        touch(rank);
        /* Every third turn a wait, so drains call the engine on
         * whichever thread drives that round. */
        int rc = i % 3 == 1 ? kb_wait(ctx, (kb_handle)(1000000 + i * NRANKS + rank)) : kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Drive pc a round at a time until it finished. The other driver thread
 * does the same: whoever owns the ctx drives (the other gets KB_EBUSY), so
 * the rounds, the ranks' data, the engine's data and the run's driver-side
 * state move between threads only through the ctx ownership handover. */
static void join_rounds(kb_process_context *pc)
{
    for (;;) {
        int rc = kb_join(pc, 0, NULL);
        if (rc == 1)
            return;
        CHECK(rc == 0 || rc == KB_EBUSY);
        if (rc == KB_EBUSY)
            sched_yield();
        else /* let the other thread take the next round (no sync: a sleep) */
            nanosleep(&(struct timespec){0, 1000000L}, NULL);
    }
}

static void *joiner(void *arg)
{
    join_rounds(arg);
    return NULL;
}

static void drain_list(void)
{
    while (list) {
        struct node *n = list;
        list = n->next;
        free(n);
        list_freed++;
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        iterations = strtol(argv[1], NULL, 10);
    CHECK(iterations >= 60);

    kb_engine engine = {.wait = engine_wait, .abort = abort_hook};
    kb_ctx *ctx;
    CHECK(kb_ctx_create(&engine, &ctx) == 0);

    /* Phase 1. */
    CHECK(kb_spawn(ctx, long_rank, ctx, NRANKS, NULL, NULL) == 0);
    CHECK(counter == iterations * NRANKS);
    CHECK(last_rank == NRANKS - 1);
    CHECK(seen_by_driver > 0 && hook_calls > 0);
    for (int r = 0; r < NRANKS; r++)
        CHECK(barrier_passes[r] == barrier_passes[0] && barrier_passes[0] > 0);

    /* Phases 2 and 3: the same failure in both cancel modes. */
    for (int mode = 0; mode < 2; mode++) {
        kb_spawn_opts opts = {.cancel_mode = mode == 0 ? KB_CANCEL_RETURN : KB_CANCEL_UNWIND};
        kb_spawn_error *err = NULL;
        long runs_before = cleanup_runs;
        CHECK(kb_spawn(ctx, failing_rank, NULL, 4, &opts, &err) == KB_ESPAWN);
        CHECK(kb_spawn_error_count(err) == 1 && kb_spawn_error_get(err, 0)->rank == 2);
        kb_spawn_error_free(err);
        /* ranks 0, 1, 3 cancelled (their cleanup ran) and rank 2 unwound */
        CHECK(cleanup_runs - runs_before == 4);
        CHECK(strncmp(text, "aborted", 7) == 0);
    }

    /* Phase 4. */
    kb_process_context *pc;
    CHECK(kb_start(ctx, pc_rank, ctx, NRANKS, NULL, &pc) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, joiner, pc) == 0);
    join_rounds(pc);
    CHECK(pthread_join(t, NULL) == 0);
    kb_process_context_free(pc);
    CHECK(last_rank == NRANKS - 1);

    CHECK(kb_ctx_destroy(ctx) == 0);
    drain_list();
    CHECK(list_pushed == list_freed);
    printf(
        "kb_share_clean: %ld rank turns, %ld engine waits (%ld on a new driver thread), %ld cleanups: ok\n",
        counter, hook_calls, driver_switches, cleanup_runs);
    return 0;
}
