/* SPDX-License-Identifier: MIT */
/*
 * Happens-before annotations for race detectors.
 *
 * The baton and the ctx ownership word are carried by Concurrency Kit
 * atomics (ck_pr), which are inline assembly on x86-64: neither
 * ThreadSanitizer nor Helgrind/DRD can see that they order memory. Every
 * release point (a post of the baton, leaving a ctx) calls kb__hb_release on
 * the word, and every matching acquire point calls kb__hb_acquire after it
 * observed the change, so the tools see exactly the edges the protocol
 * creates: ranks may share plain data without locks, and a real race (a
 * thread touching rank data outside the baton) is still reported.
 *
 * Outside TSan and Valgrind both calls cost a few instructions (the
 * Valgrind client request is a no-op sequence when not under Valgrind).
 */
#ifndef KB_ANNOTATE_H
#define KB_ANNOTATE_H

#if defined(__SANITIZE_THREAD__)
#define KB_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KB_TSAN 1
#endif
#endif

#ifdef KB_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/helgrind.h>
#endif

static inline void kb__hb_release(void *addr)
{
#ifdef KB_TSAN
    __tsan_release(addr);
#endif
#ifdef KB_HAVE_VALGRIND_H
    ANNOTATE_HAPPENS_BEFORE(addr);
#endif
    (void)addr;
}

/* addr..addr+size is a synchronisation word (a slot's word, the ctx owner
 * word, the watchdog's turn stamps and the holder it reads without the
 * baton): its accesses are ck_pr atomics and concurrent by design, and the
 * order they create reaches the tools through kb__hb_release/acquire.
 * Helgrind and DRD cannot see that ck_pr accesses are atomic (inline
 * assembly), so they must not check the word itself. Freeing the memory
 * ends the exemption. TSan does not instrument ck_pr, so needs nothing. */
static inline void kb__hb_sync_word(void *addr, unsigned long size)
{
#ifdef KB_HAVE_VALGRIND_H
    ANNOTATE_BENIGN_RACE_SIZED(addr, size, "libkbthreads synchronisation word (ck_pr atomics)");
#endif
    (void)addr;
    (void)size;
}

static inline void kb__hb_acquire(void *addr)
{
#ifdef KB_TSAN
    __tsan_acquire(addr);
#endif
#ifdef KB_HAVE_VALGRIND_H
    ANNOTATE_HAPPENS_AFTER(addr);
#endif
    (void)addr;
}

#endif
