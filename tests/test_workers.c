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

#include "helpers/kbt_util.h"
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

static void test_every_rank_thread_is_named_for_its_rank_also_when_reused(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 3, NULL, NULL), 0);
    assert_string_equal(names[0], "kb-rank-0");
    assert_string_equal(names[2], "kb-rank-2");
    /* A failed spawn loses rank 1's thread; the pool's order shifts. */
    assert_int_equal(kb_spawn(ctx, raising_rank, NULL, 3, NULL, NULL), KB_ESPAWN);
    memset(names, 0, sizeof names);
    assert_int_equal(kb_spawn(ctx, record_rank, NULL, 6, NULL, NULL), 0);
    for (int i = 0; i < 6; i++) {
        char want[16];
        snprintf(want, sizeof want, "kb-rank-%d", i);
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

static void test_affinity_one_cpu_pins_every_rank_and_restores_the_driver(void **state)
{
    (void)state;
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
        cmocka_unit_test(test_an_unknown_affinity_is_EINVAL),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
