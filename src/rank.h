/* SPDX-License-Identifier: MIT */
/*
 * The rank side (rank.c): a rank thread's life and the calls rank
 * functions make. The public ones are in kbthreads.h; these are the
 * library's own ways in.
 */
#ifndef KB_RANK_H
#define KB_RANK_H

#include "kbthreads.h"

struct kb_rank;
struct kb_worker;

/* The rank the calling thread runs, or NULL. */
struct kb_rank *kb__self(void);

/* Worker thread, holding the baton for rk's first turn: run the rank's
 * function to its end. Returns only if the function returned; an
 * unwinding rank ends the thread. */
void kb__rank_run(struct kb_worker *w, struct kb_rank *rk);

/* Rank side of kb_wait (rk is the calling rank). */
int kb__rank_wait(struct kb_rank *rk, kb_handle h);

#endif
