/* SPDX-License-Identifier: MIT */
#include "trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

static char *buf;
static size_t len, cap, nlines;

void tr_reset(void)
{
    len = 0;
    nlines = 0;
    if (buf)
        buf[0] = '\0';
}

static void reserve(size_t extra)
{
    if (len + extra + 1 <= cap)
        return;
    size_t ncap = cap ? cap : 4096;
    while (ncap < len + extra + 1)
        ncap *= 2;
    char *nb = realloc(buf, ncap);
    if (!nb)
        abort();
    buf = nb;
    cap = ncap;
}

void tr_add(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    reserve((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(buf + len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    len += (size_t)n;
    buf[len++] = '\n';
    buf[len] = '\0';
    nlines++;
}

const char *tr_text(void)
{
    return buf ? buf : "";
}

size_t tr_lines(void)
{
    return nlines;
}

void tr_assert_at(const char *expected, const char *file, int line)
{
    const char *got = tr_text();
    if (strcmp(got, expected) == 0)
        return;
    const char *a = got, *b = expected;
    int ln = 1;
    while (*a && *a == *b) {
        if (*a == '\n')
            ln++;
        a++;
        b++;
    }
    fprintf(stderr, "%s:%d: trace differs from line %d\n--- expected ---\n%s--- got ---\n%s---\n", file, line,
            ln, expected, got);
    fail_msg("trace mismatch at line %d", ln);
}

uint64_t tr_hash(void)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)buf[i];
        h *= 1099511628211ull;
    }
    return h;
}

#define MAX_NAMES 4096
static char *names[MAX_NAMES];
static size_t nnames;

kb_handle tr_handle(const char *name)
{
    for (size_t i = 0; i < nnames; i++)
        if (strcmp(names[i], name) == 0)
            return (kb_handle)(i + 1);
    if (nnames == MAX_NAMES)
        abort();
    names[nnames] = strdup(name);
    if (!names[nnames])
        abort();
    return (kb_handle)(++nnames);
}

const char *tr_name(kb_handle h)
{
    static char tmp[8][32];
    static unsigned k;
    if (h >= 1 && h <= nnames)
        return names[h - 1];
    char *t = tmp[k++ % 8];
    snprintf(t, sizeof tmp[0], "h%llu", (unsigned long long)h);
    return t;
}
