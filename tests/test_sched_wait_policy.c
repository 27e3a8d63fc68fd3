/* SPDX-License-Identifier: MIT */
/*
 * The wait policy as a spawn reports it (kb_spawn_stats.wait_*): the
 * default measures and may switch, KB_WAIT_POLICY forces a fixed mode or
 * the static choice, the cycle test mode switches every round, and none
 * of them changes the order. The decisions themselves are tested with a
 * clock of the test's own in test_internal_wait_policy.c.
 */
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

#define MAX_TURNS 20000

/* Every turn appends its rank: the order the ranks ran in. */
struct trace {
    int yields;
    int n;
    int turns[MAX_TURNS];
};

static int record_and_yield(int rank, void *arg)
{
    struct trace *t = arg;
    for (int i = 0; i <= t->yields; i++) {
        if (t->n < MAX_TURNS)
            t->turns[t->n++] = rank; /* holding the baton: no other thread writes */
        if (i < t->yields)
            kb_yield();
    }
    return 0;
}

/* A spawn of nprocs ranks yielding `yields` times each on ctx. */
static kb_spawn_stats spawn_on(kb_ctx *ctx, int nprocs, int yields, int affinity, struct trace *t)
{
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    kb_spawn_opts o = {.stats = &st, .affinity = affinity};
    memset(t, 0, sizeof *t);
    t->yields = yields;
    assert_int_equal(kb_spawn(ctx, record_and_yield, t, nprocs, &o, NULL), 0);
    return st;
}

/* The same on a fresh ctx. */
static kb_spawn_stats spawn_traced(int nprocs, int yields, int affinity, struct trace *t)
{
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_stats st = spawn_on(ctx, nprocs, yields, affinity, t);
    kb_ctx_destroy(ctx);
    return st;
}

/* Round-robin: round k runs every rank once, in rank order. */
static void assert_round_robin(const struct trace *t, int nprocs)
{
    for (int i = 0; i < t->n; i++)
        assert_int_equal(t->turns[i], i % nprocs);
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("KB_WAIT_POLICY");
    return 0;
}

static void test_the_default_policy_is_reactive_and_reports_what_it_measured(void **state)
{
    (void)state;
    unsetenv("KB_WAIT_POLICY");
    struct trace *t = malloc(sizeof *t);
    kb_spawn_stats st = spawn_traced(4, 4000, 0, t); /* 16 000 handoffs: room for tries */
    assert_round_robin(t, 4);
    if (UNDER_VALGRIND) { /* one thread runs at a time there: every wait sleeps, nothing to choose */
        assert_int_equal(st.wait_reactive, 0);
        assert_int_equal(st.wait_mode, KB_WAIT_SLEEP);
        free(t);
        return;
    }
    assert_int_equal(st.wait_reactive, 1);
    assert_true(st.wait_mode >= 0 && st.wait_mode < KB_WAIT_MODES);
    assert_true(st.wait_ns[st.wait_mode] > 0); /* the mode it ended in was measured */
    int measured = 0;
    for (int m = 0; m < KB_WAIT_MODES; m++)
        measured += st.wait_ns[m] > 0;
    assert_true(measured >= 2); /* and at least one other was tried */
    if (kbt_policy_cpus() < 4)  /* spin only where every rank can have a CPU */
        assert_int_equal(st.wait_ns[KB_WAIT_SPIN], 0);
    free(t);
}

static void test_kb_wait_policy_forces_each_mode_and_nothing_is_measured(void **state)
{
    (void)state;
    static const char *const names[KB_WAIT_MODES] = {"sleep", "look", "nudge", "spin"};
    struct trace *t = malloc(sizeof *t);
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        setenv("KB_WAIT_POLICY", names[m], 1);
        kb_spawn_stats st = spawn_traced(3, 200, 0, t);
        assert_round_robin(t, 3);
        int want = UNDER_VALGRIND || (m == KB_WAIT_NUDGE && kbt_policy_cpus() < 2) ? KB_WAIT_SLEEP : m;
        assert_int_equal(st.wait_mode, want);
        assert_string_equal(kb_wait_mode_name(st.wait_mode), names[want]);
        assert_int_equal(st.wait_reactive, 0);
        assert_int_equal(st.wait_switches, 0);
        for (int k = 0; k < KB_WAIT_MODES; k++)
            assert_int_equal(st.wait_ns[k], 0);
    }
    free(t);
}

static void test_kb_wait_policy_static_keeps_the_choice_from_the_counts(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return; /* every wait sleeps there: the forced-mode test checks that */
    setenv("KB_WAIT_POLICY", "static", 1);
    struct trace *t = malloc(sizeof *t);
    kb_spawn_stats st = spawn_traced(2, 2000, 0, t);
    assert_int_equal(st.wait_mode, KB_WAIT_LOOK);
    assert_int_equal(st.wait_reactive, 0);
    assert_int_equal(st.wait_switches, 0);
    st = spawn_traced(8 * kbt_policy_cpus() + 1, 100, 0, t);
    assert_int_equal(st.wait_mode, kbt_policy_cpus() >= 2 ? KB_WAIT_NUDGE : KB_WAIT_LOOK);
    free(t);
}

static void test_cycle_changes_the_mode_every_round_and_keeps_the_order(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "cycle", 1);
    struct trace *t = malloc(sizeof *t);
    for (int n = 1; n <= 9; n += 4) {
        kb_spawn_stats st = spawn_traced(n, 400, 0, t);
        assert_int_equal(t->n, n * 401);
        assert_round_robin(t, n);
        assert_int_equal(st.wait_reactive, 0);
        /* one change at every round boundary after the first round's */
        assert_int_equal(st.wait_switches, st.rounds - 1);
    }
    free(t);
}

static void test_affinity_options_report_the_mode_they_imply(void **state)
{
    (void)state;
    if (!(kb_features() & KB_FEATURE_AFFINITY) || UNDER_VALGRIND)
        return; /* KB_ENOTSUP without affinity (test_api_errors); Valgrind: sleeps */
    unsetenv("KB_WAIT_POLICY");
    struct trace *t = malloc(sizeof *t);
    kb_spawn_stats st = spawn_traced(4, 100, KB_AFFINITY_ONE_CPU, t);
    assert_round_robin(t, 4);
    assert_int_equal(st.wait_mode, KB_WAIT_SLEEP);
    assert_int_equal(st.wait_reactive, 0);
    if (kbt_real_cpus() >= 2) { /* pinned to real CPUs, whatever KB_TEST_CPUS says */
        st = spawn_traced(8, 100, KB_AFFINITY_SPREAD, t);
        assert_int_equal(st.wait_mode, KB_WAIT_NUDGE);
        st = spawn_traced(2, 100, KB_AFFINITY_SPREAD, t);
        assert_int_equal(st.wait_mode, KB_WAIT_SPIN);
    }
    free(t);
}

static void test_a_short_spawn_keeps_the_static_choice(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    unsetenv("KB_WAIT_POLICY");
    struct trace *t = malloc(sizeof *t);
    int n = 8 * kbt_policy_cpus() + 1;
    kb_spawn_stats st = spawn_traced(n, 3, 0, t);
    assert_int_equal(st.wait_reactive, 1);
    for (int m = 0; m < KB_WAIT_MODES; m++) /* too short for a try: only its own mode measured, if any */
        if (m != st.wait_mode)
            assert_int_equal(st.wait_ns[m], 0);
    assert_int_equal(st.wait_mode, kbt_policy_cpus() >= 2 ? KB_WAIT_NUDGE : KB_WAIT_LOOK);
    free(t);
}

/* A ctx whose adapting spawn of 4 ranks (16 000 handoffs) measured its
 * mode; *first gets that spawn's stats. */
static kb_ctx *ctx_that_learnt(struct trace *t, kb_spawn_stats *first)
{
    unsetenv("KB_WAIT_POLICY");
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    *first = spawn_on(ctx, 4, 4000, 0, t);
    assert_true(first->wait_ns[first->wait_mode] > 0);
    return ctx;
}

/* A second spawn of the same shape on a ctx, too short to measure
 * anything itself (fewer handoffs than one window), reports exactly what
 * the first one ended with: it started there. */
static void test_a_ctx_starts_its_next_spawn_of_a_shape_where_the_last_one_ended(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return; /* nothing is steered there (the first test checks it) */
    struct trace *t = malloc(sizeof *t);
    kb_spawn_stats first;
    kb_ctx *ctx = ctx_that_learnt(t, &first);
    kb_spawn_stats next = spawn_on(ctx, 4, 3, 0, t);
    assert_round_robin(t, 4);
    assert_int_equal(next.wait_reactive, 1);
    assert_int_equal(next.wait_mode, first.wait_mode);
    assert_int_equal(next.wait_switches, 0);
    assert_memory_equal(next.wait_ns, first.wait_ns, sizeof next.wait_ns);
    kb_ctx_destroy(ctx);
    free(t);
}

static void test_a_spawn_of_another_shape_or_on_another_ctx_starts_afresh(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    struct trace *t = malloc(sizeof *t);
    kb_spawn_stats first;
    kb_ctx *ctx = ctx_that_learnt(t, &first);
    kb_spawn_stats other = spawn_on(ctx, 5, 3, 0, t);
    kb_spawn_stats fresh = spawn_traced(4, 3, 0, t);
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        assert_int_equal(other.wait_ns[m], 0);
        assert_int_equal(fresh.wait_ns[m], 0);
    }
    assert_int_equal(other.wait_mode, KB_WAIT_LOOK); /* the static choice for 5 ranks on any CPUs */
    kb_ctx_destroy(ctx);
    free(t);
}

/* A spawn that is not steered (KB_WAIT_POLICY forcing a mode or the
 * static choice) neither uses nor overwrites what the ctx remembers. */
static void test_a_forced_spawn_leaves_what_the_ctx_remembers(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    struct trace *t = malloc(sizeof *t);
    kb_spawn_stats first;
    kb_ctx *ctx = ctx_that_learnt(t, &first);
    setenv("KB_WAIT_POLICY", "static", 1);
    kb_spawn_stats forced = spawn_on(ctx, 4, 4000, 0, t);
    assert_int_equal(forced.wait_reactive, 0);
    assert_int_equal(forced.wait_ns[KB_WAIT_LOOK], 0);
    unsetenv("KB_WAIT_POLICY");
    kb_spawn_stats next = spawn_on(ctx, 4, 3, 0, t);
    assert_int_equal(next.wait_mode, first.wait_mode);
    assert_memory_equal(next.wait_ns, first.wait_ns, sizeof next.wait_ns);
    kb_ctx_destroy(ctx);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_the_default_policy_is_reactive_and_reports_what_it_measured, teardown),
        cmocka_unit_test_teardown(test_kb_wait_policy_forces_each_mode_and_nothing_is_measured, teardown),
        cmocka_unit_test_teardown(test_kb_wait_policy_static_keeps_the_choice_from_the_counts, teardown),
        cmocka_unit_test_teardown(test_cycle_changes_the_mode_every_round_and_keeps_the_order, teardown),
        cmocka_unit_test_teardown(test_affinity_options_report_the_mode_they_imply, teardown),
        cmocka_unit_test_teardown(test_a_short_spawn_keeps_the_static_choice, teardown),
        cmocka_unit_test_teardown(test_a_ctx_starts_its_next_spawn_of_a_shape_where_the_last_one_ended,
                                  teardown),
        cmocka_unit_test_teardown(test_a_spawn_of_another_shape_or_on_another_ctx_starts_afresh, teardown),
        cmocka_unit_test_teardown(test_a_forced_spawn_leaves_what_the_ctx_remembers, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
