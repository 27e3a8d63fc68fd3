/* SPDX-License-Identifier: MIT */
/* Sorting the small int arrays the library keeps (rank lists). */
#ifndef KB_SORT_H
#define KB_SORT_H

#include <stddef.h>
#include <stdlib.h>

static inline int kb__cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sort v[0..n) ascending. */
static inline void kb__sort_ints(int *v, size_t n)
{
    qsort(v, n, sizeof *v, kb__cmp_int);
}

#endif
