/* SPDX-License-Identifier: MIT */
/*
 * kb_in_hook: 1 on the thread running an engine hook the library called
 * (wait, bind, abort; nested hooks included), 0 everywhere else. Bindings
 * read it instead of counting their hooks themselves.
 *
 * Hooks and ranks record what they saw in plain structs (one thread runs at
 * a time); the tests assert after the spawn returns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"

#define H_OUTER ((kb_handle)7)
#define H_INNER ((kb_handle)8)

struct seen {
    int wait_queued, wait_driver, bind, abort; /* kb_in_hook() inside each hook; -1: hook not run */
    int nested_inner, nested_after_inner;      /* a driver-side kb_wait made inside the wait hook */
    int in_rank;                               /* kb_in_hook() in rank code */
    kb_ctx *nest;                              /* make a nested wait on it from the driver-side wait hook */
};

static int seen_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)meta;
    struct seen *s = self;
    if (h == H_INNER) {
        s->nested_inner = kb_in_hook();
        return 0;
    }
    if (origin == KB_WAIT_QUEUED)
        s->wait_queued = kb_in_hook();
    else
        s->wait_driver = kb_in_hook();
    if (s->nest && origin == KB_WAIT_DRIVER) {
        kb_wait(s->nest, H_INNER);
        s->nested_after_inner = kb_in_hook();
    }
    return 0;
}

static void seen_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct seen *)self)->bind = kb_in_hook();
}

static void seen_abort(void *self, kb_ctx *ctx)
{
    (void)ctx;
    ((struct seen *)self)->abort = kb_in_hook();
}

static kb_ctx *seen_ctx(struct seen *s)
{
    memset(s, 0, sizeof *s);
    s->wait_queued = s->wait_driver = s->bind = s->abort = -1;
    s->nested_inner = s->nested_after_inner = s->in_rank = -1;
    kb_engine eng = {.self = s, .wait = seen_wait, .bind = seen_bind, .abort = seen_abort};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    return ctx;
}

static int waiting_rank(int rank, void *arg)
{
    struct seen *s = arg;
    s->in_rank = kb_in_hook();
    kb_wait(kb_current_ctx(), (kb_handle)(100 + rank));
    return 0;
}

static int failing_rank(int rank, void *arg)
{
    (void)arg;
    kb_yield();
    return rank == 1 ? 5 : 0;
}

static void test_in_hook_is_0_on_a_thread_that_never_ran_a_hook(void **state)
{
    (void)state;
    assert_int_equal(kb_in_hook(), 0);
}

static void test_in_hook_is_1_in_the_bind_hook(void **state)
{
    (void)state;
    struct seen s;
    kb_ctx *ctx = seen_ctx(&s);
    assert_int_equal(kb_spawn(ctx, waiting_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.bind, 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_in_hook_is_1_in_the_wait_hook_of_a_drain(void **state)
{
    (void)state;
    struct seen s;
    kb_ctx *ctx = seen_ctx(&s);
    assert_int_equal(kb_spawn(ctx, waiting_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.wait_queued, 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_in_hook_is_1_in_the_wait_hook_of_a_driver_side_wait(void **state)
{
    (void)state;
    struct seen s;
    kb_ctx *ctx = seen_ctx(&s);
    assert_int_equal(kb_wait(ctx, H_OUTER), 0);
    assert_int_equal(s.wait_driver, 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_in_hook_is_1_in_the_abort_hook(void **state)
{
    (void)state;
    struct seen s;
    kb_ctx *ctx = seen_ctx(&s);
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, failing_rank, &s, 3, NULL, &err), KB_ESPAWN);
    kb_spawn_error_free(err);
    assert_int_equal(s.abort, 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_in_hook_stays_1_after_a_nested_hook_returns(void **state)
{
    (void)state;
    struct seen s;
    kb_ctx *ctx = seen_ctx(&s);
    s.nest = ctx;
    /* The outer wait hook calls kb_wait on the ctx it drives (allowed in a
     * hook), which calls the wait hook again for H_INNER. */
    assert_int_equal(kb_wait(ctx, H_OUTER), 0);
    assert_int_equal(s.nested_inner, 1);
    assert_int_equal(s.nested_after_inner, 1);
    assert_int_equal(kb_in_hook(), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_in_hook_is_0_in_rank_code_and_after_the_spawn(void **state)
{
    (void)state;
    struct seen s;
    kb_ctx *ctx = seen_ctx(&s);
    assert_int_equal(kb_spawn(ctx, waiting_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.in_rank, 0);
    assert_int_equal(kb_in_hook(), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_hook_is_0_on_a_thread_that_never_ran_a_hook),
        cmocka_unit_test(test_in_hook_is_1_in_the_bind_hook),
        cmocka_unit_test(test_in_hook_is_1_in_the_wait_hook_of_a_drain),
        cmocka_unit_test(test_in_hook_is_1_in_the_wait_hook_of_a_driver_side_wait),
        cmocka_unit_test(test_in_hook_is_1_in_the_abort_hook),
        cmocka_unit_test(test_in_hook_stays_1_after_a_nested_hook_returns),
        cmocka_unit_test(test_in_hook_is_0_in_rank_code_and_after_the_spawn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
