/* SPDX-License-Identifier: MIT */
/*
 * Semantics: binding, lazy start and round order (SEMANTICS.md rules 1 and
 * 2; issue 2 "Semantics"). Every expected trace is the normalised output of
 * the oracle scenario named above it (tests/oracle/sem_rounds.py; check with
 * /usr/bin/python3 tests/oracle/refresh.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

/* Rule 1: all N ranks are bound (engine bind, 0..N-1, on the driver) before
 * any rank runs. */
static void test_bind_all_ranks_in_order_before_any_rank_runs(void **state)
{
    (void)state;
    static const fe_act p[] = {FE_END};
    static const fe_act *const plans[] = {p, p, p};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert(
        /* oracle: sem_rounds.py::s_bind_all_before_any_runs */
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "end 0\n"
        "finally 0\n"
        "start 1\n"
        "end 1\n"
        "finally 1\n"
        "start 2\n"
        "end 2\n"
        "finally 2\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(f->binds, 3);
    fe_free(f);
}

/* Rule 1: ranks start lazily, in rank order, in round 1: rank 1's function
 * is first called after rank 0 yielded, so it sees what rank 0 did. */
static void test_ranks_start_lazily_in_rank_order(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_DONE("lz:1"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("lz:1"), FE_Y, FE_END};
    static const fe_act p2[] = {FE_W("lz:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert(
        /* oracle: sem_rounds.py::s_lazy_start_sees_earlier_ranks */
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "start 1\n"
        "step 1 0\n"
        "wait_fast 1 lz:1\n"
        "step 1 1\n"
        "start 2\n"
        "step 2 0\n"
        "wait_fast 2 lz:1\n"
        "end 2\n"
        "finally 2\n"
        "end 0\n"
        "finally 0\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[lz:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 2: a round visits every not-finished rank in rank order; each runs
 * until it yields or returns. */
static void test_round_visits_live_ranks_in_rank_order(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_END};
    static const fe_act p1[] = {FE_Y, FE_Y, FE_Y, FE_END};
    static const fe_act p2[] = {FE_END};
    static const fe_act p3[] = {FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, NULL), 0);
    tr_assert(
        /* oracle: sem_rounds.py::s_round_order_uneven_lengths */
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
        "end 2\n"
        "finally 2\n"
        "start 3\n"
        "step 3 0\n"
        "end 0\n"
        "finally 0\n"
        "step 1 1\n"
        "step 3 1\n"
        "step 1 2\n"
        "end 3\n"
        "finally 3\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    for (int r = 0; r < 4; r++)
        assert_int_equal(f->calls[r], 1);
    fe_free(f);
}

/* Rule 2: finished ranks are skipped; the drain after each round shows
 * where every round ends. */
static void test_finished_ranks_are_skipped_in_later_rounds(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("r:0:0"), FE_Y, FE_ENQ("r:0:1"), FE_Y, FE_ENQ("r:0:2"), FE_END};
    static const fe_act p1[] = {FE_ENQ("r:1:0"), FE_END};
    static const fe_act p2[] = {FE_ENQ("r:2:0"), FE_Y, FE_ENQ("r:2:1"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert(
        /* oracle: sem_rounds.py::s_finished_ranks_skipped */
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "start 1\n"
        "step 1 0\n"
        "end 1\n"
        "finally 1\n"
        "start 2\n"
        "step 2 0\n"
        "step 2 1\n"
        "engine_wait r:0:0\n"
        "engine_wait r:1:0\n"
        "engine_wait r:2:0\n"
        "step 0 2\n"
        "step 0 3\n"
        "step 2 2\n"
        "step 2 3\n"
        "engine_wait r:0:1\n"
        "engine_wait r:2:1\n"
        "step 0 4\n"
        "end 0\n"
        "finally 0\n"
        "end 2\n"
        "finally 2\n"
        "engine_wait r:0:2\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] "
        "completed=[r:0:0,r:0:1,r:0:2,r:1:0,r:2:0,r:2:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rules 1-2 with one rank. */
static void test_single_rank_runs_round_after_round(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_rounds.py::s_single_rank */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

/* The same round order in RETURN cancel mode (the mode changes only how a
 * cancelled rank leaves its suspension point). */
static void test_round_order_is_the_same_in_return_mode(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_END};
    static const fe_act p1[] = {FE_Y, FE_Y, FE_Y, FE_END};
    static const fe_act p2[] = {FE_END};
    static const fe_act p3[] = {FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, fe_return()), 0);
    tr_assert(
        /* oracle: sem_rounds.py::s_round_order_uneven_lengths */
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
        "end 2\n"
        "finally 2\n"
        "start 3\n"
        "step 3 0\n"
        "end 0\n"
        "finally 0\n"
        "step 1 1\n"
        "step 3 1\n"
        "step 1 2\n"
        "end 3\n"
        "finally 3\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_all_ranks_in_order_before_any_rank_runs),
        cmocka_unit_test(test_ranks_start_lazily_in_rank_order),
        cmocka_unit_test(test_round_visits_live_ranks_in_rank_order),
        cmocka_unit_test(test_finished_ranks_are_skipped_in_later_rounds),
        cmocka_unit_test(test_single_rank_runs_round_after_round),
        cmocka_unit_test(test_round_order_is_the_same_in_return_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
