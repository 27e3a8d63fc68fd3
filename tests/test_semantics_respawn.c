/* SPDX-License-Identifier: MIT */
/*
 * Semantics: a second spawn on the same ctx (SEMANTICS.md rule 9): ranks
 * numbered from 0 again, the completed set kept, a wait discarded by a failed
 * spawn waited again when a later spawn queues it. Expected traces are the
 * normalised output of the oracle scenario named above each
 * (tests/oracle/sem_respawn.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

static void test_second_spawn_numbers_ranks_from_zero_and_keeps_completed_set(void **state)
{
    (void)state;
    static const fe_act a0[] = {FE_W("k:1"), FE_END};
    static const fe_act a1[] = {FE_Y, FE_END};
    static const fe_act b2[] = {FE_W("k:2"), FE_END};
    static const fe_act *const first[] = {a0, a1};
    static const fe_act *const second[] = {a0, a1, b2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, first, 2, NULL), 0);
    assert_int_equal(fe_spawn_plans(f, second, 3, NULL), 0);
    tr_assert(
        /* oracle: sem_respawn.py::s_second_spawn_renumbers_and_keeps_completed */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 k:1\n"
        "start 1\n"
        "step 1 0\n"
        "engine_wait k:1\n"
        "wait_done 0 k:1\n"
        "end 0\n"
        "finally 0\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[k:1]\n"
        "spawn_end\n"
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "wait_fast 0 k:1\n"
        "end 0\n"
        "finally 0\n"
        "start 1\n"
        "step 1 0\n"
        "start 2\n"
        "step 2 0\n"
        "wait_enqueue 2 k:2\n"
        "engine_wait k:2\n"
        "end 1\n"
        "finally 1\n"
        "wait_done 2 k:2\n"
        "end 2\n"
        "finally 2\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[k:1,k:2]\n"
        "spawn_end\n");
    /* fe_traced checked kb_rank()/kb_world_size() against the numbering */
    fe_free(f);
}

static void test_wait_discarded_by_failed_spawn_is_waited_again_later(void **state)
{
    (void)state;
    static const fe_act a0[] = {FE_ENQ("lost:1"), FE_SUBMIT("lostc:1", 0, "ml"), FE_Y, FE_END};
    static const fe_act a1[] = {FE_RAISE(5, "first spawn fails"), FE_END};
    static const fe_act b0[] = {FE_W("lost:1"), FE_W("lostc:1"), FE_END};
    static const fe_act *const first[] = {a0, a1};
    static const fe_act *const second[] = {b0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, first, 2, NULL), KB_ESPAWN);
    assert_int_equal(fe_spawn_plans(f, second, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_respawn.py::s_wait_discarded_by_failed_spawn_waited_again */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "start 1\n"
        "step 1 0\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "barrier_reset pending_worker=[lost:1] pending_coll=[lostc:1]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=5\n"
        "error_entry 1 code=5 msg=first spawn fails\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: first spawn fails\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n"
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 lost:1\n"
        "engine_wait lost:1\n"
        "wait_done 0 lost:1\n"
        "step 0 1\n"
        "wait_enqueue 0 lostc:1\n"
        "engine_wait lostc:1\n"
        "wait_done 0 lostc:1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[lost:1,lostc:1]\n"
        "spawn_end\n");
    fe_free(f);
}

static void test_handle_whose_drain_wait_failed_is_waited_again_later(void **state)
{
    (void)state;
    static const fe_act a0[] = {FE_W("flaky:1"), FE_END};
    static const fe_act *const plans[] = {a0};
    fe *f = fe_new();
    fe_fail_on(f, "flaky:1", 42);
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), KB_ESPAWN);
    f->nfail_on = 0;
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    /* derived from oracle: sem_respawn.py::s_handle_failed_in_drain_waited_again
     * (edited: the report names the drain failure) */
    tr_assert(
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 flaky:1\n"
        "engine_wait flaky:1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[] first=None code=None\n"
        "error_drain code=42 handle=flaky:1\n"
        "error_msg spawn failed on ranks []: drain failed: engine wait for handle flaky:1 (pending worker "
        "wait) returned 42\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n"
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 flaky:1\n"
        "engine_wait flaky:1\n"
        "wait_done 0 flaky:1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[flaky:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* A spawn after a RETURN-mode failure works the same way. */
static void test_spawn_after_return_mode_failure_renumbers_from_zero(void **state)
{
    (void)state;
    static const fe_act a0[] = {FE_ENQ("lost:1"), FE_SUBMIT("lostc:1", 0, "ml"), FE_Y, FE_END};
    static const fe_act a1[] = {FE_RAISE(5, "first spawn fails"), FE_END};
    static const fe_act b0[] = {FE_W("lost:1"), FE_W("lostc:1"), FE_END};
    static const fe_act *const first[] = {a0, a1};
    static const fe_act *const second[] = {b0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, first, 2, fe_return()), KB_ESPAWN);
    assert_int_equal(fe_spawn_plans(f, second, 1, fe_return()), 0);
    tr_assert(
        /* oracle: sem_respawn.py::s_wait_discarded_by_failed_spawn_waited_again */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "start 1\n"
        "step 1 0\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "barrier_reset pending_worker=[lost:1] pending_coll=[lostc:1]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=5\n"
        "error_entry 1 code=5 msg=first spawn fails\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: first spawn fails\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n"
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 lost:1\n"
        "engine_wait lost:1\n"
        "wait_done 0 lost:1\n"
        "step 0 1\n"
        "wait_enqueue 0 lostc:1\n"
        "engine_wait lostc:1\n"
        "wait_done 0 lostc:1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[lost:1,lostc:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* C only: nothing of a failed spawn (cancellation flags, recorded
 * failures, barrier state) leaks into the next spawn on the same ctx, even
 * when the ctx reuses parked rank threads. */
static int state_body(fe *f, int r, void *arg)
{
    (void)f;
    int round = *(const int *)arg;
    tr_add("r%d spawn%d cancelled=%d world=%d", r, round, kb_cancelled(), kb_world_size());
    if (round == 1) {
        if (r == 1)
            kb_fail(3, "r1 failed in spawn 1");
        int rc = kb_barrier();
        if (rc != 0)
            return rc;
        return kb_yield();
    }
    int rc = kb_barrier();
    if (rc != 0)
        return rc; /* rank 2, cancelled in RETURN mode */
    tr_add("r%d spawn%d barrier %s", r, round, fe_code(rc));
    if (r == 1)
        kb_fail(4, "r1 failed in spawn 2");
    return rc;
}

static void test_failed_spawn_state_does_not_leak_into_the_next_spawn(void **state)
{
    (void)state;
    static const int one = 1, two = 2;
    for (int mode = 0; mode < 2; mode++) {
        const kb_spawn_opts *opts = mode ? fe_return() : fe_unwind();
        fe *f = fe_new();
        assert_int_equal(fe_spawn_body(f, state_body, (void *)(uintptr_t)&one, 3, opts), KB_ESPAWN);
        assert_int_equal(kb_spawn_error_count(f->err), 1);
        assert_int_equal(kb_spawn_error_get(f->err, 0)->code, 3);
        tr_reset();
        assert_int_equal(fe_spawn_body(f, state_body, (void *)(uintptr_t)&two, 3, opts), KB_ESPAWN);
        tr_assert("spawn_begin nprocs=3\n"
                  "bind 0\n"
                  "bind 1\n"
                  "bind 2\n"
                  "start 0\n"
                  "r0 spawn2 cancelled=0 world=3\n"
                  "start 1\n"
                  "r1 spawn2 cancelled=0 world=3\n"
                  "start 2\n"
                  "r2 spawn2 cancelled=0 world=3\n"
                  "r0 spawn2 barrier 0\n"
                  "end 0\n"
                  "finally 0\n"
                  "r1 spawn2 barrier 0\n"
                  "end 1\n"
                  "finally 1\n"
                  "unwind 2 cancel\n"
                  "finally 2\n"
                  "barrier_reset pending_worker=[] pending_coll=[]\n"
                  "spawn_raised KB_ESPAWN\n"
                  "error ranks=[1] first=1 code=4\n"
                  "error_entry 1 code=4 msg=r1 failed in spawn 2\n"
                  "error_msg spawn failed on ranks [1]: rank 1 raised code 4: r1 failed in spawn 2\n"
                  "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
                  "spawn_end\n");
        fe_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_spawn_numbers_ranks_from_zero_and_keeps_completed_set),
        cmocka_unit_test(test_wait_discarded_by_failed_spawn_is_waited_again_later),
        cmocka_unit_test(test_handle_whose_drain_wait_failed_is_waited_again_later),
        cmocka_unit_test(test_spawn_after_return_mode_failure_renumbers_from_zero),
        cmocka_unit_test(test_failed_spawn_state_does_not_leak_into_the_next_spawn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
