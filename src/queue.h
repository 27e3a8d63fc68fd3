/* SPDX-License-Identifier: MIT */
/*
 * A growable FIFO ring of fixed-size elements: the pending worker waits
 * (kb_handle) and the pending collectives (kb_collective) of a ctx.
 * Touched only by the thread that may use the ctx (see ctx.h).
 */
#ifndef KB_QUEUE_H
#define KB_QUEUE_H

#include <stddef.h>

struct kb_queue {
    unsigned char *buf;
    size_t elem; /* element size in bytes */
    size_t cap;  /* capacity in elements (0 or a power of two) */
    size_t head; /* index of the oldest element */
    size_t len;  /* number of elements */
};

void kb__queue_init(struct kb_queue *q, size_t elem);
void kb__queue_free(struct kb_queue *q);
/* 0, or KB_ENOMEM with the queue unchanged. */
int kb__queue_push(struct kb_queue *q, const void *e);
/* 1 and the oldest element copied to out, or 0 when empty. */
int kb__queue_pop(struct kb_queue *q, void *out);
/* Copy up to cap elements oldest first; return the number pending. */
size_t kb__queue_copy(const struct kb_queue *q, void *out, size_t cap);
void kb__queue_clear(struct kb_queue *q);

static inline size_t kb__queue_len(const struct kb_queue *q)
{
    return q->len;
}

#endif
