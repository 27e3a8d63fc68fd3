/* SPDX-License-Identifier: MIT */
/* Exact heap accounting (see rel_alloc_acct.h). */
#include "rel_alloc_acct.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **out, size_t align, size_t n);

/* Open addressing with linear probing and backward-shift deletion. */
#define ACCT_BITS 18
#define ACCT_SIZE (1u << ACCT_BITS)
#define ACCT_MASK (ACCT_SIZE - 1)

static uintptr_t keys[ACCT_SIZE];
static size_t sizes[ACCT_SIZE];
static long live, total;
static size_t bytes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(uintptr_t p)
{
    uint64_t x = (uint64_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & ACCT_MASK;
}

static void add(void *p, size_t n)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    if (live >= (long)(ACCT_SIZE / 2))
        abort(); /* the table is for leak checks of small programs */
    size_t i = slot_of((uintptr_t)p);
    while (keys[i] != 0)
        i = (i + 1) & ACCT_MASK;
    keys[i] = (uintptr_t)p;
    sizes[i] = n;
    live++;
    total++;
    bytes += n;
    pthread_mutex_unlock(&lock);
}

/* Forget p; 1 if it was known. */
static int del(void *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&lock);
    size_t i = slot_of((uintptr_t)p);
    while (keys[i] != 0 && keys[i] != (uintptr_t)p)
        i = (i + 1) & ACCT_MASK;
    if (keys[i] == 0) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    live--;
    bytes -= sizes[i];
    /* backward shift: move later entries of the probe run into the hole */
    size_t j = i;
    for (;;) {
        j = (j + 1) & ACCT_MASK;
        if (keys[j] == 0)
            break;
        size_t home = slot_of(keys[j]);
        int movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            keys[i] = keys[j];
            sizes[i] = sizes[j];
            i = j;
        }
    }
    keys[i] = 0;
    sizes[i] = 0;
    pthread_mutex_unlock(&lock);
    return 1;
}

long rel_acct_live(void)
{
    pthread_mutex_lock(&lock);
    long n = live;
    pthread_mutex_unlock(&lock);
    return n;
}

size_t rel_acct_bytes(void)
{
    pthread_mutex_lock(&lock);
    size_t n = bytes;
    pthread_mutex_unlock(&lock);
    return n;
}

long rel_acct_total(void)
{
    pthread_mutex_lock(&lock);
    long n = total;
    pthread_mutex_unlock(&lock);
    return n;
}

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    add(p, n);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = __real_calloc(n, size);
    add(p, n * size);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (!p)
        return __wrap_malloc(n);
    int known = del(p);
    void *q = __real_realloc(p, n);
    if (q)
        add(q, n);
    else if (known && n != 0)
        add(p, 0); /* the old block stays */
    return q;
}

void __wrap_free(void *p)
{
    del(p);
    __real_free(p);
}

int __wrap_posix_memalign(void **out, size_t align, size_t n)
{
    int rc = __real_posix_memalign(out, align, n);
    if (rc == 0)
        add(*out, n);
    return rc;
}
