/* SPDX-License-Identifier: MIT */
/*
 * Semantics: a rank fails (SEMANTICS.md rule 5; issue 2 "Semantics"): its
 * own cleanup first, the rest of the round skipped, no drain, not-finished
 * siblings cancelled in rank order (never-started ones never call fn,
 * finished ones untouched), the engine's abort once with the queues still
 * full, both queues cleared, the completed set kept. Expected traces are the
 * normalised output of the oracle scenario named above each
 * (tests/oracle/sem_failure.py). "Raise" is kb_raise; the *_return_mode
 * tests run the same scenario in RETURN cancel mode, which must not change
 * the trace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

static const char *const expect_own_cleanup_first =
    /* oracle: sem_failure.py::s_own_cleanup_first_then_siblings_in_rank_order */
    "spawn_begin nprocs=4\n"
    "bind 0\n"
    "bind 1\n"
    "bind 2\n"
    "bind 3\n"
    "start 0\n"
    "step 0 0\n"
    "start 1\n"
    "step 1 0\n"
    "start 2\n"
    "step 2 0\n"
    "start 3\n"
    "step 3 0\n"
    "step 0 1\n"
    "step 1 1\n"
    "step 2 1\n"
    "unwind 2 raise\n"
    "finally 2\n"
    "unwind 0 cancel\n"
    "finally 0\n"
    "unwind 1 cancel\n"
    "finally 1\n"
    "unwind 3 cancel\n"
    "finally 3\n"
    "barrier_reset pending_worker=[] pending_coll=[]\n"
    "spawn_raised KB_ESPAWN\n"
    "error ranks=[2] first=2 code=5\n"
    "error_entry 2 code=5 msg=r2 fails in round 2\n"
    "error_msg spawn failed on ranks [2]: rank 2 raised code 5: r2 fails in round 2\n"
    "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
    "spawn_end\n";

static void run_own_cleanup_first(const kb_spawn_opts *opts)
{
    static const fe_act pn[] = {FE_Y, FE_Y, FE_Y, FE_END};
    static const fe_act p2[] = {FE_Y, FE_RAISE(5, "r2 fails in round 2"), FE_END};
    static const fe_act *const plans[] = {pn, pn, p2, pn};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, opts), KB_ESPAWN);
    tr_assert(expect_own_cleanup_first);
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

/* Rule 5: the failing rank's own cleanup runs first, then the not-finished
 * siblings are cancelled in rank order (lower ranks included). */
static void test_failing_rank_cleanup_first_then_siblings_in_rank_order(void **state)
{
    (void)state;
    run_own_cleanup_first(NULL);
}

static void test_failing_rank_cleanup_first_then_siblings_in_rank_order_return_mode(void **state)
{
    (void)state;
    run_own_cleanup_first(fe_return());
}

/* Rule 5: the failing rank's function returning a nonzero code instead of
 * kb_raise gives the same order (the message is the library's default). */
static void test_failing_by_return_code_cancels_the_same_way(void **state)
{
    (void)state;
    static const fe_act pn[] = {FE_Y, FE_Y, FE_Y, FE_END};
    static const fe_act p2[] = {FE_Y, FE_RET(5), FE_END};
    static const fe_act *const plans[] = {pn, pn, p2, pn};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, NULL), KB_ESPAWN);
    /* derived from oracle: sem_failure.py::s_own_cleanup_first_then_siblings_in_rank_order
     * (edited: the message of a returned code is the library's default text) */
    tr_assert("spawn_begin nprocs=4\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "bind 3\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "start 3\n"
              "step 3 0\n"
              "step 0 1\n"
              "step 1 1\n"
              "step 2 1\n"
              "unwind 2 raise\n"
              "finally 2\n"
              "unwind 0 cancel\n"
              "finally 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "unwind 3 cancel\n"
              "finally 3\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[2] first=2 code=5\n"
              "error_entry 2 code=5 msg=rank function returned 5\n"
              "error_msg spawn failed on ranks [2]: rank 2 raised code 5: rank function returned 5\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* Rule 5: the rest of the failing round is skipped (ranks 2 and 3 never
 * take their round-2 turn). */
static void test_rest_of_round_is_skipped_after_failure(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_MARK("r0 round2"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_Y, FE_RAISE(5, "r1 fails"), FE_END};
    static const fe_act p2[] = {FE_Y, FE_MARK("r2 round2"), FE_Y, FE_END};
    static const fe_act p3[] = {FE_Y, FE_MARK("r3 round2"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_rest_of_round_skipped */
        "spawn_begin nprocs=4\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "bind 3\n"
        "start 0\n"
        "step 0 0\n"
        "start 1\n"
        "step 1 0\n"
        "start 2\n"
        "step 2 0\n"
        "start 3\n"
        "step 3 0\n"
        "step 0 1\n"
        "r0 round2\n"
        "step 0 2\n"
        "step 1 1\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 2 cancel\n"
        "finally 2\n"
        "unwind 3 cancel\n"
        "finally 3\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=5\n"
        "error_entry 1 code=5 msg=r1 fails\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: r1 fails\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 5: no drain after the failing round: the abort hook sees the queued
 * waits, the engine never waits them. */
static void test_no_drain_after_failing_round(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("q:0"), FE_Y, FE_W("q:0"), FE_END};
    static const fe_act p1[] = {FE_W("w:1"), FE_END};
    static const fe_act p2[] = {FE_RAISE(5, "r2 fails before the drain"), FE_END};
    static const fe_act *const plans[] = {p0, p1, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_no_drain_after_failing_round */
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "start 1\n"
        "step 1 0\n"
        "wait_enqueue 1 w:1\n"
        "start 2\n"
        "step 2 0\n"
        "unwind 2 raise\n"
        "finally 2\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 1 cancel\n"
        "finally 1\n"
        "barrier_reset pending_worker=[q:0,w:1] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[2] first=2 code=5\n"
        "error_entry 2 code=5 msg=r2 fails before the drain\n"
        "error_msg spawn failed on ranks [2]: rank 2 raised code 5: r2 fails before the drain\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* Rule 5: ranks that never started are finished without ever calling fn. */
static void run_never_started(const kb_spawn_opts *opts)
{
    static const fe_act py[] = {FE_Y, FE_END};
    static const fe_act p1[] = {FE_RAISE(5, "r1 fails at once"), FE_END};
    static const fe_act *const plans[] = {py, p1, py, py};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, opts), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_never_started_ranks_never_run */
        "spawn_begin nprocs=4\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "bind 3\n"
        "start 0\n"
        "step 0 0\n"
        "start 1\n"
        "step 1 0\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=5\n"
        "error_entry 1 code=5 msg=r1 fails at once\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: r1 fails at once\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(f->calls[0], 1);
    assert_int_equal(f->calls[1], 1);
    assert_int_equal(f->calls[2], 0);
    assert_int_equal(f->calls[3], 0);
    fe_free(f);
}

static void test_never_started_ranks_never_call_fn(void **state)
{
    (void)state;
    run_never_started(NULL);
}

static void test_never_started_ranks_never_call_fn_return_mode(void **state)
{
    (void)state;
    run_never_started(fe_return());
}

/* Rule 5: finished ranks are untouched by the cancellation. */
static void test_finished_ranks_are_not_cancelled(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_END};
    static const fe_act p1[] = {FE_Y, FE_RAISE(5, "r1 fails"), FE_END};
    static const fe_act p2[] = {FE_Y, FE_END};
    static const fe_act p3[] = {FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_finished_ranks_untouched */
        "spawn_begin nprocs=4\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "bind 3\n"
        "start 0\n"
        "end 0\n"
        "finally 0\n"
        "start 1\n"
        "step 1 0\n"
        "start 2\n"
        "step 2 0\n"
        "start 3\n"
        "step 3 0\n"
        "step 1 1\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 2 cancel\n"
        "finally 2\n"
        "unwind 3 cancel\n"
        "finally 3\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=5\n"
        "error_entry 1 code=5 msg=r1 fails\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: r1 fails\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 5: abort runs once, after the cancellations, with both queues still
 * full; then both are cleared. */
static void test_abort_once_with_queues_full_then_queues_cleared(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("a:0"), FE_SUBMIT("c:0", 0, "m0"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("w:1"), FE_END};
    static const fe_act p2[] = {FE_SUBMIT("c:2", 1, "m2"), FE_RAISE(5, "r2 fails"), FE_END};
    static const fe_act p3[] = {FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_abort_once_with_queues_full_then_cleared */
        "spawn_begin nprocs=4\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "bind 3\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "start 1\n"
        "step 1 0\n"
        "wait_enqueue 1 w:1\n"
        "start 2\n"
        "step 2 0\n"
        "step 2 1\n"
        "unwind 2 raise\n"
        "finally 2\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 1 cancel\n"
        "finally 1\n"
        "barrier_reset pending_worker=[a:0,w:1] pending_coll=[c:0,c:2]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[2] first=2 code=5\n"
        "error_entry 2 code=5 msg=r2 fails\n"
        "error_msg spawn failed on ranks [2]: rank 2 raised code 5: r2 fails\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(f->aborts, 1);
    assert_int_equal(kb_pending_waits(f->ctx, NULL, 0), 0);
    assert_int_equal(kb_pending_collectives(f->ctx, NULL, 0), 0);
    fe_free(f);
}

/* Rule 5: the completed set survives the failure. */
static void test_completed_set_is_kept_after_failure(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_W("k:0"), FE_Y, FE_Y, FE_END};
    static const fe_act p1[] = {FE_DONE("k:1"), FE_Y, FE_RAISE(5, "r1 fails in round 2"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_completed_set_kept */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 k:0\n"
        "start 1\n"
        "step 1 0\n"
        "step 1 1\n"
        "engine_wait k:0\n"
        "wait_done 0 k:0\n"
        "step 0 1\n"
        "step 1 2\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=5\n"
        "error_entry 1 code=5 msg=r1 fails in round 2\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: r1 fails in round 2\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[k:0,k:1]\n"
        "spawn_end\n");
    assert_int_equal(kb_is_completed(f->ctx, fe_h("k:0")), 1);
    assert_int_equal(kb_is_completed(f->ctx, fe_h("k:1")), 1);
    fe_free(f);
}

/* Rule 5 with no sibling left: the abort still runs once. */
static void test_last_live_rank_failing_still_aborts_once(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_Y, FE_RAISE(5, "r0 fails alone"), FE_END};
    static const fe_act p1[] = {FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_last_live_rank_fails */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "start 1\n"
        "end 1\n"
        "finally 1\n"
        "step 0 1\n"
        "step 0 2\n"
        "unwind 0 raise\n"
        "finally 0\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[0] first=0 code=5\n"
        "error_entry 0 code=5 msg=r0 fails alone\n"
        "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 fails alone\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

/* Rule 5: ranks parked in a collective (one in the wait mode, one polling)
 * are cancelled at their suspension point. */
static void run_failure_in_collective(const kb_spawn_opts *opts)
{
    static const fe_act p0[] = {FE_AR("t3", 3), FE_END};
    static const fe_act p1[] = {FE_AR_POLL("t3", 3), FE_END};
    static const fe_act p2[] = {FE_Y, FE_RAISE(5, "r2 fails"), FE_END};
    static const fe_act *const plans[] = {p0, p1, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, opts), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_failure.py::s_failure_while_siblings_in_collective */
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "coll_arrive 0 t3 n=1/3\n"
        "start 1\n"
        "step 1 0\n"
        "coll_arrive 1 t3 n=2/3\n"
        "start 2\n"
        "step 2 0\n"
        "step 2 1\n"
        "unwind 2 raise\n"
        "finally 2\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 1 cancel\n"
        "finally 1\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[2] first=2 code=5\n"
        "error_entry 2 code=5 msg=r2 fails\n"
        "error_msg spawn failed on ranks [2]: rank 2 raised code 5: r2 fails\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

static void test_failure_cancels_ranks_parked_in_a_collective(void **state)
{
    (void)state;
    run_failure_in_collective(NULL);
}

static void test_failure_cancels_ranks_parked_in_a_collective_return_mode(void **state)
{
    (void)state;
    run_failure_in_collective(fe_return());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failing_rank_cleanup_first_then_siblings_in_rank_order),
        cmocka_unit_test(test_failing_rank_cleanup_first_then_siblings_in_rank_order_return_mode),
        cmocka_unit_test(test_failing_by_return_code_cancels_the_same_way),
        cmocka_unit_test(test_rest_of_round_is_skipped_after_failure),
        cmocka_unit_test(test_no_drain_after_failing_round),
        cmocka_unit_test(test_never_started_ranks_never_call_fn),
        cmocka_unit_test(test_never_started_ranks_never_call_fn_return_mode),
        cmocka_unit_test(test_finished_ranks_are_not_cancelled),
        cmocka_unit_test(test_abort_once_with_queues_full_then_queues_cleared),
        cmocka_unit_test(test_completed_set_is_kept_after_failure),
        cmocka_unit_test(test_last_live_rank_failing_still_aborts_once),
        cmocka_unit_test(test_failure_cancels_ranks_parked_in_a_collective),
        cmocka_unit_test(test_failure_cancels_ranks_parked_in_a_collective_return_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
