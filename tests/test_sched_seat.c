/* SPDX-License-Identifier: MIT */
/*
 * Seating (src/rank_seat.c) as a spawn reports it (kb_spawn_stats.wait_seats):
 * with the default affinity on two CPUs or more, each stretch of nudging
 * moves every rank that suspends in it onto its CPU once, a stretch of
 * another mode after nudges gathers them on one CPU, and either leaves the
 * thread's affinity as it was; no seating without nudges, with an affinity
 * option or on one CPU. Under Valgrind nothing nudges unless the cycle test mode
 * asks for it (baton_wait_policy.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"

#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND 0
#endif

/* What every turn of every rank saw of its own thread's affinity. */
struct affinity_check {
    int yields;
    cpu_set_t driver;  /* the driver's mask, which rank threads inherit */
    int turns;         /* turns seen */
    int changed_turns; /* turns whose thread's mask was not the driver's */
};

static int check_affinity_and_yield(int rank, void *arg)
{
    (void)rank;
    struct affinity_check *c = arg;
    for (int i = 0; i <= c->yields; i++) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
        c->turns++; /* holding the baton: no other thread writes */
        c->changed_turns += !CPU_EQUAL(&mine, &c->driver);
        if (i < c->yields)
            kb_yield();
    }
    return 0;
}

static kb_spawn_stats spawn_checked(int nprocs, int yields, int affinity, struct affinity_check *c)
{
    memset(c, 0, sizeof *c);
    c->yields = yields;
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof c->driver, &c->driver), 0);
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    kb_spawn_opts o = {.stats = &st, .affinity = affinity};
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, check_affinity_and_yield, c, nprocs, &o, NULL), 0);
    kb_ctx_destroy(ctx);
    assert_int_equal(c->turns, nprocs * (yields + 1));
    return st;
}

/* Whether this build can seat (pin) threads: on the real CPUs, whatever
 * the wait policy is told to count (KB_TEST_CPUS). */
static int can_seat(void)
{
    return (kb_features() & KB_FEATURE_AFFINITY) && kbt_real_cpus() >= 2;
}

/* Whether nudges nudge: the policy gives them a watch only where it counts
 * a second CPU to wake on. */
static int nudges_watch(void)
{
    return kbt_policy_cpus() >= 2 && !UNDER_VALGRIND;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("KB_WAIT_POLICY");
    return 0;
}

static void test_a_spawn_with_nudges_seats_each_rank_once(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "nudge", 1);
    struct affinity_check c;
    kb_spawn_stats st = spawn_checked(8, 50, 0, &c);
    /* A forced nudge nudges wherever there is a second CPU to wake on
     * (portable builds included, which cannot pin: they seat nobody). */
    int nudges = nudges_watch();
    assert_int_equal(st.wait_mode, nudges ? KB_WAIT_NUDGE : KB_WAIT_SLEEP);
    assert_int_equal(st.wait_seats, nudges && can_seat() ? 8 : 0);
}

static void test_seating_leaves_every_rank_thread_its_affinity(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "nudge", 1);
    struct affinity_check c;
    kb_spawn_stats st = spawn_checked(16, 20, 0, &c);
    assert_int_equal(c.changed_turns, 0);
    if (can_seat() && nudges_watch())
        assert_int_equal(st.wait_seats, 16); /* it did seat them */
}

static void test_a_spawn_without_nudges_seats_none(void **state)
{
    (void)state;
    static const char *const modes[] = {"look", "sleep", "spin"};
    struct affinity_check c;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        setenv("KB_WAIT_POLICY", modes[i], 1);
        kb_spawn_stats st = spawn_checked(8, 50, 0, &c);
        assert_int_equal(st.wait_seats, 0);
    }
}

static void test_affinity_options_seat_none(void **state)
{
    (void)state;
    if (!(kb_features() & KB_FEATURE_AFFINITY))
        return; /* kb_spawn refuses the options there (test_api_errors) */
    struct affinity_check c;
    kb_spawn_stats st = spawn_checked(8, 50, KB_AFFINITY_SPREAD, &c); /* nudges, pinned */
    assert_int_equal(st.wait_seats, 0);
    st = spawn_checked(8, 50, KB_AFFINITY_ONE_CPU, &c);
    assert_int_equal(st.wait_seats, 0);
}

static void
test_each_stretch_of_nudges_seats_the_ranks_and_those_of_looks_and_after_nudges_gather_them(void **state)
{
    (void)state;
    /* The cycle test mode moves through sleep, look, nudge and spin, one
     * round each (Valgrind included): every fourth round is a stretch of
     * nudges, each of its ranks suspends once in it (seated), once in the
     * round of spins after it (gathered on one CPU), and once in the round
     * of looks before it (gathered where the ranks outnumber the CPUs the
     * policy counts). Where it counts one CPU, nudges have no watch: nothing
     * is seated, and only the looks gather. */
    setenv("KB_WAIT_POLICY", "cycle", 1);
    struct affinity_check c;
    kb_spawn_stats st = spawn_checked(5, 200, 0, &c);
    assert_int_equal(c.changed_turns, 0);
    if (!can_seat()) {
        assert_int_equal(st.wait_seats, 0);
        return;
    }
    uint64_t stretches = st.rounds / 4;
    uint64_t per = (kbt_policy_cpus() >= 2 ? 2 : 0) + (5 > kbt_policy_cpus() ? 1 : 0);
    assert_int_equal(st.wait_seats % 5, 0);
    assert_true(st.wait_seats >= per * 5 * (stretches - 1));
    assert_true(st.wait_seats <= per * 5 * (stretches + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_spawn_with_nudges_seats_each_rank_once, teardown),
        cmocka_unit_test_teardown(test_seating_leaves_every_rank_thread_its_affinity, teardown),
        cmocka_unit_test_teardown(test_a_spawn_without_nudges_seats_none, teardown),
        cmocka_unit_test_teardown(test_affinity_options_seat_none, teardown),
        cmocka_unit_test_teardown(
            test_each_stretch_of_nudges_seats_the_ranks_and_those_of_looks_and_after_nudges_gather_them,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
