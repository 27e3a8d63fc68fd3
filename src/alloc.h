/* SPDX-License-Identifier: MIT */
/*
 * Allocation through the fault-injection seam: every allocation the
 * library makes goes through these, so tests can fail the n-th one.
 */
#ifndef KB_ALLOC_H
#define KB_ALLOC_H

#include <stdlib.h>
#include <string.h>

#include "fault.h"

static inline void *kb__malloc(size_t n)
{
    return kb__fault_hit(KB_FAULT_ALLOC) ? NULL : malloc(n);
}

static inline void *kb__calloc(size_t n, size_t size)
{
    return kb__fault_hit(KB_FAULT_ALLOC) ? NULL : calloc(n, size);
}

static inline void *kb__realloc(void *p, size_t n)
{
    return kb__fault_hit(KB_FAULT_ALLOC) ? NULL : realloc(p, n);
}

/* Zeroed memory aligned to align (a power of two, a multiple of
 * sizeof(void *)): the run, the ctx and the workers each hold a baton slot,
 * which must own its cache line. Freed with free(). */
static inline void *kb__zalloc_aligned(size_t align, size_t n)
{
    void *p = NULL;
    if (kb__fault_hit(KB_FAULT_ALLOC) || posix_memalign(&p, align, n) != 0)
        return NULL;
    return memset(p, 0, n);
}

#endif
