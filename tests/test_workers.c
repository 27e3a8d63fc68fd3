/* SPDX-License-Identifier: MIT */
/*
 * Rank threads (workers): a ctx parks the threads of finished ranks and
 * reuses them in the next spawn, names each for its rank, replaces the ones
 * whose rank unwound, joins them all in kb_ctx_destroy; KB_AFFINITY_ONE_CPU
 * pins ranks and driver to one CPU and restores the driver afterwards.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"

#define MAXR 8

static pid_t tids[MAXR];
static char names[MAXR][16];
static int ncpus_seen[MAXR], cpu_seen[MAXR];

static int record_rank(int rank, void *arg)
{
    (void)arg;
    tids[rank] = gettid();
    pthread_getname_np(pthread_self(), names[rank], sizeof names[rank]);
    cpu_set_t set;
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    ncpus_seen[rank] = CPU_COUNT(&set);
    cpu_seen[rank] = sched_getcpu();
    return kb_yield();
}

static int raising_rank(int rank, void *arg)
{
    (void)arg;
    tids[rank] = gettid();
    if (rank == 1)
        kb_raise(3, "rank 1 leaves");
    return kb_yield();
}

static void test_a_second_spawn_reuses_the_parked_threads_rank_for_rank(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    long before = kbt_thread_baseline();
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 4, NULL, NULL), 0);
    pid_t first[4];
    memcpy(first, tids, sizeof first);
    assert_int_equal(kbt_task_count(), before + 4); /* parked, not gone */
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 4, NULL, NULL), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(tids[i], first[i]);
    assert_int_equal(kbt_task_count(), before + 4);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_int_equal(kbt_settle_tasks(before, 2000), before);
}

static void test_more_ranks_than_parked_threads_creates_only_the_missing_ones(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    long before = kbt_thread_baseline();
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 2, NULL, NULL), 0);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 5, NULL, NULL), 0);
    assert_int_equal(kbt_task_count(), before + 5);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 3, NULL, NULL), 0);
    assert_int_equal(kbt_task_count(), before + 5); /* the pool keeps 5 */
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_int_equal(kbt_settle_tasks(before, 2000), before);
}

/* Rank i's thread name: kb-rank-<i>; where the library names no thread
 * (KB_PORTABLE=ON: no KB_FEATURE_THREAD_NAMES), the name every new thread
 * inherits from its creator, the driver, i.e. this thread. */
static void want_name(int i, char *want, size_t cap)
{
    if (kb_features() & KB_FEATURE_THREAD_NAMES)
        snprintf(want, cap, "kb-rank-%d", i);
    else
        assert_int_equal(pthread_getname_np(pthread_self(), want, cap), 0);
}

static void test_every_rank_thread_is_named_for_its_rank_also_when_reused(void **state)
{
    (void)state;
    kb_ctx *ctx;
    char want[16];
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 3, NULL, NULL), 0);
    want_name(0, want, sizeof want);
    assert_string_equal(names[0], want);
    want_name(2, want, sizeof want);
    assert_string_equal(names[2], want);
    /* A failed spawn loses rank 1's thread; the pool's order shifts. */
    assert_int_equal(kb_spawn(ctx, raising_rank, NULL, 3, NULL, NULL), KB_ESPAWN);
    memset(names, 0, sizeof names);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 6, NULL, NULL), 0);
    for (int i = 0; i < 6; i++) {
        want_name(i, want, sizeof want);
        assert_string_equal(names[i], want);
    }
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_an_unwound_ranks_thread_is_replaced_in_the_next_spawn(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    long before = kbt_thread_baseline();
    assert_int_equal(kb_spawn(ctx, raising_rank, NULL, 3, NULL, NULL), KB_ESPAWN);
    /* Rank 1 unwound (kb_raise) and rank 0 was cancelled (UNWIND): their
     * threads ended. Rank 2 never started: its thread is parked. */
    assert_int_equal(kbt_settle_tasks(before + 1, 2000), before + 1);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 3, NULL, NULL), 0);
    assert_int_equal(kbt_task_count(), before + 3);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_a_different_stack_size_gets_new_threads(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    long before = kbt_thread_baseline();
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 3, NULL, NULL), 0);
    pid_t first = tids[0];
    kb_spawn_opts small = {.stack_size = 128 * 1024};
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 3, &small, NULL), 0);
    assert_int_not_equal(tids[0], first);
    assert_int_equal(kbt_settle_tasks(before + 3, 2000), before + 3); /* old ones joined */
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* A library without affinity (kb_features(), e.g. KB_PORTABLE=ON) refuses
 * both options with KB_ENOTSUP before any rank runs: then 1, and the
 * affinity test that asked has nothing more to check. */
static int refused_without_affinity(void)
{
    if (kb_features() & KB_FEATURE_AFFINITY)
        return 0;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts one = {.affinity = KB_AFFINITY_ONE_CPU}, spread = {.affinity = KB_AFFINITY_SPREAD};
    memset(tids, 0, sizeof tids);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 4, &one, NULL), KB_ENOTSUP);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 4, &spread, NULL), KB_ENOTSUP);
    assert_int_equal(tids[0], 0); /* no rank ran */
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    return 1;
}

static void test_affinity_one_cpu_pins_every_rank_and_restores_the_driver(void **state)
{
    (void)state;
    if (refused_without_affinity())
        return;
    cpu_set_t mine;
    pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts one = {.affinity = KB_AFFINITY_ONE_CPU};
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 4, &one, NULL), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ncpus_seen[i], 1);
        assert_int_equal(cpu_seen[i], cpu_seen[0]);
    }
    cpu_set_t after;
    pthread_getaffinity_np(pthread_self(), sizeof after, &after);
    assert_true(CPU_EQUAL(&mine, &after));
    /* Reused without the option: unpinned again. */
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 4, NULL, NULL), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ncpus_seen[i], CPU_COUNT(&mine));
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* The CPUs the calling thread may run on, in order; returns how many. */
static int my_cpus(int *cpus, int cap)
{
    cpu_set_t set;
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < cap; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n;
}

static void test_affinity_spread_pins_rank_r_to_the_rth_cpu_and_leaves_the_driver(void **state)
{
    (void)state;
    if (refused_without_affinity())
        return;
    int cpus[CPU_SETSIZE];
    int n = my_cpus(cpus, CPU_SETSIZE);
    cpu_set_t mine;
    pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts spread = {.affinity = KB_AFFINITY_SPREAD};
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, MAXR, &spread, NULL), 0);
    for (int i = 0; i < MAXR; i++) {
        assert_int_equal(ncpus_seen[i], 1);
        assert_int_equal(cpu_seen[i], cpus[i % n]);
    }
    cpu_set_t after;
    pthread_getaffinity_np(pthread_self(), sizeof after, &after);
    assert_true(CPU_EQUAL(&mine, &after));
    /* Reused without the option: unpinned again. */
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, MAXR, NULL, NULL), 0);
    for (int i = 0; i < MAXR; i++)
        assert_int_equal(ncpus_seen[i], CPU_COUNT(&mine));
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* Ranks append to one log under the baton: the interleaving. */
#define LOGCAP 4096
static int turn_log[LOGCAP];
static int nlog;

static int logging_rank(int rank, void *arg)
{
    int steps = *(int *)arg;
    for (int i = 0; i < steps + rank % 3; i++) {
        turn_log[nlog++] = rank;
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    turn_log[nlog++] = 100 + rank;
    return 0;
}

static void test_affinity_spread_keeps_the_interleaving(void **state)
{
    (void)state;
    if (refused_without_affinity())
        return;
    static int baseline[LOGCAP];
    int steps = 40, nbase;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    nlog = 0;
    assert_int_equal(kb_spawn(ctx, logging_rank, &steps, 7, NULL, NULL), 0);
    nbase = nlog;
    memcpy(baseline, turn_log, sizeof baseline);
    kb_spawn_opts spread = {.affinity = KB_AFFINITY_SPREAD};
    for (int run = 0; run < 20; run++) {
        nlog = 0;
        assert_int_equal(kb_spawn(ctx, logging_rank, &steps, 7, &spread, NULL), 0);
        assert_int_equal(nlog, nbase);
        assert_memory_equal(turn_log, baseline, sizeof(int) * (size_t)nbase);
    }
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static int raising_late_rank(int rank, void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        if (rank == 4 && i == 30)
            kb_raise(9, "rank 4 leaves mid-run");
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* One spread spawn of fn that must fail with rank's code, and only that. */
static void expect_spread_failure(kb_ctx *ctx, kb_rank_fn fn, int rank, int code)
{
    kb_spawn_opts spread = {.affinity = KB_AFFINITY_SPREAD};
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, fn, NULL, MAXR, &spread, &err), KB_ESPAWN);
    assert_int_equal(kb_spawn_error_count(err), 1);
    assert_int_equal(kb_spawn_error_get(err, 0)->rank, rank);
    assert_int_equal(kb_spawn_error_get(err, 0)->code, code);
    kb_spawn_error_free(err);
}

static void test_affinity_spread_fails_cancels_and_replaces_threads_like_the_default(void **state)
{
    (void)state;
    if (refused_without_affinity())
        return;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    long before = kbt_thread_baseline();
    kb_spawn_opts spread = {.affinity = KB_AFFINITY_SPREAD};
    for (int run = 0; run < 10; run++)
        expect_spread_failure(ctx, raising_late_rank, 4, 9);
    /* Every rank unwound (rank 4 raised, the others were cancelled): their
     * threads ended and were joined; nothing left behind. */
    assert_int_equal(kbt_settle_tasks(before, 2000), before);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, MAXR, &spread, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_int_equal(kbt_settle_tasks(before, 2000), before);
}

static int finishing_then_raising_rank(int rank, void *arg)
{
    (void)arg;
    for (int i = 0; i < 40; i++) {
        if (rank == 2 && i == 3)
            return 0; /* finishes early: its worker goes back to waiting */
        if (rank == 5 && i == 20)
            kb_raise(5, "rank 5 leaves after rank 2 finished");
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void test_affinity_spread_fails_cleanly_after_a_rank_finished(void **state)
{
    (void)state;
    if (refused_without_affinity())
        return;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    for (int run = 0; run < 10; run++)
        expect_spread_failure(ctx, finishing_then_raising_rank, 5, 5);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_an_unknown_affinity_is_EINVAL(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts bad = {.affinity = 7};
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 2, &bad, NULL), KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_second_spawn_reuses_the_parked_threads_rank_for_rank),
        cmocka_unit_test(test_more_ranks_than_parked_threads_creates_only_the_missing_ones),
        cmocka_unit_test(test_every_rank_thread_is_named_for_its_rank_also_when_reused),
        cmocka_unit_test(test_an_unwound_ranks_thread_is_replaced_in_the_next_spawn),
        cmocka_unit_test(test_a_different_stack_size_gets_new_threads),
        cmocka_unit_test(test_affinity_one_cpu_pins_every_rank_and_restores_the_driver),
        cmocka_unit_test(test_affinity_spread_pins_rank_r_to_the_rth_cpu_and_leaves_the_driver),
        cmocka_unit_test(test_affinity_spread_keeps_the_interleaving),
        cmocka_unit_test(test_affinity_spread_fails_cancels_and_replaces_threads_like_the_default),
        cmocka_unit_test(test_affinity_spread_fails_cleanly_after_a_rank_finished),
        cmocka_unit_test(test_an_unknown_affinity_is_EINVAL),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
