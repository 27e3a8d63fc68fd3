/* SPDX-License-Identifier: MIT */
/*
 * The drain: run by the driver after every round (reference: _drain_pending).
 *
 *   while either queue is non-empty:
 *     (a) pop pending worker waits FIFO; for each handle not yet completed,
 *         engine wait (KB_WAIT_QUEUED), then mark it completed (a handle
 *         queued twice is waited once);
 *     (b) pop pending collectives FIFO; complete each through a driver-side
 *         wait (KB_WAIT_COLLECTIVE, with its meta; the fast path if (a)
 *         already completed it).
 *
 * (a) is emptied before (b) even when a collective was queued first, and
 * the outer loop repeats when an engine wait queued new work. The driver
 * holds the baton throughout, so hooks may use the ctx freely.
 */
#include "round_drain.h"

#include "ctx.h"
#include "handle_calls.h"

int kb__drain(kb_ctx *ctx, kb_handle *failed, kb_wait_origin *failed_origin)
{
    while (kb__queue_len(&ctx->waits) > 0 || kb__queue_len(&ctx->colls) > 0) {
        kb_handle h;
        while (kb__queue_pop(&ctx->waits, &h)) {
            if (kb__completed_has(&ctx->done, h))
                continue;
            int rc = kb__engine_wait(ctx, h, NULL, KB_WAIT_QUEUED);
            if (rc == 0)
                rc = kb__completed_add(&ctx->done, h);
            if (rc != 0) {
                *failed = h;
                *failed_origin = KB_WAIT_QUEUED;
                return rc;
            }
        }
        kb_collective c;
        while (kb__queue_pop(&ctx->colls, &c)) {
            int rc = kb__driver_wait(ctx, c.handle, c.meta, KB_WAIT_COLLECTIVE);
            if (rc != 0) {
                *failed = c.handle;
                *failed_origin = KB_WAIT_COLLECTIVE;
                return rc;
            }
        }
    }
    return 0;
}
