/* SPDX-License-Identifier: MIT */
/*
 * Ranks that leave their function in ways a C program can but the
 * scheduler did not ask for are failures of that rank, never hangs:
 * pthread_exit() from the rank function, and a longjmp out of the
 * cancellation unwind back into the function, which then returns.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "trace.h"

static void on_cleanup(void *arg)
{
    tr_add("cleanup %d", (int)(intptr_t)arg);
}

static int exiting_rank(int rank, void *arg)
{
    (void)arg;
    int rc = 0;
    pthread_cleanup_push(on_cleanup, (void *)(intptr_t)rank);
    tr_add("start %d", rank);
    kb_yield();
    if (rank == 1)
        pthread_exit(NULL);
    rc = kb_yield();
    tr_add("end %d", rank);
    pthread_cleanup_pop(0);
    return rc;
}

static void test_pthread_exit_in_a_rank_fails_that_rank_with_KB_EEXITED(void **state)
{
    (void)state;
    kb_ctx *ctx;
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    assert_int_equal(kb_spawn(ctx, exiting_rank, NULL, 3, NULL, &err), KB_ESPAWN);
    /* Rank 1's own cleanup first, then the siblings in rank order. */
    tr_assert("start 0\nstart 1\nstart 2\ncleanup 1\ncleanup 0\ncleanup 2\n");
    assert_int_equal(kb_spawn_error_count(err), 1);
    assert_int_equal(kb_spawn_error_get(err, 0)->rank, 1);
    assert_int_equal(kb_spawn_error_get(err, 0)->code, KB_EEXITED);
    kb_spawn_error_free(err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static __thread jmp_buf escape;

static void escaping_cleanup(void *arg)
{
    tr_add("cleanup %d escapes", (int)(intptr_t)arg);
    longjmp(escape, 1);
}

static int escaping_rank(int rank, void *arg)
{
    (void)arg;
    if (rank == 1) {
        tr_add("start 1");
        kb_yield();
        return 5; /* fails: rank 0 gets cancelled */
    }
    if (setjmp(escape) != 0) {
        tr_add("rank %d back in its function", rank);
        return 0; /* returns as if nothing happened */
    }
    pthread_cleanup_push(escaping_cleanup, (void *)(intptr_t)rank);
    tr_add("start %d", rank);
    for (;;)
        kb_yield();
    pthread_cleanup_pop(0);
    return 0;
}

static void test_longjmp_out_of_a_cancellation_unwind_fails_that_rank(void **state)
{
    (void)state;
    kb_ctx *ctx;
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    assert_int_equal(kb_spawn(ctx, escaping_rank, NULL, 2, NULL, &err), KB_ESPAWN);
    tr_assert("start 0\nstart 1\ncleanup 0 escapes\nrank 0 back in its function\n");
    assert_int_equal(kb_spawn_error_count(err), 2);
    assert_int_equal(kb_spawn_error_get(err, 0)->rank, 1);
    assert_int_equal(kb_spawn_error_get(err, 0)->code, 5);
    assert_int_equal(kb_spawn_error_get(err, 1)->rank, 0);
    assert_int_equal(kb_spawn_error_get(err, 1)->code, KB_EEXITED);
    kb_spawn_error_free(err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pthread_exit_in_a_rank_fails_that_rank_with_KB_EEXITED),
        cmocka_unit_test(test_longjmp_out_of_a_cancellation_unwind_fails_that_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
