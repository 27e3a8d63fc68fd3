/* SPDX-License-Identifier: MIT */
#include "queue.h"

#include <string.h>

#include "alloc.h"
#include "kbthreads.h"

void kb__queue_init(struct kb_queue *q, size_t elem)
{
    q->buf = NULL;
    q->elem = elem;
    q->cap = q->head = q->len = 0;
}

void kb__queue_free(struct kb_queue *q)
{
    free(q->buf);
    kb__queue_init(q, q->elem);
}

static unsigned char *at(const struct kb_queue *q, size_t i)
{
    return q->buf + ((q->head + i) & (q->cap - 1)) * q->elem;
}

int kb__queue_push(struct kb_queue *q, const void *e)
{
    if (q->len == q->cap) {
        size_t ncap = q->cap ? q->cap * 2 : 16;
        if (ncap > SIZE_MAX / q->elem)
            return KB_ENOMEM;
        unsigned char *nb = kb__malloc(ncap * q->elem);
        if (!nb)
            return KB_ENOMEM;
        /* Unwrap the ring into the new buffer, oldest first. */
        for (size_t i = 0; i < q->len; i++)
            memcpy(nb + i * q->elem, at(q, i), q->elem);
        free(q->buf);
        q->buf = nb;
        q->cap = ncap;
        q->head = 0;
    }
    memcpy(at(q, q->len), e, q->elem);
    q->len++;
    return 0;
}

int kb__queue_pop(struct kb_queue *q, void *out)
{
    if (q->len == 0)
        return 0;
    memcpy(out, at(q, 0), q->elem);
    q->head = (q->head + 1) & (q->cap - 1);
    q->len--;
    return 1;
}

size_t kb__queue_copy(const struct kb_queue *q, void *out, size_t cap)
{
    size_t n = q->len < cap ? q->len : cap;
    for (size_t i = 0; i < n; i++)
        memcpy((unsigned char *)out + i * q->elem, at(q, i), q->elem);
    return q->len;
}

void kb__queue_clear(struct kb_queue *q)
{
    q->head = 0;
    q->len = 0;
}
