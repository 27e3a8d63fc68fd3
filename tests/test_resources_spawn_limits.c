/* SPDX-License-Identifier: MIT */
/*
 * Sizes checked before memory is spent: a spawn that needs more threads
 * than the system lets this process create fails at once with KB_EAGAIN,
 * with no thread created, nothing allocated and no hook called, and
 * kb_spawn_check names the limit. (test_resources_thread_limit checks the
 * address-space limit and the parked threads in a forked child.)
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

struct counts {
    int fn_calls;
    int bind_calls;
};

static void count_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct counts *)self)->bind_calls++;
}

static int count_rank(int rank, void *arg)
{
    (void)rank;
    ((struct counts *)arg)->fn_calls++;
    return 0;
}

/* One more rank than kernel.pid_max allows threads, or 0 where the file
 * cannot be read (the test then skips). */
static int beyond_pid_max(void)
{
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    long v = 0;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v > 0 && v < INT_MAX ? (int)v + 1 : 0;
}

static void test_spawn_beyond_pid_max_fails_before_any_thread_exists(void **state)
{
    (void)state;
    int n = beyond_pid_max();
    if (!n)
        skip();
    struct counts c = {0, 0};
    kb_engine eng = {.self = &c, .wait = NULL, .bind = count_bind, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    long tasks = kbt_task_count();
    size_t heap = kbt_heap_in_use();
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, count_rank, &c, n, NULL, &err), KB_EAGAIN);
    assert_null(err);
    assert_int_equal(kbt_task_count(), tasks); /* no thread was created (and none ended) */
    assert_true(kbt_heap_in_use() <= heap + 4096);
    assert_int_equal(c.fn_calls + c.bind_calls, 0);
    assert_int_equal(kb_spawn(ctx, count_rank, &c, 2, NULL, NULL), 0); /* the ctx works on */
    assert_int_equal(c.fn_calls, 2);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_start_of_int_max_ranks_fails_at_once_and_leaves_out_null(void **state)
{
    (void)state;
    if (!beyond_pid_max())
        skip();
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    struct counts c = {0, 0};
    kb_process_context *pc = (kb_process_context *)&c;
    size_t heap = kbt_heap_in_use();
    assert_int_equal(kb_start(ctx, count_rank, &c, INT_MAX, NULL, &pc), KB_EAGAIN);
    assert_null(pc);
    assert_true(kbt_heap_in_use() <= heap + 4096);
    assert_int_equal(kb_ctx_destroy(ctx), 0); /* not busy: no process context was made */
}

static void test_spawn_check_names_the_limit_a_spawn_exceeds(void **state)
{
    (void)state;
    int n = beyond_pid_max();
    if (!n)
        skip();
    char why[512];
    assert_int_equal(kb_spawn_check(NULL, n, NULL, why, sizeof why), KB_EAGAIN);
    char want[64];
    snprintf(want, sizeof want, "%d ranks need %d new threads", n, n);
    assert_non_null(strstr(why, want));
    /* pid_max itself, or a tighter limit of this machine (threads-max, a
     * cgroup's pids.max, RLIMIT_NPROC, memory) */
    assert_non_null(strstr(why, "leaves room for"));
}

static void test_spawn_check_passes_a_spawn_that_fits_and_says_nothing(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    char why[256] = "untouched";
    assert_int_equal(kb_spawn_check(ctx, 4, NULL, why, sizeof why), 0);
    assert_string_equal(why, "");
    assert_int_equal(kb_spawn_check(NULL, 0, NULL, NULL, 0), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_spawn_check_bad_arguments_einval(void **state)
{
    (void)state;
    char why[8];
    assert_int_equal(kb_spawn_check(NULL, -1, NULL, why, sizeof why), KB_EINVAL);
    assert_int_equal(kb_spawn_check(NULL, 1, NULL, NULL, 8), KB_EINVAL);
    kb_spawn_opts tiny = {.stack_size = 1};
    assert_int_equal(kb_spawn_check(NULL, 1, &tiny, why, sizeof why), KB_EINVAL);
}

static int check_in_rank(int rank, void *arg)
{
    (void)rank;
    *(int *)arg = kb_spawn_check(NULL, 1, NULL, NULL, 0);
    return 0;
}

static void test_spawn_check_in_a_rank_eperm_and_on_a_busy_ctx_ebusy(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int in_rank = 0;
    assert_int_equal(kb_spawn(ctx, check_in_rank, &in_rank, 1, NULL, NULL), 0);
    assert_int_equal(in_rank, KB_EPERM);
    kb_process_context *pc = NULL;
    assert_int_equal(kb_start(ctx, check_in_rank, &in_rank, 1, NULL, &pc), 0);
    assert_int_equal(kb_spawn_check(ctx, 1, NULL, NULL, 0), KB_EBUSY);
    kb_process_context_free(pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spawn_beyond_pid_max_fails_before_any_thread_exists),
        cmocka_unit_test(test_start_of_int_max_ranks_fails_at_once_and_leaves_out_null),
        cmocka_unit_test(test_spawn_check_names_the_limit_a_spawn_exceeds),
        cmocka_unit_test(test_spawn_check_passes_a_spawn_that_fits_and_says_nothing),
        cmocka_unit_test(test_spawn_check_bad_arguments_einval),
        cmocka_unit_test(test_spawn_check_in_a_rank_eperm_and_on_a_busy_ctx_ebusy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
