/* SPDX-License-Identifier: MIT */
/*
 * The floors: what one thread-to-thread handoff costs on this machine with
 * nothing but the kernel's primitives, in the shape of a libkbthreads round.
 *
 *   floor_ring futex|sem|cond --n N --m H --reps R [--pin]
 *
 * A ring of N + 1 threads (as many as a spawn of N ranks has: N ranks and
 * the driver) passes one token around; ns per handoff = elapsed / H. An
 * extra controller thread starts each repetition by handing the token to a
 * member and gets it back after the H-th handoff (its two posts are among
 * the H), so a repetition need not be a whole lap: the condvar ring at large
 * N affords only a few handoffs.
 *
 *   futex: one futex word per thread, three states (empty, posted, owner
 *          sleeping); the poster skips FUTEX_WAKE when the owner does not
 *          sleep. No spinning.
 *   sem:   one POSIX semaphore per thread (sem_post / sem_wait).
 *   cond:  the naive baton: one mutex, one condvar, a `turn` variable, and a
 *          broadcast per handoff (every waiter wakes to check its turn).
 *
 * --pin runs every thread on the CPU the main thread is on (the threads
 * inherit its affinity).
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench_common.h"

enum kind { K_FUTEX, K_SEM, K_COND };

struct slot {
    _Atomic uint32_t word; /* futex: 0 empty, 1 posted, 2 owner sleeping */
    sem_t sem;
    pthread_t thread;
    long index;
} __attribute__((aligned(64)));

static enum kind kind;
static long nmembers;      /* ring members: 0 .. nmembers-1 */
static struct slot *slots; /* nmembers + 1: the last one is the controller's */
#define CONTROLLER nmembers

/* Token-holder fields (ordered by the handoffs). */
static long remaining; /* member receipts left in this repetition */
static long resume_at; /* the member the next repetition starts at */
static int quit;

/* cond: the naive baton. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn = -1;

static void futex_wait(_Atomic uint32_t *w, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void post(long i)
{
    struct slot *s = &slots[i];
    if (kind == K_SEM) {
        sem_post(&s->sem);
        return;
    }
    if (atomic_exchange_explicit(&s->word, 1, memory_order_acq_rel) == 2)
        futex_wake(&s->word);
}

static void wait_slot(long i)
{
    struct slot *s = &slots[i];
    if (kind == K_SEM) {
        while (sem_wait(&s->sem) != 0)
            ; /* EINTR */
        return;
    }
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&s->word, &expected, 2, memory_order_acq_rel,
                                                memory_order_acquire)) {
        /* Loop on the word, never on futex's return (EAGAIN, EINTR, spurious). */
        while (atomic_load_explicit(&s->word, memory_order_acquire) == 2)
            futex_wait(&s->word, 2);
    }
    atomic_store_explicit(&s->word, 0, memory_order_relaxed);
}

static void *member_main(void *p)
{
    struct slot *s = p;
    long next = (s->index + 1) % nmembers;
    if (kind == K_COND) {
        pthread_mutex_lock(&mu);
        for (;;) {
            while (turn != s->index && !quit)
                pthread_cond_wait(&cv, &mu);
            if (quit)
                break;
            if (--remaining == 0) {
                resume_at = next;
                turn = CONTROLLER;
            } else {
                turn = next;
            }
            pthread_cond_broadcast(&cv);
        }
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    for (;;) {
        wait_slot(s->index);
        if (quit)
            return NULL;
        if (--remaining == 0) {
            resume_at = next;
            post(CONTROLLER);
        } else {
            post(next);
        }
    }
}

/* One repetition of h handoffs; returns the elapsed ns. */
static uint64_t run_rep(long h)
{
    uint64_t t0, t1;
    if (kind == K_COND) {
        pthread_mutex_lock(&mu);
        remaining = h - 1;
        t0 = bench_now_ns();
        turn = resume_at;
        pthread_cond_broadcast(&cv);
        while (turn != CONTROLLER)
            pthread_cond_wait(&cv, &mu);
        t1 = bench_now_ns();
        pthread_mutex_unlock(&mu);
        return t1 - t0;
    }
    remaining = h - 1;
    t0 = bench_now_ns();
    post(resume_at);
    wait_slot(CONTROLLER);
    t1 = bench_now_ns();
    return t1 - t0;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    if (o.spread)
        bench_die("--spread is a kb_bench option (the floors have no ranks to spread)");
    static const char *const names[] = {"futex_ring", "sem_ring", "cond_bcast"};
    if (o.mode && strcmp(o.mode, "futex") == 0)
        kind = K_FUTEX;
    else if (o.mode && strcmp(o.mode, "sem") == 0)
        kind = K_SEM;
    else if (o.mode && strcmp(o.mode, "cond") == 0)
        kind = K_COND;
    else
        bench_die("usage: floor_ring futex|sem|cond --n N --m HANDOFFS --reps R [--pin]");
    if (o.m < 2)
        bench_die("--m (handoffs per repetition) must be at least 2");
    if (o.pin)
        bench_pin_here();

    /* A yield loop of N ranks passes the baton among N threads (rounds with
     * nothing to drain leave the driver out): the ring has N members, and 2
     * at N = 1, the smallest ring with a handoff. */
    nmembers = o.n < 2 ? 2 : o.n;
    slots = aligned_alloc(64, sizeof *slots * (size_t)(nmembers + 1));
    if (!slots)
        bench_die("out of memory");
    memset(slots, 0, sizeof *slots * (size_t)(nmembers + 1));
    for (long i = 0; i <= nmembers; i++) {
        slots[i].index = i;
        sem_init(&slots[i].sem, 0, 0);
    }
    for (long i = 0; i < nmembers; i++) {
        int rc = pthread_create(&slots[i].thread, NULL, member_main, &slots[i]);
        if (rc)
            bench_die("pthread_create (thread %ld): %s", i, strerror(rc));
    }

    for (int rep = -1; rep < o.reps; rep++) {
        uint64_t ns = run_rep(o.m);
        if (rep >= 0)
            bench_emit("handoff", names[kind], o.pin, o.n, rep, (double)ns / (double)o.m, "ns",
                       (uint64_t)o.m);
    }

    if (kind == K_COND) {
        pthread_mutex_lock(&mu);
        quit = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    } else {
        quit = 1;
        for (long i = 0; i < nmembers; i++)
            post(i);
    }
    for (long i = 0; i < nmembers; i++)
        pthread_join(slots[i].thread, NULL);
    for (long i = 0; i <= nmembers; i++)
        sem_destroy(&slots[i].sem);
    free(slots);
    return 0;
}
