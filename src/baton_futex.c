/* SPDX-License-Identifier: MIT */
/*
 * The futex slot (Linux; CMake KB_BATON=futex, the default there). The word
 * is the futex:
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
 * word. A nudge is one CAS that sets KB_SLOT_NUDGED and, if the owner sleeps, takes
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

int kb__slot_block(struct kb_slot *s, const struct timespec *deadline, unsigned watch)
{
    for (;;) {
        uint32_t w = ck_pr_load_32(&s->word);
        if ((w & KB_SLOT_COUNT) != s->seen) {
            /* Exactly one post per wait (the poster held the baton), so the
             * count moved by one. We hold the baton now: no post comes until
             * we pass it on. A late nudge may still write a flag; both
             * writes are atomic, and a stale KB_SLOT_NUDGED costs one spurious
             * watch at our next wait. */
            s->seen = w & KB_SLOT_COUNT;
            if (w & KB_SLOT_FLAGS)
                ck_pr_and_32(&s->word, KB_SLOT_COUNT);
            ck_pr_fence_acquire();
            kb__hb_acquire(&s->word);
            return 0;
        }
        if (w & KB_SLOT_NUDGED) {
            /* Nudged (asleep or not): the baton is on its way. Take the
             * mark down, then watch for the post rather than sleep. */
            if (!ck_pr_cas_32(&s->word, w, w & ~KB_SLOT_NUDGED))
                continue;
            if (watch)
                kb__slot_watch(s, watch);
            continue;
        }
        if (!(w & KB_SLOT_SLEEPING)) {
            /* Say we sleep; a post or a nudge in between makes the CAS
             * fail: look again. */
            if (!ck_pr_cas_32(&s->word, w, w | KB_SLOT_SLEEPING))
                continue;
            w |= KB_SLOT_SLEEPING;
        }
        /* Returns at once if the word changed (EAGAIN); EINTR, spurious
         * returns and timeouts all come back here to look at the word. The
         * deadline is absolute CLOCK_MONOTONIC (FUTEX_WAIT_BITSET takes an
         * absolute time; the bitset must be MATCH_ANY). */
        long r = syscall(SYS_futex, &s->word, FUTEX_WAIT_BITSET_PRIVATE, w, deadline, NULL,
                         FUTEX_BITSET_MATCH_ANY);
        if (r != 0 && deadline && kb__time_passed(deadline) && !kb__slot_posted(s))
            return -1;
    }
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
