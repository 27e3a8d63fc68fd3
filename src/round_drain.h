/* SPDX-License-Identifier: MIT */
/*
 * The drain run after every round (round_drain.c).
 */
#ifndef KB_ROUND_DRAIN_H
#define KB_ROUND_DRAIN_H

#include "ctx.h"

/* Run both drain phases until both queues are empty. 0, or the first
 * nonzero engine code (KB_ENOMEM if a completion could not be recorded)
 * with *failed the handle it came from. Driver only. */
int kb__drain(kb_ctx *ctx, kb_handle *failed, kb_wait_origin *failed_origin);

#endif
