/* SPDX-License-Identifier: MIT */
/* Waits, completions and the pending queues: the calls both ranks and the
 * driver side make on a ctx. Each checks its arguments, then who is calling
 * (ctx.h's ownership rule), then acts. */
#include "handle_calls.h"

#include <stddef.h>

#include "ctx.h"
#include "rank.h"
#include "run.h"
#include "timeline.h"

int kb__driver_wait(kb_ctx *ctx, kb_handle h, void *meta, kb_wait_origin origin)
{
    /* The reference's fast path applies on the driver side too. */
    if (kb__completed_has(&ctx->done, h))
        return 0;
    int rc = kb__engine_wait(ctx, h, meta, origin);
    if (rc != 0)
        return rc; /* engine codes pass through unchanged; h stays pending */
    return kb__completed_add(&ctx->done, h);
}

int kb_wait_meta(kb_ctx *ctx, kb_handle h, void *meta)
{
    if (!ctx || !kb__handle_valid(h))
        return KB_EINVAL;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return access;
    if (access == KB_ACCESS_RANK)
        return kb__rank_wait(kb__self(), h); /* meta is ignored inside a rank */
    int rc = kb__driver_wait(ctx, h, meta, KB_WAIT_DRIVER);
    kb__ctx_access_end(ctx, access);
    return rc;
}

int kb_wait(kb_ctx *ctx, kb_handle h)
{
    return kb_wait_meta(ctx, h, NULL);
}

int kb_enqueue_wait(kb_ctx *ctx, kb_handle h)
{
    if (!ctx || !kb__handle_valid(h))
        return KB_EINVAL;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return access;
    int rc = kb__queue_push(&ctx->waits, &h);
    kb__ctx_access_end(ctx, access);
    return rc;
}

int kb_complete(kb_ctx *ctx, kb_handle h)
{
    if (!ctx || !kb__handle_valid(h))
        return KB_EINVAL;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return access;
    int rc = kb__completed_add(&ctx->done, h);
    kb__ctx_access_end(ctx, access);
    return rc;
}

int kb_is_completed(const kb_ctx *ctx, kb_handle h)
{
    if (!ctx || !kb__handle_valid(h))
        return KB_EINVAL;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return access;
    int rc = kb__completed_has(&ctx->done, h);
    kb__ctx_access_end(ctx, access);
    return rc;
}

size_t kb_completed_handles(const kb_ctx *ctx, kb_handle *out, size_t cap)
{
    if (!ctx || (!out && cap > 0))
        return 0;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return 0;
    size_t n = kb__completed_copy(&ctx->done, out, cap);
    kb__ctx_access_end(ctx, access);
    return n;
}

int kb_collective_submit(kb_ctx *ctx, kb_handle h, int sip_id, void *meta)
{
    if (!ctx || !kb__handle_valid(h))
        return KB_EINVAL;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return access;
    kb_collective c = {.handle = h, .sip_id = sip_id, .meta = meta};
    int rc = kb__queue_push(&ctx->colls, &c);
    if (rc == 0 && ctx->run) {
        ctx->run->counters.collectives++;
        kb__tl_instant(ctx->run, access == KB_ACCESS_RANK ? kb__self()->index : KB_DRIVER, KB_TL_COLLECTIVE,
                       h, sip_id);
    }
    kb__ctx_access_end(ctx, access);
    return rc;
}

static size_t pending_copy(const kb_ctx *ctx, const struct kb_queue *q, void *out, size_t cap)
{
    if (!ctx || (!out && cap > 0))
        return 0;
    int access = kb__ctx_access_begin(ctx);
    if (access < 0)
        return 0;
    size_t n = kb__queue_copy(q, out, cap);
    kb__ctx_access_end(ctx, access);
    return n;
}

size_t kb_pending_waits(const kb_ctx *ctx, kb_handle *out, size_t cap)
{
    return ctx ? pending_copy(ctx, &ctx->waits, out, cap) : 0;
}

size_t kb_pending_collectives(const kb_ctx *ctx, kb_collective *out, size_t cap)
{
    return ctx ? pending_copy(ctx, &ctx->colls, out, cap) : 0;
}
