/* SPDX-License-Identifier: MIT */
/*
 * Thread creation failing at rank k (through the KB_FAULT_THREAD seam):
 * KB_EAGAIN, no rank run (no fn; no bind either, since bind runs only after
 * every rank thread exists), nothing drained, every created thread gone, and
 * the ctx usable for a clean spawn afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* This program links libkbthreads_fault: declare its seams. */
#define KB_FAULT_INJECTION 1
#include "fault.h"
#include "kbthreads.h"
#include "kbt_util.h"

#define NPROCS 8
#define H_PRE  ((kb_handle)31)

struct counts {
    int fn_calls, bind_calls, wait_calls, abort_calls;
};

static int count_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    ((struct counts *)self)->wait_calls++;
    return 0;
}

static void count_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct counts *)self)->bind_calls++;
}

static void count_abort(void *self, kb_ctx *ctx)
{
    (void)ctx;
    ((struct counts *)self)->abort_calls++;
}

static int counting_rank(int rank, void *arg)
{
    (void)rank;
    ((struct counts *)arg)->fn_calls++;
    kb_yield();
    return 0;
}

static kb_ctx *counting_ctx(struct counts *c)
{
    kb_engine eng = {.self = c, .wait = count_wait, .bind = count_bind, .abort = count_abort};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    return ctx;
}

static void assert_clean_spawn_works(kb_ctx *ctx, struct counts *c)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(kb_spawn(ctx, counting_rank, c, NPROCS, NULL, NULL), 0);
    assert_int_equal(c->fn_calls, NPROCS);
    assert_int_equal(c->bind_calls, NPROCS);
}

/* Fresh ctx; the k-th pthread_create fails. With start != 0, through
 * kb_start instead of kb_spawn. */
static void thread_failure_at(long k, int start)
{
    long before = kbt_thread_baseline();
    struct counts c = {0, 0, 0, 0};
    kb_ctx *ctx = counting_ctx(&c);
    assert_int_equal(kb_enqueue_wait(ctx, H_PRE), 0);
    kb_spawn_error *err = NULL;
    kb_process_context *pc = NULL;
    kb__fault_arm(KB_FAULT_THREAD, k);
    int rc = start ? kb_start(ctx, counting_rank, &c, NPROCS, NULL, &pc)
                   : kb_spawn(ctx, counting_rank, &c, NPROCS, NULL, &err);
    long calls = kb__fault_calls(KB_FAULT_THREAD);
    kb__fault_arm(KB_FAULT_THREAD, 0);
    assert_int_equal(rc, KB_EAGAIN);
    assert_true(calls >= k);
    assert_null(err);
    /* No rank ran, nothing was bound, drained or aborted. */
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    assert_int_equal(c.wait_calls, 0);
    assert_int_equal(c.abort_calls, 0);
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 1);
    assert_int_equal(kb_is_completed(ctx, H_PRE), 0);
    /* Every thread created for the failed spawn is gone. */
    long t = kbt_settle_tasks(before, 3000);
    if (t > before)
        fail_msg("k=%ld: %ld threads after KB_EAGAIN, %ld before the ctx", k, t, before);
    /* Not busy, and works. */
    assert_clean_spawn_works(ctx, &c);
    assert_int_equal(kb_is_completed(ctx, H_PRE), 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_true(kbt_settle_tasks(before, 3000) <= before);
}

static void test_thread_failure_at_rank_1_gives_eagain(void **state)
{
    (void)state;
    thread_failure_at(1, 0);
}

static void test_thread_failure_at_rank_2_gives_eagain(void **state)
{
    (void)state;
    thread_failure_at(2, 0);
}

static void test_thread_failure_at_rank_5_gives_eagain(void **state)
{
    (void)state;
    thread_failure_at(5, 0);
}

static void test_thread_failure_at_last_rank_gives_eagain(void **state)
{
    (void)state;
    thread_failure_at(NPROCS, 0);
}

static void test_thread_failure_in_start_at_rank_1_gives_eagain(void **state)
{
    (void)state;
    thread_failure_at(1, 1);
}

static void test_thread_failure_in_start_at_last_rank_gives_eagain(void **state)
{
    (void)state;
    thread_failure_at(NPROCS, 1);
}

/* A ctx that already ran a spawn (and may keep parked threads): the failure
 * still leaves no rank run and no thread beyond those the ctx kept. */
static void test_thread_failure_after_an_earlier_spawn_gives_eagain(void **state)
{
    (void)state;
    long before = kbt_thread_baseline();
    struct counts c = {0, 0, 0, 0};
    kb_ctx *ctx = counting_ctx(&c);
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, 2, NULL, NULL), 0);
    long kept = kbt_settle_tasks(before + 2, 3000);
    assert_true(kept <= before + 2);
    memset(&c, 0, sizeof c);
    kb__fault_arm(KB_FAULT_THREAD, 1);
    int rc = kb_spawn(ctx, counting_rank, &c, NPROCS, NULL, NULL);
    kb__fault_arm(KB_FAULT_THREAD, 0);
    assert_int_equal(rc, KB_EAGAIN);
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    long t = kbt_settle_tasks(kept, 3000);
    if (t > kept)
        fail_msg("%ld threads after KB_EAGAIN, %ld before the failed spawn", t, kept);
    assert_clean_spawn_works(ctx, &c);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_true(kbt_settle_tasks(before, 3000) <= before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_failure_at_rank_1_gives_eagain),
        cmocka_unit_test(test_thread_failure_at_rank_2_gives_eagain),
        cmocka_unit_test(test_thread_failure_at_rank_5_gives_eagain),
        cmocka_unit_test(test_thread_failure_at_last_rank_gives_eagain),
        cmocka_unit_test(test_thread_failure_in_start_at_rank_1_gives_eagain),
        cmocka_unit_test(test_thread_failure_in_start_at_last_rank_gives_eagain),
        cmocka_unit_test(test_thread_failure_after_an_earlier_spawn_gives_eagain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
