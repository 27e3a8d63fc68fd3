/* SPDX-License-Identifier: MIT */
/*
 * The ctx and who may touch it.
 *
 * Ownership rule. At any moment one thread may use a ctx:
 *   - while a rank of its live spawn runs, that rank (it holds the baton);
 *   - otherwise the thread recorded in ctx->owner: the driver inside
 *     kb_spawn/kb_join (and the engine hooks it calls), or any thread
 *     inside a single kb_* call on a ctx with no driver.
 * ctx->owner is a ck_pr word holding the owning thread's token (the address
 * of a thread-local), 0 when nobody owns the ctx. A thread enters by CAS
 * 0 -> token (acquire) and leaves by storing 0 (release); a thread that
 * already owns it (a hook calling back) enters "nested" and leaves nothing.
 * The fields below the owner are touched only under this rule.
 */
#ifndef KB_CTX_H
#define KB_CTX_H

#include <ck_pr.h>
#include <pthread.h>
#include <stdint.h>

#include "baton.h"
#include "completed.h"
#include "kbthreads.h"
#include "queue.h"

struct kb_run;
struct kb_worker;
struct kb_process_context;

struct kb_ctx {
    /* The driver's wait slot, first (its own cache line; the ctx is
     * allocated aligned). It lives as long as the ctx, not per run, so the
     * race detectors' happens-before records for it are never carried over
     * to unrelated memory when a run is freed and its memory reused. */
    struct kb_slot driver_slot;
    kb_engine engine;              /* copied at create; all-NULL without an engine */
    void *owner;                   /* ck_pr: token of the owning thread, NULL = none */
    struct kb_queue waits;         /* pending worker waits (kb_handle), FIFO */
    struct kb_queue colls;         /* pending collectives (kb_collective), FIFO */
    struct kb_completed done;      /* completed handles; survives spawns */
    struct kb_run *run;            /* the live run (kb_spawn, or a pc not finished), or NULL */
    struct kb_process_context *pc; /* the process context not yet freed, or NULL */
    struct kb_worker *pool;        /* parked workers, kept between spawns */
    size_t pool_count;             /* how many (spawn_limits.c reads it) */
    size_t pool_stack_size;        /* their stack size (all the same) */
    /* Under Valgrind only: ended workers whose memory is freed at destroy,
     * not at once (worker.c: kb__worker_end says why). */
    struct kb_worker *graveyard;
    /* The wait policy's record of the last adapting spawn (wait_policy.h),
     * opaque here. The driver's, with the ctx owned. */
    struct kb_wait_memory *wait_memory;
    /* Held while ctx->run is set or cleared, and by kb_ctx_dump while it
     * reads the run from a thread that does not own the ctx. */
    pthread_mutex_t run_lock;
    /* ck_pr: the rank running its own code (kb_running_rank), else -1.
     * Written by the rank holding the baton, read by any thread. */
    int running;
};

enum kb_access {
    KB_ACCESS_RANK = 1,    /* a rank of ctx's live spawn, holding the baton */
    KB_ACCESS_ENTERED = 2, /* driver side, ownership taken by this call */
    KB_ACCESS_NESTED = 3,  /* driver side, this thread already owned ctx */
};

/* A single kb_* call on ctx begins: classify the calling thread, taking
 * ownership for the call when nobody owns ctx. A kb_access value, or
 * KB_EPERM (a rank calling on another ctx) / KB_EBUSY (someone else owns
 * ctx). Pass the value to kb__ctx_access_end when the call ends. */
int kb__ctx_access_begin(const kb_ctx *ctx);
void kb__ctx_access_end(const kb_ctx *ctx, int access);

/* Driver-side ownership for kb_spawn/kb_start/kb_join, held for the whole
 * call, released by kb__ctx_disown: 0 or KB_EBUSY. */
int kb__ctx_own(kb_ctx *ctx);
/* The same, for a ctx that must have no spawn or process context either. */
int kb__ctx_own_idle(kb_ctx *ctx);
void kb__ctx_disown(kb_ctx *ctx);

/* The calling thread's token (unique while the thread lives). */
uintptr_t kb__thread_token(void);

/* Engine hooks. The hook depth of the calling thread is raised around each
 * call so kb_spawn/kb_start/kb_join/kb_ctx_destroy can refuse (KB_EBUSY);
 * kb_in_hook (public, ctx.c) reads it. */
int kb__engine_wait(kb_ctx *ctx, kb_handle h, void *meta, kb_wait_origin origin);
void kb__engine_bind(kb_ctx *ctx, int rank);
void kb__engine_abort(kb_ctx *ctx);

/* Set ctx->run (NULL when the run ends, before it is destroyed), under
 * run_lock. */
void kb__ctx_set_run(kb_ctx *ctx, struct kb_run *run);

/* The rank holding the baton starts (rank >= 0) or stops (-1) running its
 * own code, or the driver gets the baton (KB_RUNNING_DRIVER):
 * kb_running_rank's answer. */
static inline void kb__ctx_running(kb_ctx *ctx, int rank)
{
    ck_pr_store_int(&ctx->running, rank);
}

static inline int kb__handle_valid(kb_handle h)
{
    return h != KB_HANDLE_RESERVED_LOW && h != KB_HANDLE_RESERVED_HIGH;
}

#endif
