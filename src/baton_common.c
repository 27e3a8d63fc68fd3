/* The baton's looks before sleeping and the wait calls, shared by both
 * slot implementations (baton.h): everything here reads the word without a
 * lock and leaves taking the post to the implementation's kb_slot_block. */
#include <ck_pr.h>
#include <sched.h>

#include "baton.h"

int kb_slot_posted(const struct kb_slot *s)
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

int kb_slot_deadline_passed(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec ||
           (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

/* The clock is read every few pauses (a pause is 10-150 cycles depending
 * on the CPU, so a count of them is no measure of time). */
int kb_slot_watch(const struct kb_slot *s, unsigned ns)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (int i = 0; i < 16; i++) {
            if (kb_slot_posted(s))
                return 1;
            ck_pr_stall();
        }
        if (ns_since(&t0) >= (int64_t)ns)
            return 0;
    }
}

int kb_slot_wait_until(struct kb_slot *s, const struct timespec *deadline)
{
    return kb_slot_block(s, deadline, 0);
}

void kb_slot_wait(struct kb_slot *s)
{
    kb_slot_block(s, NULL, 0);
}

void kb_slot_wait_spin(struct kb_slot *s, unsigned spins, unsigned nudged_ns)
{
    for (unsigned i = 0; i < spins; i++) {
        if (kb_slot_posted(s))
            break; /* posted: take it below without sleeping */
        ck_pr_stall();
    }
    kb_slot_block(s, NULL, nudged_ns);
}

/* Look at the word for up to max_ns, yielding the CPU between looks,
 * until it is posted (then the caller takes the post without sleeping). */
static void look_yielding(const struct kb_slot *s, unsigned max_ns)
{
    if (max_ns && !kb_slot_posted(s)) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sched_yield();
            if (kb_slot_posted(s))
                break;
        } while (ns_since(&t0) < (int64_t)max_ns);
    }
}

void kb_slot_wait_yield(struct kb_slot *s, unsigned max_ns, unsigned nudged_ns)
{
    look_yielding(s, max_ns);
    kb_slot_block(s, NULL, nudged_ns);
}

int kb_slot_wait_yield_until(struct kb_slot *s, unsigned max_ns, const struct timespec *deadline)
{
    look_yielding(s, max_ns);
    return kb_slot_block(s, deadline, 0);
}
