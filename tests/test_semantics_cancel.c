/* SPDX-License-Identifier: MIT */
/*
 * Semantics: how a cancelled rank leaves its suspension point (issue 2 fine
 * print; kbthreads.h kb_yield). C only: the reference kills a greenlet with
 * SystemExit, which maps to both modes here:
 *   RETURN: kb_yield/kb_wait/kb_barrier return KB_ECANCELED at once, and so
 *           does every later call, without switching and enqueuing nothing;
 *   UNWIND: the thread unwinds from the suspension point (never returns from
 *           it), and the same calls from a cleanup handler during the unwind
 *           return KB_ECANCELED without switching.
 * "Without switching" shows in the traces: the driver cancels ranks one at a
 * time, so a switch would let the next rank's lines (or the abort) in between.
 * "Nothing enqueued" shows in the abort line's queues.
 * The rounds, cancellation order and reports come from the base scenarios in
 * tests/oracle/sem_cancel.py, as each test says.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

/* Every rank-side call after the cancellation, recorded. */
static void probe_calls(fe *f, int r, const char *where)
{
    tr_add("r%d %s cancelled=%d", r, where, kb_cancelled());
    tr_add("r%d %s yield %s", r, where, fe_code(kb_yield()));
    tr_add("r%d %s wait_completed %s", r, where, fe_code(kb_wait(f->ctx, fe_h("done:1"))));
    tr_add("r%d %s wait_new %s", r, where, fe_code(kb_wait(f->ctx, fe_h("new:1"))));
    tr_add("r%d %s wait_meta_new %s", r, where, fe_code(kb_wait_meta(f->ctx, fe_h("new:2"), "m")));
    tr_add("r%d %s barrier %s", r, where, fe_code(kb_barrier()));
    tr_add("r%d %s yield %s", r, where, fe_code(kb_yield()));
}

/* RETURN mode: cancelled while suspended in kb_yield. */
static int return_probe_body(fe *f, int r, void *arg)
{
    (void)arg;
    tr_add("r%d cancelled=%d", r, kb_cancelled());
    int rc = kb_yield();
    tr_add("r%d first yield %s", r, fe_code(rc));
    if (rc == 0)
        return 0;
    probe_calls(f, r, "after");
    return rc;
}

static int return_probe_driver(fe *f, int r, void *arg)
{
    (void)arg;
    if (r == 0) {
        kb_complete(f->ctx, fe_h("done:1"));
        if (kb_yield() != 0)
            return 98;
        kb_raise(5, "r0 fails in round 2");
    }
    return return_probe_body(f, r, arg);
}

static void test_return_mode_yield_wait_barrier_return_ecanceled_at_once_after_cancel(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_spawn_body(f, return_probe_driver, NULL, 3, fe_return()), KB_ESPAWN);
    /* derived from oracle: sem_cancel.py::s_cancelled_while_yielding
     * (edited: bodies without step lines; the probe lines are C only) */
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "start 1\n"
              "r1 cancelled=0\n"
              "start 2\n"
              "r2 cancelled=0\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "r1 first yield KB_ECANCELED\n"
              "r1 after cancelled=1\n"
              "r1 after yield KB_ECANCELED\n"
              "r1 after wait_completed KB_ECANCELED\n"
              "r1 after wait_new KB_ECANCELED\n"
              "r1 after wait_meta_new KB_ECANCELED\n"
              "r1 after barrier KB_ECANCELED\n"
              "r1 after yield KB_ECANCELED\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "r2 first yield KB_ECANCELED\n"
              "r2 after cancelled=1\n"
              "r2 after yield KB_ECANCELED\n"
              "r2 after wait_completed KB_ECANCELED\n"
              "r2 after wait_new KB_ECANCELED\n"
              "r2 after wait_meta_new KB_ECANCELED\n"
              "r2 after barrier KB_ECANCELED\n"
              "r2 after yield KB_ECANCELED\n"
              "unwind 2 cancel\n"
              "finally 2\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0] first=0 code=5\n"
              "error_entry 0 code=5 msg=r0 fails in round 2\n"
              "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 fails in round 2\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[done:1]\n"
              "spawn_end\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* RETURN mode: a rank suspended in kb_wait gets KB_ECANCELED from it; its
 * wait stays queued until the abort (no drain after the failing round). */
static int wait_rc(fe *f, int r, const fe_act *a)
{
    int rc = kb_wait(f->ctx, fe_h(a->arg));
    tr_add("r%d wait %s", r, fe_code(rc));
    return rc;
}

static void test_return_mode_cancelled_wait_returns_ecanceled(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_CALL(wait_rc, "pend:2"), FE_END};
    static const fe_act p1[] = {FE_RAISE(5, "r1 fails"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, fe_return()), KB_ESPAWN);
    /* derived from oracle: sem_cancel.py::s_cancelled_while_waiting
     * (edited: the wait is made by a probe that records its result) */
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "unwind 1 raise\n"
              "finally 1\n"
              "r0 wait KB_ECANCELED\n"
              "unwind 0 cancel\n"
              "finally 0\n"
              "barrier_reset pending_worker=[pend:2] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[1] first=1 code=5\n"
              "error_entry 1 code=5 msg=r1 fails\n"
              "error_msg spawn failed on ranks [1]: rank 1 raised code 5: r1 fails\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* RETURN mode: a rank waiting in kb_barrier gets KB_ECANCELED from it. */
static int barrier_rc(fe *f, int r, const fe_act *a)
{
    (void)f;
    (void)a;
    int rc = kb_barrier();
    tr_add("r%d barrier %s", r, fe_code(rc));
    return rc;
}

static void test_return_mode_cancelled_barrier_returns_ecanceled(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_RAISE(5, "r0 fails"), FE_END};
    static const fe_act pb[] = {FE_CALL(barrier_rc, NULL), FE_END};
    static const fe_act *const plans[] = {p0, pb, pb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, fe_return()), KB_ESPAWN);
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
              "step 0 1\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "r1 barrier KB_ECANCELED\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "r2 barrier KB_ECANCELED\n"
              "unwind 2 cancel\n"
              "finally 2\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0] first=0 code=5\n"
              "error_entry 0 code=5 msg=r0 fails\n"
              "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 fails\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* RETURN mode: a cancelled rank that kb_raise's after KB_ECANCELED turns
 * its cancellation into an error and is recorded (SEMANTICS.md rule 6). */
static int yield_then_raise(fe *f, int r, const fe_act *a)
{
    (void)f;
    (void)a;
    int rc = kb_yield();
    if (rc == KB_ECANCELED)
        kb_raise(8, "r%d raised after its cancellation", r);
    return rc;
}

static void test_return_mode_cancelled_rank_raising_is_recorded(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_RAISE(5, "r0 fails"), FE_END};
    static const fe_act p1[] = {FE_CALL(yield_then_raise, NULL), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, fe_return()), KB_ESPAWN);
    /* derived from oracle: sem_cancel.py::s_cancelled_rank_raising
     * (edited: kb_raise of a cancelled rank unwinds as a cancellation) */
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "step 0 1\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0,1] first=0 code=5\n"
              "error_entry 0 code=5 msg=r0 fails\n"
              "error_entry 1 code=8 msg=r1 raised after its cancellation\n"
              "error_msg spawn failed on ranks [0, 1]: rank 0 raised code 5: r0 fails\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* UNWIND mode: a cancelled rank never returns from its suspension point;
 * its cleanup handlers run. */
static void test_unwind_mode_cancelled_rank_never_returns_from_yield(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_RAISE(5, "r0 fails"), FE_END};
    static const fe_act p1[] = {FE_Y, FE_MARK("r1 returned from its yield"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, fe_unwind()), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_cancel.py::s_cancelled_rank_never_returns_from_yield */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "start 1\n"
        "step 1 0\n"
        "step 0 1\n"
        "unwind 0 raise\n"
        "finally 0\n"
        "unwind 1 cancel\n"
        "finally 1\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[0] first=0 code=5\n"
        "error_entry 0 code=5 msg=r0 fails\n"
        "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 fails\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

/* UNWIND mode: the same calls from a cleanup handler of a cancelled rank
 * return KB_ECANCELED without switching, enqueuing nothing. */
static fe *cleanup_fe;

static void probe_in_cleanup(void *arg)
{
    probe_calls(cleanup_fe, (int)(intptr_t)arg, "cleanup");
}

static int unwind_probe_body(fe *f, int r, void *arg)
{
    (void)arg;
    volatile int rc = 0;
    if (r == 0) {
        kb_complete(f->ctx, fe_h("done:1"));
        if (kb_yield() != 0)
            return 98;
        kb_raise(5, "r0 fails in round 2");
    }
    cleanup_fe = f;
    pthread_cleanup_push(probe_in_cleanup, (void *)(intptr_t)r);
    rc = kb_yield();
    tr_add("r%d returned from its yield", r);
    pthread_cleanup_pop(0);
    return rc;
}

static void test_unwind_mode_calls_from_cleanup_handler_return_ecanceled(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_spawn_body(f, unwind_probe_body, NULL, 3, fe_unwind()), KB_ESPAWN);
    /* derived from oracle: sem_cancel.py::s_cancelled_while_yielding
     * (edited: bodies without step lines; the probe lines are C only) */
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "start 1\n"
              "start 2\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "r1 cleanup cancelled=1\n"
              "r1 cleanup yield KB_ECANCELED\n"
              "r1 cleanup wait_completed KB_ECANCELED\n"
              "r1 cleanup wait_new KB_ECANCELED\n"
              "r1 cleanup wait_meta_new KB_ECANCELED\n"
              "r1 cleanup barrier KB_ECANCELED\n"
              "r1 cleanup yield KB_ECANCELED\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "r2 cleanup cancelled=1\n"
              "r2 cleanup yield KB_ECANCELED\n"
              "r2 cleanup wait_completed KB_ECANCELED\n"
              "r2 cleanup wait_new KB_ECANCELED\n"
              "r2 cleanup wait_meta_new KB_ECANCELED\n"
              "r2 cleanup barrier KB_ECANCELED\n"
              "r2 cleanup yield KB_ECANCELED\n"
              "unwind 2 cancel\n"
              "finally 2\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0] first=0 code=5\n"
              "error_entry 0 code=5 msg=r0 fails in round 2\n"
              "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 fails in round 2\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[done:1]\n"
              "spawn_end\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* UNWIND mode, the literal reading of kb_yield's documentation ("the same
 * calls made from a cleanup handler during an unwind"): during kb_raise's
 * own unwind too, the calls return KB_ECANCELED without switching. */
static int raise_probe_body(fe *f, int r, void *arg)
{
    (void)arg;
    if (r == 0) {
        kb_complete(f->ctx, fe_h("done:1"));
        cleanup_fe = f;
        pthread_cleanup_push(probe_in_cleanup, (void *)(intptr_t)r);
        kb_raise(5, "r0 raises");
        pthread_cleanup_pop(0);
    }
    return kb_yield();
}

static void test_unwind_mode_calls_from_cleanup_during_kb_raise_return_ecanceled(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_spawn_body(f, raise_probe_body, NULL, 2, fe_unwind()), KB_ESPAWN);
    /* derived from oracle: sem_cancel.py::s_raising_rank_cleanup
     * (edited: bodies without step lines; the probe lines are C only) */
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "r0 cleanup cancelled=0\n"
              "r0 cleanup yield KB_ECANCELED\n"
              "r0 cleanup wait_completed KB_ECANCELED\n"
              "r0 cleanup wait_new KB_ECANCELED\n"
              "r0 cleanup wait_meta_new KB_ECANCELED\n"
              "r0 cleanup barrier KB_ECANCELED\n"
              "r0 cleanup yield KB_ECANCELED\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0] first=0 code=5\n"
              "error_entry 0 code=5 msg=r0 raises\n"
              "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 raises\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[done:1]\n"
              "spawn_end\n");
    fe_free(f);
}

/* kb_cancelled is 0 outside a rank and in a rank that is not cancelled. */
static int cancelled_flag_body(fe *f, int r, void *arg)
{
    (void)f;
    (void)arg;
    tr_add("r%d cancelled=%d", r, kb_cancelled());
    int rc = kb_yield();
    tr_add("r%d cancelled=%d", r, kb_cancelled());
    return rc;
}

static void test_kb_cancelled_is_zero_without_cancellation(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(kb_cancelled(), 0);
    assert_int_equal(fe_spawn_body(f, cancelled_flag_body, NULL, 2, NULL), 0);
    assert_int_equal(kb_cancelled(), 0);
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "r0 cancelled=0\n"
              "start 1\n"
              "r1 cancelled=0\n"
              "r0 cancelled=0\n"
              "end 0\n"
              "finally 0\n"
              "r1 cancelled=0\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_return_mode_yield_wait_barrier_return_ecanceled_at_once_after_cancel),
        cmocka_unit_test(test_return_mode_cancelled_wait_returns_ecanceled),
        cmocka_unit_test(test_return_mode_cancelled_barrier_returns_ecanceled),
        cmocka_unit_test(test_return_mode_cancelled_rank_raising_is_recorded),
        cmocka_unit_test(test_unwind_mode_cancelled_rank_never_returns_from_yield),
        cmocka_unit_test(test_unwind_mode_calls_from_cleanup_handler_return_ecanceled),
        cmocka_unit_test(test_unwind_mode_calls_from_cleanup_during_kb_raise_return_ecanceled),
        cmocka_unit_test(test_kb_cancelled_is_zero_without_cancellation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
