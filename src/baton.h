/*
 * The baton: one wait slot per thread that can hold it.
 *
 * A slot is a Concurrency Kit event count (ck_ec32) owned by one thread
 * (a rank thread, or the driver for the run's driver slot). Exactly one
 * thread holds the baton at any time; it gives the baton to another thread
 * by posting that thread's slot, then (unless it is leaving for good) waits
 * on its own slot. Because the poster always holds the baton, posts to a
 * slot are serialised and each wait consumes exactly one post:
 *
 *   post(s):  release-annotate; ck_ec32_inc(&s->ec)   (futex wake only if the
 *             owner flagged itself as sleeping)
 *   wait(s):  until ec != s->seen: ck_ec32_wait; s->seen = ec;
 *             acquire-annotate
 *
 * A post that comes before the owner waits is not lost (the counter moved);
 * spurious futex returns and EINTR are absorbed by the loop on the counter.
 * Waking wakes only the slot's owner: no broadcast, no herd, O(1) in the
 * number of ranks.
 */
#ifndef KB_BATON_H
#define KB_BATON_H

#include <ck_ec.h>
#include <stdint.h>
#include <time.h>

#define KB_CACHELINE 64

struct kb_slot {
    struct ck_ec32 ec; /* posted by the baton holder, waited on by the owner */
    uint32_t seen;     /* owner only: the counter value last consumed (31 bits) */
} __attribute__((aligned(KB_CACHELINE)));

void kb_slot_init(struct kb_slot *s);
/* Give the baton to the slot's owner. Caller holds the baton and must not
 * touch scheduler state after this call unless it gets the baton back. */
void kb_slot_post(struct kb_slot *s);
/* Owner only: block until the slot is posted, then hold the baton. */
void kb_slot_wait(struct kb_slot *s);
/* Owner only: the same, but give up at the absolute CLOCK_MONOTONIC time
 * deadline: 0 = posted (the caller holds the baton), -1 = timed out (it
 * does not; call again). */
int kb_slot_wait_until(struct kb_slot *s, const struct timespec *deadline);

#endif
