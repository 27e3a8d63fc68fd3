/* SPDX-License-Identifier: MIT */
/*
 * Sizes checked before memory is spent (spawn_limits.c says which limits
 * and why each is an upper bound).
 */
#ifndef KB_SPAWN_LIMITS_H
#define KB_SPAWN_LIMITS_H

#include <stddef.h>

#include "kbthreads.h"

/* Can a spawn of nprocs ranks with threads of stack_size (0: the default)
 * on ctx (NULL: no parked threads) create the threads it needs now? 0, or
 * KB_EAGAIN with why (if not NULL) set to a sentence naming the tightest
 * limit. Reads nothing when the ctx's parked threads suffice. The caller
 * owns ctx (or passes NULL). */
int kb__spawn_room(const kb_ctx *ctx, int nprocs, size_t stack_size, char *why, size_t why_size);

/* The stack size of a thread created with default attributes. */
size_t kb__default_stack_size(void);

#endif
