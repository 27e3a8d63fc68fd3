/* SPDX-License-Identifier: MIT */
/*
 * The futex slot (Linux; CMake KB_BATON=futex, the default there). The word
 * is the futex:
 *
 *   post(s):  release-annotate; old = fetch-and-add(word, 1);
 *             if old had the sleep flag: futex_wake(word)
 *   the wait's steps (baton_common.c has the loop): take = seen = count,
 *             clear the flags, acquire; unmark = a CAS; sleep = a CAS
 *             raising the sleep flag, then futex_wait(word, flagged value)
 *
 * The poster writes the word once, with the fetch-and-add that publishes
 * the post; after it, only the futex_wake system call names the address
 * (it reads no memory). So the owner may free its slot as soon as it has
 * seen the post, which a spawn's teardown does. (ck_ec's increment, which
 * this replaces, clears the flag with a second atomic write after
 * publishing: a use-after-free when the owner frees the slot.)
 *
 * A nudge is one CAS that sets KB_SLOT_NUDGED and, if the owner sleeps, takes
 * its sleep flag down, followed then by futex_wake.
 */
#include <ck_pr.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "annotate.h"
#include "baton.h"
#include "clock.h"
#include "kbthreads.h"

const char *kb_baton_name(void)
{
    return "futex";
}

int kb__slot_init(struct kb_slot *s)
{
    s->word = 0;
    s->seen = 0;
    kb__hb_sync_word(&s->word, sizeof s->word);
    return 0;
}

void kb__slot_destroy(struct kb_slot *s)
{
    (void)s; /* a word holds nothing to release */
}

void kb__slot_post(struct kb_slot *s)
{
    kb__hb_release(&s->word);
    /* The publication, and our last write to the slot. When the count
     * wraps, the carry lands in the flag bits: the owner then sees a new
     * count and clears them; a wake or a watch is merely spurious. */
    uint32_t old = ck_pr_faa_32(&s->word, 1);
    if (old & KB_SLOT_SLEEPING)
        syscall(SYS_futex, &s->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void kb__slot_take(struct kb_slot *s, uint32_t w)
{
    /* A late nudge may still write a flag; both writes are atomic, and a
     * stale KB_SLOT_NUDGED costs one spurious watch at our next wait. */
    s->seen = w & KB_SLOT_COUNT;
    if (w & KB_SLOT_FLAGS)
        ck_pr_and_32(&s->word, KB_SLOT_COUNT);
    ck_pr_fence_acquire();
    kb__hb_acquire(&s->word);
}

int kb__slot_unmark(struct kb_slot *s, uint32_t w)
{
    return ck_pr_cas_32(&s->word, w, w & ~KB_SLOT_NUDGED);
}

int kb__slot_sleep(struct kb_slot *s, uint32_t w, const struct timespec *deadline)
{
    /* A post or a nudge between the load and the CAS makes it fail. */
    if (!(w & KB_SLOT_SLEEPING)) {
        if (!ck_pr_cas_32(&s->word, w, w | KB_SLOT_SLEEPING))
            return 0;
        w |= KB_SLOT_SLEEPING;
    }
    /* Returns at once if the word changed (EAGAIN). The deadline is
     * absolute CLOCK_MONOTONIC (FUTEX_WAIT_BITSET takes an absolute time;
     * the bitset must be MATCH_ANY). */
    long r =
        syscall(SYS_futex, &s->word, FUTEX_WAIT_BITSET_PRIVATE, w, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
    return r != 0 && deadline && kb__time_passed(deadline) ? -1 : 0;
}

void kb__slot_nudge(struct kb_slot *s)
{
    /* Mark the word KB_SLOT_NUDGED; if the owner sleeps, take its sleep flag down
     * in the same CAS and wake it. A failed CAS means the word moved (the
     * owner going to sleep, or a post): look again, a few times at most,
     * since a nudge is only a hint. */
    for (int tries = 0; tries < 8; tries++) {
        uint32_t w = ck_pr_load_32(&s->word);
        if (w & KB_SLOT_NUDGED)
            return;
        if (!ck_pr_cas_32(&s->word, w, (w & ~KB_SLOT_SLEEPING) | KB_SLOT_NUDGED))
            continue;
        if (w & KB_SLOT_SLEEPING)
            syscall(SYS_futex, &s->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        return;
    }
}
