/* SPDX-License-Identifier: MIT */
/*
 * Scale: 1000 ranks x 10 yields runs to completion in round-robin order,
 * every rank on its own thread, and leaves no thread behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "trace.h"
#include "kbt_util.h"

/* Valgrind runs at most 500 threads by default (--max-threads). */
static int scale_nprocs(void)
{
    return kbt_on_valgrind() ? 200 : 1000;
}

#define SCALE_YIELDS 10

struct scale {
    int nprocs;
    long tasks_seen; /* threads of the process seen by rank 0's first stretch */
    int bad_identity;
    int bad_rc;
};

static int scale_rank(int rank, void *arg)
{
    struct scale *s = arg;
    if (rank == 0)
        s->tasks_seen = kbt_task_count();
    if (kb_rank() != rank || kb_world_size() != s->nprocs || kb_current_ctx() == NULL)
        s->bad_identity++;
    for (int i = 0; i < SCALE_YIELDS; i++) {
        tr_add("%d %d", rank, i);
        if (kb_yield() != 0)
            s->bad_rc++;
    }
    tr_add("%d end", rank);
    return 0;
}

/* The expected trace: round i visits every rank in rank order. */
static char *expected_scale_trace(int nprocs)
{
    size_t cap = (size_t)nprocs * (SCALE_YIELDS + 1) * 16 + 1;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t len = 0;
    for (int i = 0; i < SCALE_YIELDS; i++)
        for (int r = 0; r < nprocs; r++)
            len += (size_t)snprintf(buf + len, cap - len, "%d %d\n", r, i);
    for (int r = 0; r < nprocs; r++)
        len += (size_t)snprintf(buf + len, cap - len, "%d end\n", r);
    return buf;
}

static void run_scale_spawn(kb_ctx *ctx, int nprocs, const char *expected)
{
    struct scale s = {nprocs, 0, 0, 0};
    tr_reset();
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, scale_rank, &s, nprocs, NULL, &err), 0);
    assert_null(err);
    assert_int_equal(s.bad_identity, 0);
    assert_int_equal(s.bad_rc, 0);
    assert_int_equal(tr_lines(), (size_t)nprocs * (SCALE_YIELDS + 1));
    tr_assert(expected);
    /* Every rank has its own OS thread, all created before any rank runs. */
    assert_true(s.tasks_seen >= nprocs + 1);
}

static void test_1000_ranks_x_10_yields_complete_in_order(void **state)
{
    (void)state;
    int nprocs = scale_nprocs();
    char *expected = expected_scale_trace(nprocs);
    long base = kbt_thread_baseline();
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    run_scale_spawn(ctx, nprocs, expected);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_true(kbt_settle_tasks(base, 5000) <= base);
    free(expected);
}

static void test_1000_ranks_twice_on_one_ctx(void **state)
{
    (void)state;
    int nprocs = scale_nprocs();
    char *expected = expected_scale_trace(nprocs);
    long base = kbt_thread_baseline();
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    run_scale_spawn(ctx, nprocs, expected);
    long after_first = kbt_settle_tasks(base + nprocs, 5000);
    /* Parked threads (if the ctx keeps any) are at most one per rank. */
    assert_true(after_first <= base + nprocs);
    run_scale_spawn(ctx, nprocs, expected);
    assert_true(kbt_settle_tasks(base + nprocs, 5000) <= base + nprocs);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_true(kbt_settle_tasks(base, 5000) <= base);
    free(expected);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1000_ranks_x_10_yields_complete_in_order),
        cmocka_unit_test(test_1000_ranks_twice_on_one_ctx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
