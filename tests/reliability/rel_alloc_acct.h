/* SPDX-License-Identifier: MIT */
/*
 * Exact heap accounting for a test program linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign
 * Every allocation made by code linked into the program (the static
 * libkbthreads_fault included, and ck_hs through the library's allocator)
 * is recorded in a table of live blocks; rel_acct_live() tells how many
 * are live. Allocations made inside shared libraries (libc's own, cmocka's)
 * are not seen, and frees of blocks the table does not know are passed on
 * unchanged.
 */
#ifndef REL_ALLOC_ACCT_H
#define REL_ALLOC_ACCT_H

#include <stddef.h>

/* Live blocks and bytes allocated through the wrapped functions. */
long rel_acct_live(void);
size_t rel_acct_bytes(void);
/* Allocations seen so far (a counter that only grows). */
long rel_acct_total(void);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **out, size_t align, size_t n);

#endif
