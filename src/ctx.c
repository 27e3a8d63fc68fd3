/* SPDX-License-Identifier: MIT */
/* The ctx: creation, destruction, ownership and the engine hook calls. */
#include "ctx.h"

#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "annotate.h"
#include "clock.h"
#include "rank.h"
#include "run.h"
#include "timeline.h"
#include "worker.h"

/* A byte whose address identifies the calling thread while it lives. */
static _Thread_local char tls_token;
/* >0 while this thread is inside an engine hook (hooks may nest: a
 * driver-side kb_wait from a hook calls the wait hook again). */
static _Thread_local int tls_hook_depth;

uintptr_t kb__thread_token(void)
{
    return (uintptr_t)&tls_token;
}

int kb_in_hook(void)
{
    return tls_hook_depth > 0;
}

int kb_ctx_create(const kb_engine *engine, kb_ctx **out)
{
    if (!out)
        return KB_EINVAL;
    *out = NULL;
    kb_ctx *ctx = kb__zalloc_aligned(KB_CACHELINE, sizeof *ctx); /* it holds the driver's slot */
    if (!ctx)
        return KB_ENOMEM;
    if (kb__slot_init(&ctx->driver_slot) != 0) {
        free(ctx);
        return KB_ENOMEM;
    }
    if (pthread_mutex_init(&ctx->run_lock, NULL) != 0) {
        kb__slot_destroy(&ctx->driver_slot);
        free(ctx);
        return KB_ENOMEM;
    }
    if (engine)
        ctx->engine = *engine;
    ctx->running = -1;
    kb__hb_sync_word(&ctx->owner, sizeof ctx->owner);
    kb__hb_sync_word(&ctx->running, sizeof ctx->running);
    kb__queue_init(&ctx->waits, sizeof(kb_handle));
    kb__queue_init(&ctx->colls, sizeof(kb_collective));
    if (kb__completed_init(&ctx->done) != 0) {
        pthread_mutex_destroy(&ctx->run_lock);
        kb__slot_destroy(&ctx->driver_slot);
        free(ctx);
        return KB_ENOMEM;
    }
    *out = ctx;
    return 0;
}

/* Own an idle ctx for a call made between spawns, by the application:
 * KB_EPERM from a rank, KB_EBUSY from an engine hook or while ctx is busy. */
static int own_between_spawns(kb_ctx *ctx)
{
    if (kb__self())
        return KB_EPERM;
    if (kb_in_hook())
        return KB_EBUSY;
    return kb__ctx_own_idle(ctx) != 0 ? KB_EBUSY : 0;
}

int kb_ctx_destroy(kb_ctx *ctx)
{
    if (!ctx)
        return 0;
    int rc = own_between_spawns(ctx);
    if (rc != 0)
        return rc;
    kb__pool_drain(ctx); /* joins every parked thread */
    kb__graveyard_free(ctx);
    free(ctx->wait_memory); /* the wait policy's record: one block */
    kb__queue_free(&ctx->waits);
    kb__queue_free(&ctx->colls);
    kb__completed_free(&ctx->done);
    pthread_mutex_destroy(&ctx->run_lock);
    kb__slot_destroy(&ctx->driver_slot);
    free(ctx);
    return 0;
}

int kb_ctx_reset(kb_ctx *ctx)
{
    if (!ctx)
        return KB_EINVAL;
    int owned = own_between_spawns(ctx);
    if (owned != 0)
        return owned;
    /* The completed set first: the only step that can fail (a new, empty
     * table), and then nothing has changed. */
    int rc = kb__completed_clear(&ctx->done);
    if (rc == 0) {
        kb__queue_clear(&ctx->waits);
        kb__queue_clear(&ctx->colls);
    }
    kb__ctx_disown(ctx);
    return rc;
}

int kb_running_rank(const kb_ctx *ctx)
{
    if (!ctx)
        return KB_EINVAL;
    return ck_pr_load_int(&((kb_ctx *)ctx)->running);
}

void kb__ctx_set_run(kb_ctx *ctx, struct kb_run *run)
{
    pthread_mutex_lock(&ctx->run_lock);
    ctx->run = run;
    kb__ctx_running(ctx, run ? KB_RUNNING_DRIVER : -1); /* a run starts with its driver holding the baton */
    pthread_mutex_unlock(&ctx->run_lock);
}

int kb__ctx_own(kb_ctx *ctx)
{
    if (!ck_pr_cas_ptr(&ctx->owner, NULL, (void *)kb__thread_token()))
        return KB_EBUSY;
    kb__hb_acquire(&ctx->owner);
    return 0;
}

int kb__ctx_own_idle(kb_ctx *ctx)
{
    if (kb__ctx_own(ctx) != 0)
        return KB_EBUSY;
    if (ctx->run || ctx->pc) {
        kb__ctx_disown(ctx);
        return KB_EBUSY;
    }
    return 0;
}

void kb__ctx_disown(kb_ctx *ctx)
{
    kb__hb_release(&ctx->owner);
    ck_pr_fence_store();
    ck_pr_store_ptr(&ctx->owner, NULL);
}

int kb__ctx_access_begin(const kb_ctx *cctx)
{
    kb_ctx *ctx = (kb_ctx *)cctx; /* the owner word is mutable even through const */
    struct kb_rank *rk = kb__self();
    if (rk) {
        /* A running rank holds its run's baton by construction. */
        return rk->run->ctx == ctx ? KB_ACCESS_RANK : KB_EPERM;
    }
    if ((uintptr_t)ck_pr_load_ptr(&ctx->owner) == kb__thread_token())
        return KB_ACCESS_NESTED;
    return kb__ctx_own(ctx) == 0 ? KB_ACCESS_ENTERED : KB_EBUSY;
}

void kb__ctx_access_end(const kb_ctx *ctx, int access)
{
    if (access == KB_ACCESS_ENTERED)
        kb__ctx_disown((kb_ctx *)ctx);
}

int kb__engine_wait(kb_ctx *ctx, kb_handle h, void *meta, kb_wait_origin origin)
{
    struct kb_run *run = ctx->run;
    if (run)
        run->counters.engine_waits++;
    if (!ctx->engine.wait)
        return 0;
    uint64_t t0 = run && run->files.tl ? kb__now_ns() : 0;
    tls_hook_depth++;
    int rc = ctx->engine.wait(ctx->engine.self, h, meta, origin);
    tls_hook_depth--;
    if (run && run->files.tl)
        kb__tl_slice(run, KB_DRIVER, KB_TL_ENGINE_WAIT, t0, kb__now_ns(), h, origin);
    return rc;
}

void kb__engine_bind(kb_ctx *ctx, int rank)
{
    if (!ctx->engine.bind)
        return;
    tls_hook_depth++;
    ctx->engine.bind(ctx->engine.self, ctx, rank);
    tls_hook_depth--;
}

void kb__engine_abort(kb_ctx *ctx)
{
    if (!ctx->engine.abort)
        return;
    tls_hook_depth++;
    ctx->engine.abort(ctx->engine.self, ctx);
    tls_hook_depth--;
}
