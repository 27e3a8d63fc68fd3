/* SPDX-License-Identifier: MIT */
/*
 * The baton: one wait slot per thread that can hold it.
 *
 * A slot is owned by one thread (a rank's worker, or the driver for the
 * run's driver slot). Exactly one thread holds the baton at any time; it
 * gives the baton to another thread by posting that thread's slot, then
 * (unless it is leaving for good) waits on its own slot. Because the poster
 * always holds the baton, posts to a slot are serialised and each wait
 * consumes exactly one post.
 *
 * Every slot has a 32-bit word read and written with ck_pr atomics: bits
 * 0-29 count posts, bit 31 says "the owner sleeps", bit 30 "nudged"
 * (below); `seen` is the count the owner consumed last. The looks before
 * sleeping (kb__slot_wait_budget's spin and yielding looks, the watch
 * after a nudge) read the word without any lock in both implementations
 * (baton_common.c); how an owner sleeps and how a post wakes it is the
 * implementation's, chosen once at build time (CMake KB_BATON, reported by
 * kb_baton_name()):
 *
 *   futex    (baton_futex.c, Linux) the word is a futex: a post is one
 *            fetch-and-add, plus FUTEX_WAKE if the sleep flag was up. Its
 *            happens-before edges reach TSan/Helgrind/DRD through
 *            annotate.h.
 *   condvar  (baton_condvar.c, any POSIX system) one mutex and one
 *            condition variable per slot: the word changes only under the
 *            mutex, the owner sleeps in pthread_cond_wait and takes every
 *            post under the mutex, the poster signals (never broadcasts)
 *            under it. The tools see the pthread calls; no annotations.
 *
 * Both give the same guarantees (docs/design.md, "Threads and the baton"):
 * a post before the wait is not lost; spurious wake-ups are absorbed by the
 * loop on the word; a post wakes exactly the owner, and only if it sleeps;
 * the owner may free its slot (kb__slot_destroy, then free) as soon as a
 * wait has returned 0, whatever the poster is still doing.
 *
 * A nudge tells the owner that the baton is on its way, without posting:
 * it sets NUDGED and, if the owner sleeps, takes its sleep flag down and
 * wakes it. An owner that finds NUDGED (awake, or woken by it) clears it
 * and watches the word for a while before it sleeps again (pausing between
 * looks when it has a CPU of its own, as under KB_AFFINITY_SPREAD; yielding
 * between them when unpinned, as the default wait policy's nudges are:
 * struct kb_wait_budget's watch), so a post arriving meanwhile needs no
 * wake-up. Whether ranks nudge is the wait policy's choice
 * (wait_policy.h), whom the round loop's (round_loop.c: nudge_target). A nudge
 * never moves the count, so it cannot hand out the baton. A nudger may come
 * after the baton has moved on (it nudges after its own post), so unlike a
 * poster it may write the word while its owner holds the baton; every
 * write is an atomic read-modify-write, so all land, and a stale NUDGED
 * costs one spurious watch. Whoever frees a slot that may still be nudged
 * waits for the nudgers first (round_loop.c: kb__wait_nudges).
 *
 * Waking wakes only the slot's owner: no broadcast, no herd, O(1) in the
 * number of ranks.
 */
#ifndef KB_BATON_H
#define KB_BATON_H

#include <stdint.h>
#include <time.h>
#ifdef KB_BATON_CONDVAR
#include <pthread.h>
#endif

#define KB_CACHELINE 64

/* The word's bits (both implementations). */
#define KB_SLOT_SLEEPING 0x80000000u /* the owner sleeps (or is about to) */
#define KB_SLOT_NUDGED   0x40000000u /* a nudge the owner has not seen yet */
#define KB_SLOT_FLAGS    (KB_SLOT_SLEEPING | KB_SLOT_NUDGED)
#define KB_SLOT_COUNT    0x3fffffffu

struct kb_slot {
    uint32_t word; /* ck_pr: post count (bits 0-29) | nudged (bit 30) | sleeping (bit 31) */
    uint32_t seen; /* owner only: the count last consumed */
#ifdef KB_BATON_CONDVAR
    /* The word changes only with lock held; cond is signalled with it. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
#endif
} __attribute__((aligned(KB_CACHELINE)));

/* 0, or -1 if the implementation's resources could not be had (condvar:
 * pthread_mutex_init / pthread_cond_init failed; nothing is left to
 * destroy then). */
int kb__slot_init(struct kb_slot *s);
/* Release what kb__slot_init took; the owner, once no wait is in progress
 * and every nudger has returned (a poster may still be finishing its
 * post: the implementations make that safe). */
void kb__slot_destroy(struct kb_slot *s);
/* Give the baton to the slot's owner. Caller holds the baton and must not
 * touch scheduler state after this call unless it gets the baton back. */
void kb__slot_post(struct kb_slot *s);
/* Owner only: block until the slot is posted, then hold the baton. */
void kb__slot_wait(struct kb_slot *s);
/* How an owner waits before it sleeps (kb__slot_wait_budget): up to
 * spin_ns of looks at the word with a CPU pause between them (pays only
 * when the baton comes back soon and the poster has a CPU of its own),
 * then up to look_ns of looks with sched_yield() between them (a yield
 * hands the CPU to any thread waiting for it there, the next holder if it
 * is, so these looks never keep the next holder off a CPU; and a CPU with
 * a yielding thread does not go idle, so a wake-up landing there pays no
 * idle exit), then sleep. Once nudged it watches the word for watch
 * nanoseconds before it sleeps again, pausing between looks, or yielding
 * with KB_WATCH_YIELD (an unpinned owner may share a CPU with the holder).
 * All zero: sleep at once. The policy that picks the figures is
 * wait_policy.c's. */
#define KB_WATCH_YIELD 0x80000000u
#define KB_WATCH_NS    0x7fffffffu
struct kb_wait_budget {
    unsigned spin_ns;
    unsigned look_ns;
    unsigned watch; /* nanoseconds (KB_WATCH_NS bits), | KB_WATCH_YIELD */
};
/* Owner only: wait as b says, then hold the baton. */
void kb__slot_wait_budget(struct kb_slot *s, const struct kb_wait_budget *b);
/* Owner only: kb__slot_wait, but give up at the absolute CLOCK_MONOTONIC
 * time deadline: 0 = posted (the caller holds the baton), -1 = timed out
 * (it does not; call again). */
int kb__slot_wait_until(struct kb_slot *s, const struct timespec *deadline);
/* Owner only: up to max_ns of yielding looks, then kb__slot_wait_until. */
int kb__slot_wait_yield_until(struct kb_slot *s, unsigned max_ns, const struct timespec *deadline);
/* Tell the owner the baton is on its way, waking it if it sleeps, without
 * posting (see above). Any thread; the slot must stay allocated until the
 * call returns. */
void kb__slot_nudge(struct kb_slot *s);

/* Between the baton's files. The wait after the looks (baton_common.c,
 * one loop for both implementations): take a post or sleep until one (or
 * the deadline, if not NULL: -1); after a nudge, watch as watch says
 * (kb_wait_budget; 0: sleep again at once). */
int kb__slot_block(struct kb_slot *s, const struct timespec *deadline, unsigned watch);
/* The implementation's three steps of that loop, each given w, the word
 * as the loop last loaded it. Take the post w shows (its count moved past
 * seen): afterwards the owner holds the baton and may free the slot. */
void kb__slot_take(struct kb_slot *s, uint32_t w);
/* Take down the nudge mark w shows: 1, or 0 if the word moved meanwhile. */
int kb__slot_unmark(struct kb_slot *s, uint32_t w);
/* Raise the sleep flag and sleep while the word is still w, until woken,
 * a spurious return or the deadline (NULL: none): -1 once the deadline
 * has passed, else 0 (the loop looks again either way). */
int kb__slot_sleep(struct kb_slot *s, uint32_t w, const struct timespec *deadline);
/* Look at the word without a lock until a post arrives or watch's
 * nanoseconds pass, pausing between looks, or yielding with KB_WATCH_YIELD:
 * 1 if posted (baton_common.c). */
int kb__slot_watch(const struct kb_slot *s, unsigned watch);
/* 1 if the slot holds a post its owner has not taken (a look, no lock). */
int kb__slot_posted(const struct kb_slot *s);

#endif
