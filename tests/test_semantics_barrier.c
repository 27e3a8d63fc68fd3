/*
 * Semantics: kb_barrier (kbthreads.h; issue 2 API contract). C only: the
 * reference has no barrier. Every arrival yields at least once (the last one
 * too); the barrier opens when the last not-finished rank arrives, or when a
 * rank finishes and every remaining one has arrived; waiters resume in their
 * round-robin turns, in rank order. FE_BARRIER records 'barrier_done R' when
 * kb_barrier returns 0; a drain between rounds shows where a round ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

/* All arrive in round 1; the last arrival yields too (the drain runs before
 * anyone passes); all pass in round 2 in rank order. */
static void test_barrier_every_arrival_yields_then_all_pass_in_rank_order(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("b:0"), FE_BARRIER, FE_END};
    static const fe_act p1[] = {FE_ENQ("b:1"), FE_BARRIER, FE_END};
    static const fe_act p2[] = {FE_ENQ("b:2"), FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "start 1\n"
              "step 1 0\n"
              "step 1 1\n"
              "start 2\n"
              "step 2 0\n"
              "step 2 1\n"
              "engine_wait b:0\n"
              "engine_wait b:1\n"
              "engine_wait b:2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "barrier_done 2\n"
              "end 2\n"
              "finally 2\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[b:0,b:1,b:2]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A single rank's barrier opens at once but still yields once. */
static void test_barrier_of_a_single_rank_yields_once(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("b:0"), FE_BARRIER, FE_MARK("after"), FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert("spawn_begin nprocs=1\n"
              "bind 0\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "engine_wait b:0\n"
              "barrier_done 0\n"
              "step 0 2\n"
              "after\n"
              "end 0\n"
              "finally 0\n"
              "spawn_return 0\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[b:0]\n"
              "spawn_end\n");
    fe_free(f);
}

/* The barrier opens when the last not-finished rank arrives (here rank 1 in
 * round 3): rank 2, whose turn comes later in that round, passes at once;
 * ranks 0 and 1 pass in round 4. */
static void test_barrier_opens_when_the_last_rank_arrives_in_a_later_round(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_END};
    static const fe_act p1[] = {FE_Y, FE_Y, FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {pb, p1, pb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "step 1 1\n"
              "step 1 2\n"
              "barrier_done 2\n"
              "end 2\n"
              "finally 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A rank that finishes without arriving opens the barrier when every
 * remaining rank has arrived; the waiters pass in the next round. */
static void test_barrier_opens_when_a_rank_finishes_and_the_rest_arrived(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_END};
    static const fe_act p2[] = {FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {pb, pb, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "step 2 1\n"
              "end 2\n"
              "finally 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* The same in the first round: rank 2 returns at once after ranks 0 and 1
 * arrived. */
static void test_barrier_opens_when_a_rank_returns_in_the_arrival_round(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_END};
    static const fe_act p2[] = {FE_END};
    static const fe_act *const plans[] = {pb, pb, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "end 2\n"
              "finally 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A barrier can be used again and again. */
static void test_barrier_can_be_reused(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_MARK("between"), FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {pb, pb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "barrier_done 0\n"
              "step 0 1\n"
              "between\n"
              "step 0 2\n"
              "barrier_done 1\n"
              "step 1 1\n"
              "between\n"
              "step 1 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A rank that passes and arrives at the next barrier while earlier waiters
 * have not passed yet does not open the next barrier early nor keep the
 * others in the old one. */
static void test_barrier_generations_do_not_mix(void **state)
{
    (void)state;
    static const fe_act pbb[] = {FE_BARRIER, FE_BARRIER, FE_END};
    static const fe_act p1[] = {FE_Y, FE_BARRIER, FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {pbb, p1, pbb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "step 1 1\n"
              "barrier_done 2\n"
              "step 2 1\n"
              "barrier_done 0\n"
              "step 0 1\n"
              "barrier_done 1\n"
              "step 1 2\n"
              "barrier_done 2\n"
              "end 2\n"
              "finally 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* UNWIND mode: ranks waiting in a barrier are cancelled there when a
 * sibling fails (in rank order, cleanup runs). */
static void test_barrier_waiters_are_cancelled_when_a_sibling_fails(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_MARK("passed"), FE_END};
    static const fe_act p2[] = {FE_Y, FE_RAISE(5, "r2 fails"), FE_END};
    static const fe_act *const plans[] = {pb, pb, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), KB_ESPAWN);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_every_arrival_yields_then_all_pass_in_rank_order),
        cmocka_unit_test(test_barrier_of_a_single_rank_yields_once),
        cmocka_unit_test(test_barrier_opens_when_the_last_rank_arrives_in_a_later_round),
        cmocka_unit_test(test_barrier_opens_when_a_rank_finishes_and_the_rest_arrived),
        cmocka_unit_test(test_barrier_opens_when_a_rank_returns_in_the_arrival_round),
        cmocka_unit_test(test_barrier_can_be_reused),
        cmocka_unit_test(test_barrier_generations_do_not_mix),
        cmocka_unit_test(test_barrier_waiters_are_cancelled_when_a_sibling_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
