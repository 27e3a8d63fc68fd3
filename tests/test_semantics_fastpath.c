/* SPDX-License-Identifier: MIT */
/*
 * Semantics: the fast path (SEMANTICS.md rule 4; issue 2 fine print: the
 * driver-side fast path, kb_wait_meta in a rank). Expected traces are the
 * normalised output of the oracle scenario named above each
 * (tests/oracle/sem_fastpath.py), unless marked "C only".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

/* Rule 4: a rank's wait on a completed handle does not switch: the rank
 * keeps the baton (its next steps follow at once, before rank 1 starts). */
static void test_rank_wait_on_completed_handle_keeps_the_baton(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_DONE("f:1"), FE_W("f:1"), FE_W("f:1"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("f:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_fastpath.py::s_rank_wait_on_completed_handle_keeps_baton */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "wait_fast 0 f:1\n"
        "step 0 2\n"
        "wait_fast 0 f:1\n"
        "step 0 3\n"
        "start 1\n"
        "step 1 0\n"
        "wait_fast 1 f:1\n"
        "end 1\n"
        "finally 1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[f:1]\n"
        "spawn_end\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* Rule 4: a handle completed by an earlier drain is fast for every rank. */
static void test_rank_wait_on_handle_completed_by_earlier_drain_is_fast(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_W("g:1"), FE_W("g:1"), FE_END};
    static const fe_act p1[] = {FE_Y, FE_W("g:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_fastpath.py::s_rank_second_wait_after_drain_is_fast */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 g:1\n"
        "start 1\n"
        "step 1 0\n"
        "engine_wait g:1\n"
        "wait_done 0 g:1\n"
        "step 0 1\n"
        "wait_fast 0 g:1\n"
        "end 0\n"
        "finally 0\n"
        "step 1 1\n"
        "wait_fast 1 g:1\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[g:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Fine print: a driver-side kb_wait on a completed handle returns 0 at once
 * without calling the engine. */
static void test_driver_wait_on_completed_handle_does_not_call_engine(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(kb_complete(f->ctx, fe_h("d:1")), 0);
    assert_int_equal(fe_driver_wait(f, fe_h("d:1"), NULL), 0);
    fe_post(f, 1);
    tr_assert(
        /* oracle: sem_fastpath.py::s_driver_wait_on_completed_handle_skips_engine */
        "driver_wait d:1\n"
        "wait_fast main d:1\n"
        "post ranks=[] pending_worker=[] pending_coll=[] completed=[d:1]\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* A driver-side kb_wait on a pending handle calls the engine (with meta),
 * marks the handle completed and never enqueues; a second one is fast. */
static void test_driver_wait_on_pending_handle_calls_engine_once_never_enqueues(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_driver_wait(f, fe_h("d:2"), "md"), 0);
    fe_post(f, 1);
    assert_int_equal(fe_driver_wait(f, fe_h("d:2"), "md"), 0);
    fe_post(f, 1);
    tr_assert(
        /* oracle: sem_fastpath.py::s_driver_wait_pending_calls_engine_never_enqueues */
        "driver_wait d:2\n"
        "main_wait d:2 meta=md\n"
        "engine_wait d:2\n"
        "post ranks=[] pending_worker=[] pending_coll=[] completed=[d:2]\n"
        "driver_wait d:2\n"
        "wait_fast main d:2\n"
        "post ranks=[] pending_worker=[] pending_coll=[] completed=[d:2]\n");
    assert_int_equal(f->waits, 1);
    assert_int_equal(f->log[0].origin, KB_WAIT_DRIVER);
    fe_free(f);
}

/* The engine may make a driver-side wait from inside its wait hook. */
static int cb_driver_wait(fe *f, kb_handle h, void *arg)
{
    (void)h;
    return fe_driver_wait(f, fe_h(arg), NULL);
}

static void test_driver_wait_from_inside_engine_hook(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("a:1"), FE_Y, FE_W("x:1"), FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    fe_on_wait(f, "a:1", cb_driver_wait, "x:1");
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_fastpath.py::s_driver_wait_from_engine_hook */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "engine_wait a:1\n"
        "driver_wait x:1\n"
        "main_wait x:1 meta=None\n"
        "engine_wait x:1\n"
        "step 0 2\n"
        "wait_fast 0 x:1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[a:1,x:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* C only (fine print: engine codes pass through unchanged): a driver-side
 * kb_wait whose engine wait fails returns the engine's code as is and leaves
 * the handle not completed; a later wait calls the engine again. */
static void test_driver_wait_returns_engine_code_and_leaves_handle_pending(void **state)
{
    (void)state;
    fe *f = fe_new();
    fe_fail_on(f, "d:3", 9);
    assert_int_equal(fe_driver_wait(f, fe_h("d:3"), NULL), 9);
    assert_int_equal(kb_is_completed(f->ctx, fe_h("d:3")), 0);
    f->nfail_on = 0;
    assert_int_equal(fe_driver_wait(f, fe_h("d:3"), NULL), 0);
    fe_post(f, 1);
    tr_assert("driver_wait d:3\n"
              "main_wait d:3 meta=None\n"
              "engine_wait d:3\n"
              "driver_wait_rc d:3 9\n"
              "driver_wait d:3\n"
              "main_wait d:3 meta=None\n"
              "engine_wait d:3\n"
              "post ranks=[] pending_worker=[] pending_coll=[] completed=[d:3]\n");
    fe_free(f);
}

/* C only: a driver-side wait is KB_WAIT_DRIVER with the caller's meta. */
static void test_driver_wait_tells_engine_driver_origin_and_meta(void **state)
{
    (void)state;
    fe *f = fe_new();
    f->trace_origin = 1;
    assert_int_equal(fe_driver_wait(f, fe_h("d:4"), "m4"), 0);
    tr_assert("driver_wait d:4\n"
              "main_wait d:4 meta=m4\n"
              "engine_wait d:4 origin=driver meta=m4\n");
    fe_free(f);
}

/* C only (fine print): kb_wait_meta inside a rank ignores meta: the wait is
 * queued like kb_wait and phase (a) passes no meta. */
static int wait_meta_body(fe *f, int r, void *arg)
{
    (void)arg;
    kb_handle h = fe_h("wm:1");
    tr_add("wait_enqueue %d %s", r, tr_name(h));
    int rc = kb_wait_meta(f->ctx, h, "ignored");
    if (rc != 0)
        return rc;
    tr_add("wait_done %d %s", r, tr_name(h));
    return 0;
}

static void test_rank_wait_meta_ignores_meta(void **state)
{
    (void)state;
    fe *f = fe_new();
    f->trace_origin = 1;
    assert_int_equal(fe_spawn_body(f, wait_meta_body, NULL, 1, NULL), 0);
    tr_assert("spawn_begin nprocs=1\n"
              "bind 0\n"
              "start 0\n"
              "wait_enqueue 0 wm:1\n"
              "engine_wait wm:1 origin=queued meta=None\n"
              "wait_done 0 wm:1\n"
              "end 0\n"
              "finally 0\n"
              "spawn_return 0\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[wm:1]\n"
              "spawn_end\n");
    fe_free(f);
}

/* Rule 4 in RETURN cancel mode: the same trace. */
static void test_rank_fast_wait_keeps_the_baton_in_return_mode(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_DONE("f:1"), FE_W("f:1"), FE_W("f:1"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("f:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, fe_return()), 0);
    tr_assert(
        /* oracle: sem_fastpath.py::s_rank_wait_on_completed_handle_keeps_baton */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "wait_fast 0 f:1\n"
        "step 0 2\n"
        "wait_fast 0 f:1\n"
        "step 0 3\n"
        "start 1\n"
        "step 1 0\n"
        "wait_fast 1 f:1\n"
        "end 1\n"
        "finally 1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[f:1]\n"
        "spawn_end\n");
    fe_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_wait_on_completed_handle_keeps_the_baton),
        cmocka_unit_test(test_rank_wait_on_handle_completed_by_earlier_drain_is_fast),
        cmocka_unit_test(test_driver_wait_on_completed_handle_does_not_call_engine),
        cmocka_unit_test(test_driver_wait_on_pending_handle_calls_engine_once_never_enqueues),
        cmocka_unit_test(test_driver_wait_from_inside_engine_hook),
        cmocka_unit_test(test_driver_wait_returns_engine_code_and_leaves_handle_pending),
        cmocka_unit_test(test_driver_wait_tells_engine_driver_origin_and_meta),
        cmocka_unit_test(test_rank_wait_meta_ignores_meta),
        cmocka_unit_test(test_rank_fast_wait_keeps_the_baton_in_return_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
