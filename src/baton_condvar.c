/* SPDX-License-Identifier: MIT */
/*
 * The condvar slot (any POSIX system; CMake KB_BATON=condvar, the default
 * off Linux and with KB_PORTABLE). One mutex and one condition variable per
 * slot; the post count stays in the ck_pr word, so the looks before
 * sleeping (baton_common.c) read it without the lock:
 *
 *   post(s):  lock; old = fetch-and-add(word, 1);
 *             if old had the sleep flag: signal(cond); unlock
 *   the wait's steps (baton_common.c has the loop), each under the lock:
 *             take = seen = count, clear the flags; unmark = clear the
 *             mark if the word is as the loop saw it; sleep = if the word
 *             is as the loop saw it, set the sleep flag, cond_wait
 *   nudge(s): lock; set KB_SLOT_NUDGED; if the sleep flag was up: take it down,
 *             signal(cond); unlock
 *
 * The word changes only with the lock held, so the owner's check and its
 * cond_wait are one step for every poster and nudger: a post before the
 * wait is not lost, and a signal always finds the owner in cond_wait (or
 * about to find the count moved). Spurious wake-ups and timeouts come back
 * to the loop on the word. Only the owner waits on cond, and it is
 * signalled, never broadcast: exactly one thread wakes.
 *
 * Freeing (docs/design.md, invariant 3): the owner takes every post with
 * the lock held (kb__slot_take), and the poster publishes, signals and
 * unlocks inside one critical section. So when a wait returns, the poster has left
 * pthread_cond_signal and released the mutex; what may remain of its
 * pthread_mutex_unlock after the release is what POSIX allows to overlap
 * pthread_mutex_destroy (a mutex may be destroyed as soon as it is
 * unlocked). The owner may destroy and free its slot at once.
 *
 * Happens-before reaches TSan, Helgrind and DRD through the mutex itself:
 * no annotations. The word's lock-free reads are atomic by design, so
 * Helgrind and DRD are told not to check it (kb__hb_sync_word).
 *
 * The waits are not cancellation points (cancellation is off around
 * pthread_cond_wait), so no thread ever leaves the slot with its mutex
 * locked (design.md, invariant 6).
 */
#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>

#include "annotate.h"
#include "baton.h"
#include "clock.h"
#include "kbthreads.h"

const char *kb_baton_name(void)
{
    return "condvar";
}

int kb__slot_init(struct kb_slot *s)
{
    s->word = 0;
    s->seen = 0;
    if (pthread_mutex_init(&s->lock, NULL) != 0)
        return -1;
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (err == 0) {
#ifdef KB_HAVE_CONDATTR_SETCLOCK
        /* Deadlines are CLOCK_MONOTONIC, like the futex slot's. */
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
#endif
        err = pthread_cond_init(&s->cond, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (err != 0) {
        pthread_mutex_destroy(&s->lock);
        return -1;
    }
    kb__hb_sync_word(&s->word, sizeof s->word);
    return 0;
}

void kb__slot_destroy(struct kb_slot *s)
{
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

void kb__slot_post(struct kb_slot *s)
{
    pthread_mutex_lock(&s->lock);
    /* When the count wraps, the carry lands in the flag bits: the owner
     * then sees a new count and clears them; a signal or a watch is merely
     * spurious. */
    uint32_t old = ck_pr_faa_32(&s->word, 1);
    if (old & KB_SLOT_SLEEPING)
        pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void kb__slot_nudge(struct kb_slot *s)
{
    pthread_mutex_lock(&s->lock);
    uint32_t w = ck_pr_load_32(&s->word);
    if (!(w & KB_SLOT_NUDGED)) {
        /* The only writer besides the owner's and the poster's, both of
         * which hold the lock too: a plain update under the lock. */
        ck_pr_store_32(&s->word, (w & ~KB_SLOT_SLEEPING) | KB_SLOT_NUDGED);
        if (w & KB_SLOT_SLEEPING)
            pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

#ifndef KB_HAVE_CONDATTR_SETCLOCK
/* Without pthread_condattr_setclock, cond waits take CLOCK_REALTIME: the
 * monotonic deadline as a realtime time now. A step of the realtime clock
 * meanwhile only makes a wait return early (the loop checks the monotonic
 * deadline) or late by the step. */
static struct timespec realtime_deadline(const struct timespec *deadline)
{
    struct timespec mono, real;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    long long ns =
        (long long)(deadline->tv_sec - mono.tv_sec) * 1000000000LL + (deadline->tv_nsec - mono.tv_nsec);
    if (ns < 0)
        ns = 0;
    ns += real.tv_nsec;
    real.tv_sec += (time_t)(ns / 1000000000LL);
    real.tv_nsec = (long)(ns % 1000000000LL);
    return real;
}
#endif

/* Sleep on cond (the lock held) until signalled, a spurious wake-up, or
 * the deadline; not a cancellation point. */
static void sleep_on(struct kb_slot *s, const struct timespec *deadline)
{
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    if (!deadline) {
        pthread_cond_wait(&s->cond, &s->lock);
    } else {
#ifdef KB_HAVE_CONDATTR_SETCLOCK
        pthread_cond_timedwait(&s->cond, &s->lock, deadline);
#else
        struct timespec real = realtime_deadline(deadline);
        pthread_cond_timedwait(&s->cond, &s->lock, &real);
#endif
    }
    pthread_setcancelstate(cancel_state, NULL);
}

/* The steps of the wait (baton_common.c): each takes the lock and
 * checks the word under it, so a step and a post or a nudge never
 * interleave. */
void kb__slot_take(struct kb_slot *s, uint32_t w)
{
    (void)w;
    /* Taken with the lock held: the poster has left its critical section. */
    pthread_mutex_lock(&s->lock);
    uint32_t now = ck_pr_load_32(&s->word);
    s->seen = now & KB_SLOT_COUNT;
    if (now & KB_SLOT_FLAGS)
        ck_pr_store_32(&s->word, now & KB_SLOT_COUNT);
    pthread_mutex_unlock(&s->lock);
}

int kb__slot_unmark(struct kb_slot *s, uint32_t w)
{
    pthread_mutex_lock(&s->lock);
    int same = ck_pr_load_32(&s->word) == w;
    if (same)
        ck_pr_store_32(&s->word, w & ~KB_SLOT_NUDGED);
    pthread_mutex_unlock(&s->lock);
    return same;
}

int kb__slot_sleep(struct kb_slot *s, uint32_t w, const struct timespec *deadline)
{
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    uint32_t now = ck_pr_load_32(&s->word);
    if ((now & ~KB_SLOT_SLEEPING) != (w & ~KB_SLOT_SLEEPING)) {
        /* posted or nudged since the loop looked: look again */
    } else if (deadline && kb__time_passed(deadline)) {
        ck_pr_store_32(&s->word, now & ~KB_SLOT_SLEEPING);
        rc = -1;
    } else {
        if (!(now & KB_SLOT_SLEEPING))
            ck_pr_store_32(&s->word, now | KB_SLOT_SLEEPING);
        sleep_on(s, deadline);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}
