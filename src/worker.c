/* SPDX-License-Identifier: MIT */
/* Workers and the pool a ctx keeps (see worker.h). */
#include "worker.h"

#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "annotate.h"
#include "ctx.h"
#include "rank.h"
#include "run.h"
#include "wait_policy.h"
#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

/* Its thread has ended or never started: nothing waits on the slot. */
static void free_worker(struct kb_worker *w)
{
    kb__slot_destroy(&w->slot);
    free(w);
}

static void *worker_main(void *arg)
{
    struct kb_worker *w = arg;
    /* A ck_pr store: debuggers and no library code read it, at any time. */
    ck_pr_store_int(&w->tid, kb__sys_tid());
    kb__sys_get_affinity(&w->orig_mask);
    struct kb_wait_budget wait = {0}; /* a fresh thread has nothing to look for */
    for (;;) {
        /* A rank's first turn, or EXIT. Runs with nudges may nudge a
         * waiting worker (a rank about to start); a stale nudge after its
         * spawn ended costs one watch. It watches yielding unless it is
         * pinned (KB_AFFINITY_SPREAD, from its rank's first turn on): an
         * unpinned thread may share its CPU with the holder. */
        wait.watch = KB_WAIT_LOOK_NS | (w->pinned_cpu < 0 ? KB_WATCH_YIELD : 0);
        kb__slot_wait_budget(&w->slot, &wait);
        if (w->cmd == KB_CMD_EXIT)
            return NULL;
        /* Read while we hold the baton: once our rank has handed it on, the
         * driver may assign us to its next spawn and write the field. */
        wait.look_ns = w->park_look_ns;
        kb__rank_run(w, w->rank); /* returns when the rank's function has returned */
    }
}

int kb__worker_get(struct kb_ctx *ctx, size_t stack_size, struct kb_worker **out, int *created)
{
    if (ctx->pool && ctx->pool_stack_size != stack_size)
        kb__pool_drain(ctx); /* parked threads of another stack size */
    if (ctx->pool) {
        struct kb_worker *w = ctx->pool;
        ctx->pool = w->next;
        ctx->pool_count--;
        w->next = NULL;
        *out = w;
        *created = 0;
        return 0;
    }
    struct kb_worker *w = kb__zalloc_aligned(KB_CACHELINE, sizeof *w);
    if (!w)
        return KB_ENOMEM;
    if (kb__slot_init(&w->slot) != 0) {
        free(w);
        return KB_ENOMEM;
    }
    kb__hb_sync_word(&w->tid, sizeof w->tid);
    kb__hb_sync_word(&w->nudging, sizeof w->nudging); /* ck_pr, written by a nudger without the baton */
    w->stack_size = stack_size;
    w->named_rank = -1;
    w->pinned_cpu = -1;
    pthread_attr_t attr;
    if (kb__fault_hit(KB_FAULT_SYNC) || pthread_attr_init(&attr) != 0) {
        free_worker(w);
        return KB_ENOMEM;
    }
    int err = stack_size ? pthread_attr_setstacksize(&attr, stack_size) : 0;
    if (err == 0)
        err = kb__fault_hit(KB_FAULT_THREAD) ? EAGAIN : pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        free_worker(w);
        return err == EINVAL ? KB_EINVAL : KB_EAGAIN; /* any creation failure, ENOMEM included */
    }
    *out = w;
    *created = 1;
    return 0;
}

void kb__worker_put(struct kb_ctx *ctx, struct kb_worker *w)
{
    w->rank = NULL;
    if (!ctx->pool)
        ctx->pool_stack_size = w->stack_size;
    w->next = ctx->pool;
    ctx->pool = w;
    ctx->pool_count++;
}

void kb__worker_end(struct kb_ctx *ctx, struct kb_worker *w)
{
    if (!w->exited) {
        w->cmd = KB_CMD_EXIT;
        kb__slot_post(&w->slot);
    }
    pthread_join(w->thread, NULL);
    free(w->altstack);
    w->altstack = NULL;
#ifdef KB_HAVE_VALGRIND_H
    /* Valgrind models a FUTEX_WAKE as a write of the futex word when the
     * system call returns, which can be after the owner of the word (this
     * worker) has taken the post, ended and been freed: a rank that posted
     * a sibling's slot is still "inside" futex_wake while the sibling
     * unwinds and the driver frees it. DRD then reported that write
     * against whatever the memory held next. The kernel reads and writes
     * nothing there, so only the tools need the memory kept: until every
     * thread of the ctx is joined (kb_ctx_destroy). */
    if (RUNNING_ON_VALGRIND) {
        w->next = ctx->graveyard;
        ctx->graveyard = w;
        return;
    }
#endif
    (void)ctx;
    free_worker(w);
}

void kb__graveyard_free(struct kb_ctx *ctx)
{
    while (ctx->graveyard) {
        struct kb_worker *w = ctx->graveyard;
        ctx->graveyard = w->next;
        free_worker(w);
    }
}

void kb__pool_drain(struct kb_ctx *ctx)
{
    /* One at a time: each thread's exit overlaps nothing. */
    while (ctx->pool) {
        struct kb_worker *w = ctx->pool;
        ctx->pool = w->next;
        ctx->pool_count--;
        kb__worker_end(ctx, w);
    }
}

void kb__worker_pin(struct kb_worker *w, int cpu)
{
    if (cpu < 0) {
        kb__sys_set_affinity(&w->orig_mask);
        w->pinned_cpu = -1;
        return;
    }
    /* Best effort: a CPU the process may not use keeps the thread unpinned. */
    w->pinned_cpu = kb__sys_pin_self(cpu) == 0 ? cpu : -1;
}
