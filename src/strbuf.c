/* SPDX-License-Identifier: MIT */
/* Strings built by printf pieces (strbuf.h). */
#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"

/* Room for n more bytes and the NUL, doubling from 64 bytes. */
static int reserve(struct kb_strbuf *b, size_t n)
{
    if (b->len + n + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *s = kb__realloc(b->s, cap);
    if (!s) {
        kb__strbuf_free(b);
        b->failed = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

void kb__strbuf_vaddf(struct kb_strbuf *b, const char *fmt, va_list ap)
{
    if (b->failed)
        return;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void kb__strbuf_addf(struct kb_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb__strbuf_vaddf(b, fmt, ap);
    va_end(ap);
}

char *kb__strbuf_take(struct kb_strbuf *b)
{
    if (b->failed || !reserve(b, 0))
        return NULL;
    char *s = b->s;
    s[b->len] = '\0'; /* "" when nothing was added */
    *b = (struct kb_strbuf){0};
    return s;
}

void kb__strbuf_free(struct kb_strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

char *kb__vformat(const char *fmt, va_list ap)
{
    struct kb_strbuf b = {0};
    kb__strbuf_vaddf(&b, fmt, ap);
    return kb__strbuf_take(&b);
}

char *kb__format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = kb__vformat(fmt, ap);
    va_end(ap);
    return s;
}
