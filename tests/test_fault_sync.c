/* SPDX-License-Identifier: MIT */
/*
 * Synchronisation-object setup failing (KB_FAULT_SYNC seam: pthread_attr,
 * mutex and condition variable initialisation): kb_ctx_create, kb_spawn and
 * kb_start answer a documented resource error (KB_ENOMEM or KB_EAGAIN) with no
 * rank run, or succeed; nothing leaks (memcheck run) and the ctx keeps working.
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

#define MAX_NTH 100000
#define NPROCS  4

struct sc {
    int fn_calls, fn_ends, bind_calls;
};

static void sc_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct sc *)self)->bind_calls++;
}

static int sc_rank(int rank, void *arg)
{
    struct sc *s = arg;
    s->fn_calls++;
    if (kb_yield() != 0 || kb_wait(kb_current_ctx(), (kb_handle)(rank + 1)) != 0 || kb_barrier() != 0)
        return 1;
    s->fn_ends++;
    return 0;
}

static int resource_error(int rc)
{
    return rc == KB_ENOMEM || rc == KB_EAGAIN;
}

static void assert_ctx_works(kb_ctx *ctx, struct sc *s)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(kb_spawn(ctx, sc_rank, s, NPROCS, NULL, NULL), 0);
    assert_int_equal(s->fn_ends, NPROCS);
    assert_int_equal(s->bind_calls, NPROCS);
}

static void test_ctx_create_sync_failure_gives_resource_error(void **state)
{
    (void)state;
    struct sc s;
    kb_engine eng = {.self = &s, .wait = NULL, .bind = sc_bind, .abort = NULL};
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        kb_ctx *ctx = NULL;
        kb__fault_arm(KB_FAULT_SYNC, nth);
        int rc = kb_ctx_create(&eng, &ctx);
        long calls = kb__fault_calls(KB_FAULT_SYNC);
        kb__fault_arm(KB_FAULT_SYNC, 0);
        if (rc != 0) {
            if (!resource_error(rc))
                fail_msg("nth=%ld: kb_ctx_create returned %d (%s)", nth, rc, kb_strerror(rc));
        } else {
            assert_ctx_works(ctx, &s);
            assert_int_equal(kb_ctx_destroy(ctx), 0);
        }
        if (calls < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
}

static void sync_failure_in(int start)
{
    struct sc s;
    memset(&s, 0, sizeof s);
    kb_engine eng = {.self = &s, .wait = NULL, .bind = sc_bind, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    long before = kbt_thread_baseline();
    long nth;
    int failures = 0;
    for (nth = 1; nth < MAX_NTH; nth++) {
        memset(&s, 0, sizeof s);
        kb_process_context *pc = NULL;
        kb_spawn_error *err = NULL;
        kb__fault_arm(KB_FAULT_SYNC, nth);
        int rc = start ? kb_start(ctx, sc_rank, &s, NPROCS, NULL, &pc)
                       : kb_spawn(ctx, sc_rank, &s, NPROCS, NULL, &err);
        long calls = kb__fault_calls(KB_FAULT_SYNC);
        kb__fault_arm(KB_FAULT_SYNC, 0);
        if (rc == 0) {
            if (start) {
                assert_int_equal(kb_join(pc, -1, NULL), 1);
                kb_process_context_free(pc);
            }
            assert_int_equal(s.fn_ends, NPROCS);
        } else if (resource_error(rc)) {
            failures++;
            assert_int_equal(s.fn_calls, 0);
            assert_int_equal(s.bind_calls, 0);
        } else {
            fail_msg("nth=%ld: %s returned %d (%s): %s", nth, start ? "kb_start" : "kb_spawn", rc,
                     kb_strerror(rc), kb_spawn_error_message(err));
        }
        kb_spawn_error_free(err);
        long t = kbt_settle_tasks(before + NPROCS, 2000);
        if (t > before + NPROCS)
            fail_msg("nth=%ld: %ld threads, %ld before", nth, t, before);
        assert_ctx_works(ctx, &s);
        if (calls < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    print_message("%s: %ld sync calls, %d failures\n", start ? "kb_start" : "kb_spawn", nth - 1, failures);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_true(kbt_settle_tasks(before, 3000) <= before);
}

static void test_spawn_sync_failure_gives_resource_error(void **state)
{
    (void)state;
    sync_failure_in(0);
}

static void test_start_sync_failure_gives_resource_error(void **state)
{
    (void)state;
    sync_failure_in(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctx_create_sync_failure_gives_resource_error),
        cmocka_unit_test(test_spawn_sync_failure_gives_resource_error),
        cmocka_unit_test(test_start_sync_failure_gives_resource_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
