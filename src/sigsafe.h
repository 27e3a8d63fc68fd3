/* SPDX-License-Identifier: MIT */
/*
 * Building text inside a signal handler: no malloc, no stdio, no locks;
 * only write(2) and plain loops (crash.c, rank_frames.c).
 */
#ifndef KB_SIGSAFE_H
#define KB_SIGSAFE_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

/* Append s to buf[len..cap-1]; returns the new length (cut at cap - 1). */
static inline size_t kb__ss_put(char *buf, size_t len, size_t cap, const char *s)
{
    while (*s && len + 1 < cap)
        buf[len++] = *s++;
    return len;
}

/* Append n bytes of s. */
static inline size_t kb__ss_putn(char *buf, size_t len, size_t cap, const char *s, size_t n)
{
    for (size_t i = 0; i < n && len + 1 < cap; i++)
        buf[len++] = s[i];
    return len;
}

/* Append v in decimal. */
static inline size_t kb__ss_put_long(char *buf, size_t len, size_t cap, long v)
{
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0 && len + 1 < cap)
        buf[len++] = '-';
    while (n > 0 && len + 1 < cap)
        buf[len++] = digits[--n];
    return len;
}

/* Write all n bytes to fd (retrying short writes and EINTR); errors are
 * dropped: a report has nowhere to report them. */
static inline void kb__ss_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

#endif
