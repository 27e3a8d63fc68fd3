/*
 * The baton's wait slot (src/baton.h), below the scheduler: a nudge wakes a
 * sleeping owner without handing it the baton, the owner watches its slot
 * for a while and then sleeps again; a nudge to an awake owner makes its
 * next wait watch first; a post is taken whatever the nudges.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "baton.h"

#define SLEEPING 0x80000000u

static struct kb_slot slot;
static int returned; /* __atomic: the owner came back from its wait */

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
    kb_slot_wait_spin(&slot, 0, 1000000000); /* after a nudge: watch for 1 s */
    __atomic_store_n(&returned, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A fresh slot and its owner thread waiting on it. */
static pthread_t start_owner(void)
{
    kb_slot_init(&slot);
    returned = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner, NULL), 0);
    return t;
}

/* Give the owner the baton: its wait returns. */
static void post_and_join(pthread_t t)
{
    kb_slot_post(&slot);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(returned, 1);
}

static void test_a_nudge_wakes_a_sleeping_owner_without_giving_it_the_baton(void **state)
{
    (void)state;
    pthread_t t = start_owner();
    assert_true(owner_sleeps_within(5000));
    kb_slot_nudge(&slot);
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
    kb_slot_init(&slot);
    kb_slot_nudge(&slot); /* nobody waits yet */
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
    kb_slot_init(&slot);
    kb_slot_post(&slot);
    kb_slot_nudge(&slot);
    kb_slot_wait(&slot);         /* returns: the count moved */
    assert_int_equal(word(), 1); /* count 1, the nudge mark cleared with the take */
}

static void test_a_post_during_the_watch_is_taken_by_the_watching_owner(void **state)
{
    (void)state;
    pthread_t t = start_owner();
    assert_true(owner_sleeps_within(5000));
    kb_slot_nudge(&slot);
    post_and_join(t); /* while it watches (or before): taken either way */
    assert_false(word() & SLEEPING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_nudge_wakes_a_sleeping_owner_without_giving_it_the_baton),
        cmocka_unit_test(test_a_nudge_to_an_awake_owner_makes_its_next_wait_watch_before_sleeping),
        cmocka_unit_test(test_a_pending_post_is_taken_at_once_despite_a_nudge),
        cmocka_unit_test(test_a_post_during_the_watch_is_taken_by_the_watching_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
