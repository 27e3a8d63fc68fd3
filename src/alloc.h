/*
 * Allocation through the fault-injection seam: every allocation the
 * library makes goes through these, so tests can fail the n-th one.
 */
#ifndef KB_ALLOC_H
#define KB_ALLOC_H

#include <stdlib.h>

#include "fault.h"

static inline void *kb_malloc(size_t n)
{
    return kb__fault_hit(KB_FAULT_ALLOC) ? NULL : malloc(n);
}

static inline void *kb_calloc(size_t n, size_t size)
{
    return kb__fault_hit(KB_FAULT_ALLOC) ? NULL : calloc(n, size);
}

static inline void *kb_realloc(void *p, size_t n)
{
    return kb__fault_hit(KB_FAULT_ALLOC) ? NULL : realloc(p, n);
}

#endif
