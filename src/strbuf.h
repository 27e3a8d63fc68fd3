/* SPDX-License-Identifier: MIT */
/*
 * Strings built by printf pieces: every message, list and file line the
 * library composes (failure reports, replay divergences, the schedule
 * line, the schedule recording's buffer). Allocation goes through the
 * fault seam (alloc.h); once one fails the buffer stays failed and every
 * later piece is dropped, so a caller checks once, at the end.
 */
#ifndef KB_STRBUF_H
#define KB_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

/* Zero-initialise ({0}) for an empty buffer. s is NUL-terminated once any
 * piece was added. */
struct kb_strbuf {
    char *s;
    size_t len, cap;
    int failed; /* an allocation failed: s is freed and NULL */
};

void kb__strbuf_addf(struct kb_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kb__strbuf_vaddf(struct kb_strbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* The string (malloc'd; "" when nothing was added), the buffer left
 * empty; NULL if an allocation failed. */
char *kb__strbuf_take(struct kb_strbuf *b);
/* Free the buffer's string and empty it. */
void kb__strbuf_free(struct kb_strbuf *b);

/* A malloc'd printf result, or NULL. */
char *kb__format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *kb__vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
