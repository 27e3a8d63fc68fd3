/* SPDX-License-Identifier: MIT */
/*
 * Seating as rank code sees it: the wait policy may move a rank's thread
 * onto another of the driver's CPUs while it waits (src/wait_policy.c), and
 * sets its affinity back at once, so no turn of rank code ever finds its
 * thread's mask changed. Where the ranks are moved is
 * test_internal_wait_policy.c's.
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

static void test_rank_code_never_sees_its_affinity_changed_by_nudges(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "nudge", 1);
    struct affinity_check c;
    kb_spawn_stats st = spawn_checked(16, 20, 0, &c);
    assert_int_equal(st.wait_mode, nudges_watch() ? KB_WAIT_NUDGE : KB_WAIT_SLEEP);
    assert_int_equal(c.changed_turns, 0);
}

static void test_rank_code_never_sees_its_affinity_changed_when_modes_change_every_round(void **state)
{
    (void)state;
    /* The cycle test mode moves through every mode, one round each: each
     * stretch of nudges moves the ranks apart, the looks after it gather
     * them (test_internal_wait_policy.c checks where). */
    setenv("KB_WAIT_POLICY", "cycle", 1);
    struct affinity_check c;
    kb_spawn_stats st = spawn_checked(5, 200, 0, &c);
    assert_true(st.wait_switches >= 200);
    assert_int_equal(c.changed_turns, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rank_code_never_sees_its_affinity_changed_by_nudges, teardown),
        cmocka_unit_test_teardown(
            test_rank_code_never_sees_its_affinity_changed_when_modes_change_every_round, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
