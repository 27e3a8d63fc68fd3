/* SPDX-License-Identifier: MIT */
/*
 * The baton's wait slot (src/baton.h), below the scheduler, built once per
 * implementation (test_internal_slot_futex, test_internal_slot_condvar):
 * a post before the wait is not lost; a timed wait gives up without a post
 * and takes a later one; the owner may free its slot as soon as it has
 * seen the post; a nudge wakes a sleeping owner without handing it the
 * baton, the owner watches its slot for a while and then sleeps again; a
 * nudge to an awake owner makes its next wait watch first; a post is taken
 * whatever the nudges; a watch that yields the CPU between looks
 * (KB_WATCH_YIELD) behaves the same.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "baton.h"
#include "clock.h"
#include "kbthreads.h"

#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND 0
#endif

#define SLEEPING KB_SLOT_SLEEPING

static struct kb_slot slot;
static int returned;                      /* __atomic: the owner came back from its wait */
static unsigned owner_watch = 1000000000; /* the owner's watch after a nudge: 1 s */

static uint32_t word(void)
{
    return __atomic_load_n(&slot.word, __ATOMIC_SEQ_CST);
}

/* Poll until the owner is asleep (its flag up) or ms pass: 1 if asleep. */
static int owner_sleeps_within(int ms)
{
    for (int i = 0; i < ms * 10; i++) {
        if (word() & SLEEPING)
            return 1;
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    return 0;
}

static void *owner(void *arg)
{
    (void)arg;
    kb__slot_wait_budget(&slot, &(struct kb_wait_budget){.watch = owner_watch});
    __atomic_store_n(&returned, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A fresh slot (the static one, re-initialised per test). */
static void fresh_slot(void)
{
    assert_int_equal(kb__slot_init(&slot), 0);
}

/* A fresh slot and its owner thread waiting on it. */
static pthread_t start_owner(void)
{
    fresh_slot();
    returned = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner, NULL), 0);
    return t;
}

/* Give the owner the baton: its wait returns. */
static void post_and_join(pthread_t t)
{
    kb__slot_post(&slot);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(returned, 1);
}

static void test_a_nudge_wakes_a_sleeping_owner_without_giving_it_the_baton(void **state)
{
    (void)state;
    pthread_t t = start_owner();
    assert_true(owner_sleeps_within(5000));
    kb__slot_nudge(&slot);
    /* The nudge took the flag down; only an owner that woke, watched and
     * went back to sleep puts it up again. */
    assert_false(word() & SLEEPING);
    assert_true(owner_sleeps_within(5000));
    assert_int_equal(__atomic_load_n(&returned, __ATOMIC_SEQ_CST), 0); /* no baton */
    assert_int_equal(word() & ~SLEEPING, 0);                           /* no post */
    post_and_join(t);
}

static void test_a_nudge_to_an_awake_owner_makes_its_next_wait_watch_before_sleeping(void **state)
{
    (void)state;
    fresh_slot();
    kb__slot_nudge(&slot); /* nobody waits yet */
    returned = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner, NULL), 0);
    /* It watches (1 s) instead of sleeping at once. */
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    assert_false(word() & SLEEPING);
    assert_int_equal(__atomic_load_n(&returned, __ATOMIC_SEQ_CST), 0);
    assert_true(owner_sleeps_within(5000));
    post_and_join(t);
}

static void test_a_pending_post_is_taken_at_once_despite_a_nudge(void **state)
{
    (void)state;
    fresh_slot();
    kb__slot_post(&slot);
    kb__slot_nudge(&slot);
    kb__slot_wait(&slot);        /* returns: the count moved */
    assert_int_equal(word(), 1); /* count 1, the nudge mark cleared with the take */
}

static void test_a_post_during_the_watch_is_taken_by_the_watching_owner(void **state)
{
    (void)state;
    pthread_t t = start_owner();
    assert_true(owner_sleeps_within(5000));
    kb__slot_nudge(&slot);
    post_and_join(t); /* while it watches (or before): taken either way */
    assert_false(word() & SLEEPING);
}

static void test_a_yielding_watch_takes_a_post_that_comes_during_it(void **state)
{
    (void)state;
    owner_watch = 1000000000 | KB_WATCH_YIELD;
    fresh_slot();
    kb__slot_nudge(&slot); /* nobody waits yet: the owner's wait starts with the watch */
    returned = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner, NULL), 0);
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    assert_false(word() & SLEEPING); /* watching, not asleep */
    assert_int_equal(__atomic_load_n(&returned, __ATOMIC_SEQ_CST), 0);
    post_and_join(t);
    assert_false(word() & SLEEPING);
}

static void test_a_yielding_watch_ends_in_sleep_when_no_post_comes(void **state)
{
    (void)state;
    owner_watch = 20000000 | KB_WATCH_YIELD; /* 20 ms */
    pthread_t t = start_owner();
    assert_true(owner_sleeps_within(5000));
    kb__slot_nudge(&slot);
    assert_true(owner_sleeps_within(5000)); /* watched, then slept again */
    assert_int_equal(__atomic_load_n(&returned, __ATOMIC_SEQ_CST), 0);
    post_and_join(t);
}

static void test_the_library_of_this_test_is_the_implementation_it_names(void **state)
{
    (void)state;
    assert_string_equal(kb_baton_name(), KB_TEST_BATON);
}

static void test_a_post_before_the_wait_is_not_lost(void **state)
{
    (void)state;
    fresh_slot();
    kb__slot_post(&slot);
    kb__slot_wait(&slot); /* returns at once */
    assert_int_equal(word(), 1);
    kb__slot_post(&slot);
    kb__slot_wait_budget(&slot, &(struct kb_wait_budget){0});
    assert_int_equal(word(), 2);
}

/* An absolute CLOCK_MONOTONIC time ms from now. */
static struct timespec in_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (ms % 1000) * 1000000L;
    t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static void test_a_timed_wait_gives_up_without_a_post_and_takes_a_later_one(void **state)
{
    (void)state;
    fresh_slot();
    struct timespec soon = in_ms(20);
    assert_int_equal(kb__slot_wait_until(&slot, &soon), -1);
    assert_true(kb__time_passed(&soon)); /* not before the deadline */
    assert_int_equal(kb__slot_wait_yield_until(&slot, 1000, &soon), -1);
    kb__slot_post(&slot);
    struct timespec later = in_ms(60000);
    assert_int_equal(kb__slot_wait_until(&slot, &later), 0);
    assert_int_equal(word() & KB_SLOT_COUNT, 1);
}

/* Owner of a heap slot: wait for the post, then destroy and free the slot
 * at once, while its poster may still be finishing kb__slot_post. */
static void *freeing_owner(void *arg)
{
    struct kb_slot *s = arg;
    kb__slot_wait(s);
    kb__slot_destroy(s);
    free(s);
    return NULL;
}

static void test_the_owner_may_free_its_slot_as_soon_as_it_has_seen_the_post(void **state)
{
    (void)state;
    /* A use-after-free here is what ASan and memcheck report. */
    int rounds = UNDER_VALGRIND ? 200 : 4000;
    for (int i = 0; i < rounds; i++) {
        struct kb_slot *s = NULL;
        assert_int_equal(posix_memalign((void **)&s, KB_CACHELINE, sizeof *s), 0);
        memset(s, 0, sizeof *s);
        assert_int_equal(kb__slot_init(s), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, freeing_owner, s), 0);
        if (i % 2)
            nanosleep(&(struct timespec){0, 20000}, NULL); /* sometimes asleep first */
        kb__slot_post(s);                                  /* s may be freed by the time this returns */
        assert_int_equal(pthread_join(t, NULL), 0);
    }
}

/* Two threads hand the baton back and forth through their slots; each
 * checks that it is alone while it holds it. */
#define PINGPONG_TURNS 100000
static struct kb_slot pair[2];
static int holding; /* __atomic: threads holding the baton */
static int overlaps;

static void *pingpong(void *arg)
{
    int me = (int)(intptr_t)arg;
    int turns = UNDER_VALGRIND ? 2000 : PINGPONG_TURNS;
    for (int i = 0; i < turns; i++) {
        kb__slot_wait_budget(&pair[me], &(struct kb_wait_budget){.spin_ns = 2000});
        if (__atomic_add_fetch(&holding, 1, __ATOMIC_SEQ_CST) != 1)
            __atomic_add_fetch(&overlaps, 1, __ATOMIC_SEQ_CST);
        __atomic_sub_fetch(&holding, 1, __ATOMIC_SEQ_CST);
        kb__slot_post(&pair[1 - me]);
    }
    return NULL;
}

static void test_a_post_wakes_exactly_its_owner_one_holder_at_a_time(void **state)
{
    (void)state;
    assert_int_equal(kb__slot_init(&pair[0]), 0);
    assert_int_equal(kb__slot_init(&pair[1]), 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, pingpong, (void *)(intptr_t)i), 0);
    kb__slot_post(&pair[0]);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(overlaps, 0);
    /* Thread 0 took one post more than thread 1 gave it: the last post
     * (to 0) is still pending. */
    assert_true(kb__slot_posted(&pair[0]));
    assert_false(kb__slot_posted(&pair[1]));
    kb__slot_destroy(&pair[0]);
    kb__slot_destroy(&pair[1]);
}

/* Each test gets a fresh static slot; release the last one's. */
static int destroy_slot(void **state)
{
    (void)state;
    kb__slot_destroy(&slot);
    return 0;
}

static int reset_owner_watch(void **state)
{
    owner_watch = 1000000000;
    return destroy_slot(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_library_of_this_test_is_the_implementation_it_names),
        cmocka_unit_test_teardown(test_a_post_before_the_wait_is_not_lost, destroy_slot),
        cmocka_unit_test_teardown(test_a_timed_wait_gives_up_without_a_post_and_takes_a_later_one,
                                  destroy_slot),
        cmocka_unit_test(test_the_owner_may_free_its_slot_as_soon_as_it_has_seen_the_post),
        cmocka_unit_test(test_a_post_wakes_exactly_its_owner_one_holder_at_a_time),
        cmocka_unit_test_teardown(test_a_nudge_wakes_a_sleeping_owner_without_giving_it_the_baton,
                                  destroy_slot),
        cmocka_unit_test_teardown(test_a_nudge_to_an_awake_owner_makes_its_next_wait_watch_before_sleeping,
                                  destroy_slot),
        cmocka_unit_test_teardown(test_a_pending_post_is_taken_at_once_despite_a_nudge, destroy_slot),
        cmocka_unit_test_teardown(test_a_post_during_the_watch_is_taken_by_the_watching_owner, destroy_slot),
        cmocka_unit_test_teardown(test_a_yielding_watch_takes_a_post_that_comes_during_it, reset_owner_watch),
        cmocka_unit_test_teardown(test_a_yielding_watch_ends_in_sleep_when_no_post_comes, reset_owner_watch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
