/* SPDX-License-Identifier: MIT */
/* The baton's looks before sleeping and the wait loop, shared by both slot
 * implementations (baton.h): everything here reads the word without a lock
 * and leaves each step that writes it (take a post, take a nudge mark
 * down, sleep) to the implementation's kb__slot_take, kb__slot_unmark and
 * kb__slot_sleep. */
#include <ck_pr.h>
#include <sched.h>

#include "baton.h"

int kb__slot_posted(const struct kb_slot *s)
{
    return (ck_pr_load_32(&s->word) & KB_SLOT_COUNT) != s->seen;
}

/* Nanoseconds since t0 (CLOCK_MONOTONIC). */
static int64_t ns_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
}

/* Look at the word for up to max_ns, yielding the CPU between looks,
 * until it is posted (then the caller takes the post without sleeping). */
static int look_yielding(const struct kb_slot *s, unsigned max_ns)
{
    if (kb__slot_posted(s))
        return 1;
    if (max_ns) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sched_yield();
            if (kb__slot_posted(s))
                return 1;
        } while (ns_since(&t0) < (int64_t)max_ns);
    }
    return 0;
}

/* The same with a CPU pause between looks. The clock is read every few
 * pauses (a pause is 10-150 cycles depending on the CPU, so a count of
 * them is no measure of time). */
static int look_pausing(const struct kb_slot *s, unsigned max_ns)
{
    if (kb__slot_posted(s))
        return 1; /* no clock read when the post is there */
    if (!max_ns)
        return 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (int i = 0; i < 16; i++) {
            if (kb__slot_posted(s))
                return 1;
            ck_pr_stall();
        }
        if (ns_since(&t0) >= (int64_t)max_ns)
            return 0;
    }
}

int kb__slot_watch(const struct kb_slot *s, unsigned watch)
{
    return watch & KB_WATCH_YIELD ? look_yielding(s, watch & KB_WATCH_NS)
                                  : look_pausing(s, watch & KB_WATCH_NS);
}

/* The wait, for both implementations:
 *
 *   loop: w = load(word)
 *     count moved past seen -> take the post; done (we hold the baton: no
 *                              post comes until we pass it on)
 *     nudged                -> take the mark down; watch the word a while
 *     else                  -> raise the sleep flag and sleep while the
 *                              word is w (a post or a nudge meanwhile
 *                              makes the sleep return at once)
 *
 * Exactly one post per wait (the poster held the baton), so the count
 * moves by one. A post before the wait is not lost (the count moved);
 * spurious returns, EINTR, EAGAIN and timeouts all come back to the loop
 * on the word, never on a return value. */
int kb__slot_block(struct kb_slot *s, const struct timespec *deadline, unsigned watch)
{
    for (;;) {
        uint32_t w = ck_pr_load_32(&s->word);
        if ((w & KB_SLOT_COUNT) != s->seen) {
            kb__slot_take(s, w);
            return 0;
        }
        if (w & KB_SLOT_NUDGED) {
            if (kb__slot_unmark(s, w) && watch)
                kb__slot_watch(s, watch);
            continue;
        }
        if (kb__slot_sleep(s, w, deadline) < 0 && !kb__slot_posted(s))
            return -1;
    }
}

int kb__slot_wait_until(struct kb_slot *s, const struct timespec *deadline)
{
    return kb__slot_block(s, deadline, 0);
}

void kb__slot_wait(struct kb_slot *s)
{
    kb__slot_block(s, NULL, 0);
}

void kb__slot_wait_budget(struct kb_slot *s, const struct kb_wait_budget *b)
{
    /* Posted during a look: kb__slot_block takes it without sleeping. */
    if (!look_pausing(s, b->spin_ns))
        look_yielding(s, b->look_ns);
    kb__slot_block(s, NULL, b->watch);
}

int kb__slot_wait_yield_until(struct kb_slot *s, unsigned max_ns, const struct timespec *deadline)
{
    look_yielding(s, max_ns);
    return kb__slot_block(s, deadline, 0);
}
