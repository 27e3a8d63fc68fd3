/* The baton's wait slots (see baton.h for the protocol). */
#include "baton.h"

#include <ck_pr.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "annotate.h"

#define SLEEPING 0x80000000u /* the owner sleeps in futex_wait */
#define NUDGED   0x40000000u /* a nudge the owner has not seen yet */
#define FLAGS    (SLEEPING | NUDGED)
#define COUNT    0x3fffffffu

void kb_slot_init(struct kb_slot *s)
{
    s->word = 0;
    s->seen = 0;
    kb_hb_sync_word(&s->word, sizeof s->word);
}

void kb_slot_post(struct kb_slot *s)
{
    kb_hb_release(&s->word);
    /* The publication, and our last write to the slot. When the count
     * wraps, the carry lands in the flag bits: the owner then sees a new
     * count and clears them; a wake or a watch is merely spurious. */
    uint32_t old = ck_pr_faa_32(&s->word, 1);
    if (old & SLEEPING)
        syscall(SYS_futex, &s->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Nanoseconds since t0 (CLOCK_MONOTONIC). */
static int64_t ns_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
}

/* Look at the word until a post arrives or ns nanoseconds pass: 1 if
 * posted. The clock is read every few pauses (a pause is 10-150 cycles
 * depending on the CPU, so a count of them is no measure of time). */
static int watch_for_post(struct kb_slot *s, unsigned ns)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (int i = 0; i < 16; i++) {
            if ((ck_pr_load_32(&s->word) & COUNT) != s->seen)
                return 1;
            ck_pr_stall();
        }
        if (ns_since(&t0) >= (int64_t)ns)
            return 0;
    }
}

static int slot_wait(struct kb_slot *s, const struct timespec *deadline, unsigned nudged_ns)
{
    for (;;) {
        uint32_t w = ck_pr_load_32(&s->word);
        if ((w & COUNT) != s->seen) {
            /* Exactly one post per wait (the poster held the baton), so the
             * count moved by one. We hold the baton now: no post comes until
             * we pass it on. A late nudge may still write a flag; both
             * writes are atomic, and a stale NUDGED costs one spurious
             * watch at our next wait. */
            s->seen = w & COUNT;
            if (w & FLAGS)
                ck_pr_and_32(&s->word, COUNT);
            ck_pr_fence_acquire();
            kb_hb_acquire(&s->word);
            return 0;
        }
        if (w & NUDGED) {
            /* Nudged (asleep or not): the baton is on its way. Take the
             * mark down, then watch for the post rather than sleep. */
            if (!ck_pr_cas_32(&s->word, w, w & ~NUDGED))
                continue;
            if (nudged_ns)
                watch_for_post(s, nudged_ns);
            continue;
        }
        if (!(w & SLEEPING)) {
            /* Say we sleep; a post or a nudge in between makes the CAS
             * fail: look again. */
            if (!ck_pr_cas_32(&s->word, w, w | SLEEPING))
                continue;
            w |= SLEEPING;
        }
        /* Returns at once if the word changed (EAGAIN); EINTR, spurious
         * returns and timeouts all come back here to look at the word. The
         * deadline is absolute CLOCK_MONOTONIC (FUTEX_WAIT_BITSET takes an
         * absolute time; the bitset must be MATCH_ANY). */
        long r = syscall(SYS_futex, &s->word, FUTEX_WAIT_BITSET_PRIVATE, w, deadline, NULL,
                         FUTEX_BITSET_MATCH_ANY);
        if (r != 0 && deadline) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec > deadline->tv_sec ||
                 (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec)) &&
                (ck_pr_load_32(&s->word) & COUNT) == s->seen)
                return -1;
        }
    }
}

int kb_slot_wait_until(struct kb_slot *s, const struct timespec *deadline)
{
    return slot_wait(s, deadline, 0);
}

void kb_slot_wait(struct kb_slot *s)
{
    slot_wait(s, NULL, 0);
}

void kb_slot_wait_spin(struct kb_slot *s, unsigned spins, unsigned nudged_ns)
{
    for (unsigned i = 0; i < spins; i++) {
        if ((ck_pr_load_32(&s->word) & COUNT) != s->seen)
            break; /* posted: take it below without sleeping */
        ck_pr_stall();
    }
    slot_wait(s, NULL, nudged_ns);
}

void kb_slot_nudge(struct kb_slot *s)
{
    /* Mark the word NUDGED; if the owner sleeps, take its sleep flag down
     * in the same CAS and wake it. A failed CAS means the word moved (the
     * owner going to sleep, or a post): look again, a few times at most,
     * since a nudge is only a hint. */
    for (int tries = 0; tries < 8; tries++) {
        uint32_t w = ck_pr_load_32(&s->word);
        if (w & NUDGED)
            return;
        if (!ck_pr_cas_32(&s->word, w, (w & ~SLEEPING) | NUDGED))
            continue;
        if (w & SLEEPING)
            syscall(SYS_futex, &s->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        return;
    }
}

/* Look at the word for up to max_ns, yielding the CPU between looks,
 * until it is posted (then the caller takes the post without sleeping). */
static void look_yielding(struct kb_slot *s, unsigned max_ns)
{
    if (max_ns && (ck_pr_load_32(&s->word) & COUNT) == s->seen) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sched_yield();
            if ((ck_pr_load_32(&s->word) & COUNT) != s->seen)
                break;
        } while (ns_since(&t0) < (int64_t)max_ns);
    }
}

void kb_slot_wait_yield(struct kb_slot *s, unsigned max_ns, unsigned nudged_ns)
{
    look_yielding(s, max_ns);
    slot_wait(s, NULL, nudged_ns);
}

int kb_slot_wait_yield_until(struct kb_slot *s, unsigned max_ns, const struct timespec *deadline)
{
    look_yielding(s, max_ns);
    return slot_wait(s, deadline, 0);
}
