#include "baton.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "annotate.h"

/*
 * Linux operations for ck_ec (libck 0.7.1 ships none). Deadlines are
 * absolute CLOCK_MONOTONIC times, which is what FUTEX_WAIT_BITSET takes; a
 * NULL deadline waits forever. The bitset argument must be
 * FUTEX_BITSET_MATCH_ANY (not the deadline pointer).
 */
static int ec_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
    (void)ops;
    return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ec_wait32(const struct ck_ec_wait_state *st, const uint32_t *addr, uint32_t expected,
                      const struct timespec *deadline)
{
    (void)st;
    /* EAGAIN (value changed), EINTR, ETIMEDOUT and spurious returns all just
     * return: ck_ec and kb_slot_wait re-check the counter. */
    syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, expected, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
}

static void ec_wait64(const struct ck_ec_wait_state *st, const uint64_t *addr, uint64_t expected,
                      const struct timespec *deadline)
{
    /* Little-endian: the low half is the futex word. Unused (we use ck_ec32)
     * but ck_ec_ops requires it on 64-bit platforms. */
    ec_wait32(st, (const uint32_t *)addr, (uint32_t)expected, deadline);
}

static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
    (void)ops;
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void ec_wake64(const struct ck_ec_ops *ops, const uint64_t *addr)
{
    ec_wake32(ops, (const uint32_t *)addr);
}

static const struct ck_ec_ops kb_ec_ops = {
    .gettime = ec_gettime,
    .wait32 = ec_wait32,
    .wait64 = ec_wait64,
    .wake32 = ec_wake32,
    .wake64 = ec_wake64,
    /* One spin iteration before flagging the slot and sleeping: the next
     * holder usually needs the CPU a spinner would burn (0 would mean
     * ck's default of 100, about 5 us here). */
    .busy_loop_iter = 1,
    /* ck_ec re-arms sleeps with growing partial deadlines during the first
     * second; start above one second so a parked rank sleeps until posted
     * (at most one early timeout, absorbed by the loop). */
    .initial_wait_ns = UINT32_MAX,
};

/* Multiple producers: successive posters of a slot are different threads
 * (they are ordered by the baton, but ck's single-producer path assumes one
 * thread). */
static const struct ck_ec_mode kb_ec_mode = {
    .ops = &kb_ec_ops,
    .single_producer = false,
};

void kb_slot_init(struct kb_slot *s)
{
    ck_ec32_init(&s->ec, 0);
    s->seen = 0;
}

void kb_slot_post(struct kb_slot *s)
{
    kb_hb_release(&s->ec);
    ck_ec32_inc(&s->ec, &kb_ec_mode);
}

/* ck_ec sleeps in growing partial deadlines that it does not clamp to the
 * caller's deadline; this predicate does, so a timed wait never oversleeps
 * (the predicate may lower the partial deadline passed to wait32). */
static int clamp_to_deadline(const struct ck_ec_wait_state *st, struct timespec *partial)
{
    const struct timespec *d = st->data;
    if (d->tv_sec < partial->tv_sec || (d->tv_sec == partial->tv_sec && d->tv_nsec < partial->tv_nsec))
        *partial = *d;
    return 0;
}

int kb_slot_wait_until(struct kb_slot *s, const struct timespec *deadline)
{
    for (;;) {
        uint32_t v = ck_ec32_value(&s->ec);
        if (v != s->seen) {
            /* Exactly one post per wait (the poster held the baton), so the
             * counter moved by one; 31-bit wrap-around is harmless. */
            s->seen = v;
            kb_hb_acquire(&s->ec);
            return 0;
        }
        int r = deadline ? ck_ec32_wait_pred(&s->ec, &kb_ec_mode, s->seen, clamp_to_deadline,
                                             (void *)deadline, deadline)
                         : ck_ec32_wait(&s->ec, &kb_ec_mode, s->seen, NULL);
        if (r != 0 && ck_ec32_value(&s->ec) == s->seen)
            return -1;
    }
}

void kb_slot_wait(struct kb_slot *s)
{
    kb_slot_wait_until(s, NULL);
}
