/* SPDX-License-Identifier: MIT */
/*
 * The set of completed handles of a ctx: a Concurrency Kit hash set
 * (ck_hs) storing each handle directly as its key. ck_hs reserves the keys
 * NULL and ~0 (empty and tombstone), which is why kb_handle reserves 0 and
 * UINT64_MAX. Touched only by the thread that may use the ctx.
 */
#ifndef KB_COMPLETED_H
#define KB_COMPLETED_H

#include <ck_hs.h>

#include "kbthreads.h"

struct kb_completed {
    ck_hs_t hs;
};

/* 0 or KB_ENOMEM. */
int kb__completed_init(struct kb_completed *c);
void kb__completed_free(struct kb_completed *c);
/* Empty the set (a new table of the initial size): 0, or KB_ENOMEM with
 * the set unchanged. */
int kb__completed_clear(struct kb_completed *c);
int kb__completed_has(const struct kb_completed *c, kb_handle h);
/* 0 (added or already there) or KB_ENOMEM. */
int kb__completed_add(struct kb_completed *c, kb_handle h);
/* Copy up to cap handles (in the set's order) into out; return how many
 * the set holds. */
size_t kb__completed_copy(const struct kb_completed *c, kb_handle *out, size_t cap);

#endif
