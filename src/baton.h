/*
 * The baton: one wait slot per thread that can hold it.
 *
 * A slot is a 32-bit word owned by one thread (a rank's worker, or the
 * driver for the run's driver slot): bits 0-29 count posts, bit 31 says
 * "the owner sleeps in futex_wait", bit 30 "nudged" (below). Exactly one
 * thread holds the baton at any time; it gives the baton to another thread
 * by posting that thread's slot, then (unless it is leaving for good) waits
 * on its own slot. Because the poster always holds the baton, posts to a
 * slot are serialised and each wait consumes exactly one post:
 *
 *   post(s):  release-annotate; old = fetch-and-add(word, 1);
 *             if old had the sleep flag: futex_wake(word)
 *   wait(s):  loop: w = load(word)
 *               count moved past seen -> seen = count; clear the flags if
 *                                        set (we hold the baton: no post
 *                                        comes now); acquire; done
 *               nudged -> clear the mark (CAS), watch the word a while
 *               else set the sleep flag (CAS), futex_wait(word, flagged value)
 *
 * The poster writes the word once, with the fetch-and-add that publishes
 * the post; after it, only the futex_wake system call names the address
 * (it reads no memory). So the owner may free its slot as soon as it has
 * seen the post, which a spawn's teardown does. (ck_ec's increment, which
 * this replaces, clears the flag with a second atomic write after
 * publishing: a use-after-free when the owner frees the slot.)
 *
 * A post that comes before the owner waits is not lost (the count moved);
 * spurious futex returns, EINTR and EAGAIN are absorbed by the loop on the
 * word.
 *
 * A nudge (KB_AFFINITY_SPREAD) tells the owner that the baton is on its
 * way, without posting: one CAS sets the NUDGED bit and, if the owner
 * sleeps, takes its sleep flag down, followed then by futex_wake. An owner
 * that finds NUDGED (awake, or woken by it) clears it and watches the word
 * for a while on its own CPU before it sleeps again, so a post arriving
 * meanwhile needs no wake-up. A nudge never moves the count, so it cannot
 * hand out the baton. A nudger may come after the baton has moved on (it
 * nudges after its own post), so unlike a poster it may write the word
 * while its owner holds the baton; every write is an atomic
 * read-modify-write, so all land, and a stale NUDGED costs one spurious
 * watch. Whoever frees a slot that may still be nudged waits for the
 * nudgers first (sched.c, exited workers).
 *
 * Waking wakes only the slot's owner: no broadcast, no herd, O(1) in the
 * number of ranks.
 */
#ifndef KB_BATON_H
#define KB_BATON_H

#include <stdint.h>
#include <time.h>

#define KB_CACHELINE 64

/* How long a nudged owner watches its slot before it sleeps again: longer
 * than a wake-up of a sleeping thread on another CPU costs on the machines
 * measured (10-25 us, docs/benchmarks.md), short enough that a turn that
 * runs long costs its watcher little. */
#define KB_NUDGE_WATCH_NS 50000u

struct kb_slot {
    uint32_t word; /* ck_pr: post count (bits 0-29) | nudged (bit 30) | sleeping (bit 31) */
    uint32_t seen; /* owner only: the count last consumed */
} __attribute__((aligned(KB_CACHELINE)));

void kb_slot_init(struct kb_slot *s);
/* Give the baton to the slot's owner. Caller holds the baton and must not
 * touch scheduler state after this call unless it gets the baton back. */
void kb_slot_post(struct kb_slot *s);
/* Owner only: block until the slot is posted, then hold the baton. */
void kb_slot_wait(struct kb_slot *s);
/* Owner only: the same, but first look at the word up to spins times
 * (with a CPU pause between looks) before going to sleep. Pays only when
 * the baton comes back soon and the poster has a CPU of its own. After a
 * nudge, watch it for up to nudged_ns nanoseconds before sleeping again
 * (kb_slot_wait and kb_slot_wait_until: 0, sleep again at once). */
void kb_slot_wait_spin(struct kb_slot *s, unsigned spins, unsigned nudged_ns);
/* Owner only: like kb_slot_wait, but first look at the word for up to
 * max_ns nanoseconds (CLOCK_MONOTONIC), calling sched_yield() between
 * looks. A yield hands the CPU to any thread waiting for it there, the
 * next holder if it is, so the looks never keep the next holder off a CPU;
 * and a CPU with a yielding thread does not go idle, so a wake-up landing
 * there pays no idle exit. Pays when the baton comes back within about
 * max_ns. max_ns 0: no looks. Then waits as kb_slot_wait_spin with
 * nudged_ns. */
void kb_slot_wait_yield(struct kb_slot *s, unsigned max_ns, unsigned nudged_ns);
/* Tell the owner the baton is on its way, waking it if it sleeps, without
 * posting (see above). Any thread; the slot must stay allocated until the
 * call returns. */
void kb_slot_nudge(struct kb_slot *s);
/* Owner only: the same, but give up at the absolute CLOCK_MONOTONIC time
 * deadline: 0 = posted (the caller holds the baton), -1 = timed out (it
 * does not; call again). */
int kb_slot_wait_until(struct kb_slot *s, const struct timespec *deadline);
/* Owner only: kb_slot_wait_yield's looks, then kb_slot_wait_until. */
int kb_slot_wait_yield_until(struct kb_slot *s, unsigned max_ns, const struct timespec *deadline);

#endif
