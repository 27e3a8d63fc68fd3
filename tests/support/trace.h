/* SPDX-License-Identifier: MIT */
/*
 * A test trace: rank functions and engine hooks append one event per line;
 * tests compare the whole text with the expected lines. Appending needs no
 * lock because exactly one thread runs at a time (the baton's
 * happens-before makes that visible to TSan and Valgrind too).
 */
#ifndef KBTEST_TRACE_H
#define KBTEST_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "kbthreads.h"

/* Forget every line. */
void tr_reset(void);
/* Append one line (printf-style, no trailing newline). */
void tr_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The whole trace, lines separated and ended by '\n'; valid until the next tr_ call. */
const char *tr_text(void);
size_t tr_lines(void);
/* Fail the current cmocka test, printing both traces and the first differing
 * line, unless the trace equals the expected text exactly. */
#define tr_assert(expected) tr_assert_at((expected), __FILE__, __LINE__)
void tr_assert_at(const char *expected, const char *file, int line);
/* FNV-1a over the trace text: a cheap fingerprint for determinism tests. */
uint64_t tr_hash(void);

/* Handle names: tests give handles names (the reference's tuples) so traces
 * read like the oracle's: tr_handle("a:1") returns a stable nonzero handle
 * and tr_name(h) the name back ("h<number>" for an unnamed handle). */
kb_handle tr_handle(const char *name);
const char *tr_name(kb_handle h);

#endif
