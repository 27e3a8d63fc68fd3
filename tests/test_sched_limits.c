/* SPDX-License-Identifier: MIT */
/*
 * The round limit (max_rounds, KB_MAX_ROUNDS): a livelocked spawn fails
 * with KB_ETIMEDOUT like a rank failure (siblings cancelled in rank order,
 * abort once with the queues full, queues cleared) and the report names
 * every live rank's last suspension point. A spawn that finishes within
 * the limit is untouched.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "trace.h"

static int flag; /* nobody sets it */
static int aborts;

static void on_abort(void *self, kb_ctx *ctx)
{
    (void)self;
    aborts++;
    tr_add("abort pending_worker=%zu", kb_pending_waits(ctx, NULL, 0));
}

static void cleanup_note(void *arg)
{
    tr_add("cleanup %d", (int)(intptr_t)arg);
}

/* Rank 0 polls a flag nobody sets; rank 1 re-waits on a fresh handle every
 * time; rank 2 sits in a barrier that never opens; rank 3 returns. */
static int livelock(int rank, void *arg)
{
    (void)arg;
    kb_ctx *ctx = kb_current_ctx();
    int rc = 0;
    pthread_cleanup_push(cleanup_note, (void *)(intptr_t)rank);
    if (rank == 0)
        while (!flag && rc == 0)
            rc = kb_yield();
    else if (rank == 1)
        for (kb_handle h = 1000; rc == 0; h++)
            rc = kb_wait(ctx, h);
    else if (rank == 2)
        rc = kb_barrier();
    pthread_cleanup_pop(0);
    return rc;
}

static void test_max_rounds_fails_a_livelock_with_KB_ETIMEDOUT(void **state)
{
    (void)state;
    kb_engine eng = {.abort = on_abort};
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    tr_reset();
    aborts = 0;
    kb_spawn_error *err = NULL;
    kb_spawn_opts o = {.max_rounds = 50};
    assert_int_equal(kb_spawn(ctx, livelock, NULL, 4, &o, &err), KB_ETIMEDOUT);
    assert_int_equal(kb_spawn_error_code(err), KB_ETIMEDOUT);
    /* Cancelled in rank order, then abort once, then the queues are empty. */
    assert_string_equal(tr_text(), "cleanup 0\ncleanup 1\ncleanup 2\nabort pending_worker=0\n");
    assert_int_equal(aborts, 1);
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
    /* Every live rank's last suspension point. */
    assert_int_equal(kb_spawn_error_live_count(err), 3);
    const kb_live_rank *l0 = kb_spawn_error_live_get(err, 0), *l1 = kb_spawn_error_live_get(err, 1),
                       *l2 = kb_spawn_error_live_get(err, 2);
    assert_int_equal(l0->rank, 0);
    assert_int_equal(l0->where, KB_AT_YIELD);
    assert_int_equal(l1->rank, 1);
    assert_int_equal(l1->where, KB_AT_WAIT);
    assert_int_equal(l1->handle, 1049); /* a fresh handle per round: round 50 waits on 1049 */
    assert_int_equal(l2->rank, 2);
    assert_int_equal(l2->where, KB_AT_BARRIER);
    assert_null(kb_spawn_error_live_get(err, 3));
    assert_string_equal(kb_spawn_error_message(err),
                        "spawn stopped after 50 rounds (max_rounds); live ranks: rank 0 "
                        "in kb_yield, rank 1 waiting on handle 1049, rank 2 in "
                        "kb_barrier");
    assert_int_equal(kb_spawn_error_count(err), 0); /* no rank failed */
    kb_spawn_error_free(err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static int three_rounds(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    kb_yield();
    kb_yield();
    return 0;
}

static void test_a_spawn_finishing_within_max_rounds_is_untouched(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts o = {.max_rounds = 3}; /* exactly the rounds it needs */
    assert_int_equal(kb_spawn(ctx, three_rounds, NULL, 4, &o, NULL), 0);
    o.max_rounds = 2;
    assert_int_equal(kb_spawn(ctx, three_rounds, NULL, 4, &o, NULL), KB_ETIMEDOUT);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_KB_MAX_ROUNDS_sets_the_limit_without_code_changes(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    setenv("KB_MAX_ROUNDS", "2", 1);
    int rc = kb_spawn(ctx, three_rounds, NULL, 2, NULL, NULL);
    unsetenv("KB_MAX_ROUNDS");
    assert_int_equal(rc, KB_ETIMEDOUT);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_kb_join_reports_KB_ETIMEDOUT_and_then_the_same_again(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_process_context *pc;
    kb_spawn_opts o = {.max_rounds = 1};
    assert_int_equal(kb_start(ctx, three_rounds, NULL, 2, &o, &pc), 0);
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_join(pc, -1, &err), KB_ETIMEDOUT);
    assert_non_null(err);
    kb_spawn_error_free(err);
    assert_int_equal(kb_join(pc, -1, &err), KB_ETIMEDOUT);
    assert_null(err);
    kb_process_context_free(pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_rounds_fails_a_livelock_with_KB_ETIMEDOUT),
        cmocka_unit_test(test_a_spawn_finishing_within_max_rounds_is_untouched),
        cmocka_unit_test(test_KB_MAX_ROUNDS_sets_the_limit_without_code_changes),
        cmocka_unit_test(test_kb_join_reports_KB_ETIMEDOUT_and_then_the_same_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
