/* SPDX-License-Identifier: MIT */
/* The baton's looks before sleeping and the wait calls, shared by both
 * slot implementations (baton.h): everything here reads the word without a
 * lock and leaves taking the post to the implementation's kb__slot_block. */
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
