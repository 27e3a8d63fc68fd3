/* SPDX-License-Identifier: MIT */
/*
 * The calls on a ctx's handles and pending queues (handle_calls.c): the
 * public ones are kbthreads.h's; this is the one the drain shares.
 */
#ifndef KB_HANDLE_CALLS_H
#define KB_HANDLE_CALLS_H

#include "ctx.h"

/* Driver-side wait: the fast path, then the engine, then mark completed.
 * Never enqueues. */
int kb__driver_wait(kb_ctx *ctx, kb_handle h, void *meta, kb_wait_origin origin);

#endif
