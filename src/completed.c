/* SPDX-License-Identifier: MIT */
#include "completed.h"

#include <stdbool.h>

#include "alloc.h"

_Static_assert(sizeof(void *) == sizeof(kb_handle), "handles are stored as ck_hs direct keys");

static void *hs_malloc(size_t n)
{
    return kb__malloc(n);
}

static void hs_free(void *p, size_t n, bool defer)
{
    (void)n;
    (void)defer; /* single writer, no concurrent readers: free at once */
    free(p);
}

static struct ck_malloc hs_allocator = {.malloc = hs_malloc, .free = hs_free};

/* splitmix64's finaliser: handles are often small sequential integers. */
static unsigned long hs_hash(const void *key, unsigned long seed)
{
    uint64_t x = (uint64_t)(uintptr_t)key ^ seed;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (unsigned long)x;
}

static void *key_of(kb_handle h)
{
    return (void *)(uintptr_t)h;
}

int kb__completed_init(struct kb_completed *c)
{
    /* compare NULL: direct keys compare by value. */
    if (!ck_hs_init(&c->hs, CK_HS_MODE_SPMC | CK_HS_MODE_DIRECT, hs_hash, NULL, &hs_allocator, 64,
                    0x9e3779b97f4a7c15ul))
        return KB_ENOMEM;
    return 0;
}

int kb__completed_clear(struct kb_completed *c)
{
    /* ck_hs_reset makes a new, empty table of the initial size and frees the
     * old one; on failure the set is unchanged. */
    return ck_hs_reset(&c->hs) ? 0 : KB_ENOMEM;
}

void kb__completed_free(struct kb_completed *c)
{
    ck_hs_destroy(&c->hs);
}

int kb__completed_has(const struct kb_completed *c, kb_handle h)
{
    ck_hs_t *hs = (ck_hs_t *)&c->hs; /* ck_hs_get takes a non-const set */
    void *k = key_of(h);
    return ck_hs_get(hs, CK_HS_HASH(hs, hs_hash, k), k) != NULL;
}

int kb__completed_add(struct kb_completed *c, kb_handle h)
{
    void *k = key_of(h);
    unsigned long hash = CK_HS_HASH(&c->hs, hs_hash, k);
    if (ck_hs_get(&c->hs, hash, k) != NULL)
        return 0;
    /* ck_hs_put fails only on allocation failure once we know k is absent. */
    return ck_hs_put(&c->hs, hash, k) ? 0 : KB_ENOMEM;
}

size_t kb__completed_copy(const struct kb_completed *c, kb_handle *out, size_t cap)
{
    ck_hs_t *hs = (ck_hs_t *)&c->hs; /* ck_hs_next takes a non-const set; it only reads */
    ck_hs_iterator_t it = CK_HS_ITERATOR_INITIALIZER;
    size_t i = 0;
    void *k;
    while (i < cap && ck_hs_next(hs, &it, &k))
        out[i++] = (kb_handle)(uintptr_t)k;
    return ck_hs_count(hs);
}
