/* SPDX-License-Identifier: MIT */
/*
 * Semantics: root-cause reporting (SEMANTICS.md rules 6 and 7; issue 2
 * "Semantics" and the kb_fail / kb_raise fine print). Expected traces are the
 * normalised output of the oracle scenario named above each
 * (tests/oracle/sem_report.py); "derived from oracle" traces are that output
 * edited for a documented C difference; "C only" ones follow the contract
 * alone (kb_fail has no reference counterpart).
 *
 * Message texts: "spawn failed on ranks [sorted]: rank R raised code C: MSG"
 * where MSG is the kb_raise/kb_fail text, or the library's default for a
 * returned code ("rank function returned C").
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fake_engine.h"

static const fe_act py2[] = {FE_Y, FE_Y, FE_END};

/* Rule 6: the rank that raised is recorded with its code and message. */
static const char *const expect_raise =
    /* oracle: sem_report.py::s_raise_records_code_and_message */
    "spawn_begin nprocs=3\n"
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
    "step 1 1\n"
    "unwind 1 raise\n"
    "finally 1\n"
    "unwind 0 cancel\n"
    "finally 0\n"
    "unwind 2 cancel\n"
    "finally 2\n"
    "barrier_reset pending_worker=[] pending_coll=[]\n"
    "spawn_raised KB_ESPAWN\n"
    "error ranks=[1] first=1 code=5\n"
    "error_entry 1 code=5 msg=boom five\n"
    "error_msg spawn failed on ranks [1]: rank 1 raised code 5: boom five\n"
    "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
    "spawn_end\n";

static void test_raise_records_rank_code_and_message(void **state)
{
    (void)state;
    static const fe_act p1[] = {FE_Y, FE_RAISE(5, "boom five"), FE_END};
    static const fe_act *const plans[] = {py2, p1, py2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), KB_ESPAWN);
    tr_assert(expect_raise);
    assert_int_equal(kb_spawn_error_count(f->err), 1);
    assert_int_equal(kb_spawn_error_drain_code(f->err), 0);
    assert_true(kb_spawn_error_drain_handle(f->err) == 0);
    fe_free(f);
}

/* Rule 6: KB_ECANCELED returned by a cancelled rank (RETURN mode: every
 * plan body passes it on) is not recorded: the same report. */
static void test_ecanceled_return_from_cancelled_rank_is_not_recorded(void **state)
{
    (void)state;
    static const fe_act p1[] = {FE_Y, FE_RAISE(5, "boom five"), FE_END};
    static const fe_act *const plans[] = {py2, p1, py2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, fe_return()), KB_ESPAWN);
    tr_assert(expect_raise);
    assert_int_equal(kb_spawn_error_count(f->err), 1);
    fe_free(f);
}

/* Rule 6: a rank function returning a nonzero code is a root cause. */
static void test_nonzero_return_is_recorded(void **state)
{
    (void)state;
    static const fe_act p1[] = {FE_Y, FE_RET(7), FE_END};
    static const fe_act *const plans[] = {py2, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_report.py::s_nonzero_return_recorded */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "start 1\n"
        "step 1 0\n"
        "step 0 1\n"
        "step 1 1\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1] first=1 code=7\n"
        "error_entry 1 code=7 msg=rank function returned 7\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 7: rank function returned 7\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 6: a cancelled rank whose cancellation turns into another error is a
 * root cause too; the message lists the ranks sorted and names the first
 * recorded one. RETURN mode: the rank sees KB_ECANCELED, calls kb_fail and
 * returns that code. */
static int yield_convert(fe *f, int r, const fe_act *a)
{
    (void)f;
    (void)r;
    int rc = kb_yield();
    if (rc == KB_ECANCELED) {
        kb_fail(6, "%s", (const char *)a->arg);
        return 6;
    }
    return rc;
}

static void test_cancelled_rank_converting_cancellation_is_recorded_sorted_first_named(void **state)
{
    (void)state;
    static const fe_act p1[] = {FE_Y, FE_CALL(yield_convert, "r1 converted its cancellation"), FE_END};
    static const fe_act p3[] = {FE_Y, FE_RAISE(5, "r3 fails"), FE_END};
    static const fe_act *const plans[] = {py2, p1, py2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, fe_return()), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_report.py::s_cancelled_rank_converting_is_recorded_sorted_first_named */
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
        "step 3 1\n"
        "unwind 3 raise\n"
        "finally 3\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 1 raise\n"
        "finally 1\n"
        "unwind 2 cancel\n"
        "finally 2\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[1,3] first=3 code=5\n"
        "error_entry 3 code=5 msg=r3 fails\n"
        "error_entry 1 code=6 msg=r1 converted its cancellation\n"
        "error_msg spawn failed on ranks [1, 3]: rank 3 raised code 5: r3 fails\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    /* insertion order: the failing rank first, then the converted one */
    assert_int_equal(kb_spawn_error_count(f->err), 2);
    assert_int_equal(kb_spawn_error_get(f->err, 0)->rank, 3);
    assert_int_equal(kb_spawn_error_get(f->err, 1)->rank, 1);
    assert_null(kb_spawn_error_get(f->err, 2));
    fe_free(f);
}

/* Rule 6, UNWIND mode: a cancelled rank's cleanup handler calling kb_fail
 * makes it a root cause. */
static void fail_in_cleanup(void *arg)
{
    int rc = kb_fail(6, "%s", (const char *)arg);
    tr_add("cleanup %d kb_fail %s", kb_rank(), fe_code(rc));
}

static int yield_with_failing_cleanup(fe *f, int r, const fe_act *a)
{
    (void)f;
    (void)r;
    volatile int rc = 0;
    pthread_cleanup_push(fail_in_cleanup, (void *)(uintptr_t)a->arg);
    rc = kb_yield();
    pthread_cleanup_pop(0);
    return rc;
}

static void test_cancelled_rank_cleanup_calling_kb_fail_is_recorded(void **state)
{
    (void)state;
    static const fe_act p1[] = {FE_Y, FE_CALL(yield_with_failing_cleanup, "r1 converted its cancellation"),
                                FE_END};
    static const fe_act p3[] = {FE_Y, FE_RAISE(5, "r3 fails"), FE_END};
    static const fe_act *const plans[] = {py2, p1, py2, p3};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 4, fe_unwind()), KB_ESPAWN);
    /* derived from oracle: sem_report.py::s_cancelled_rank_converting_is_recorded_sorted_first_named
     * (edited: rank 1 still unwinds as a cancellation, its own cleanup handler
     * records the failure first) */
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
              "step 3 1\n"
              "unwind 3 raise\n"
              "finally 3\n"
              "unwind 0 cancel\n"
              "finally 0\n"
              "cleanup 1 kb_fail 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "unwind 2 cancel\n"
              "finally 2\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[1,3] first=3 code=5\n"
              "error_entry 3 code=5 msg=r3 fails\n"
              "error_entry 1 code=6 msg=r1 converted its cancellation\n"
              "error_msg spawn failed on ranks [1, 3]: rank 3 raised code 5: r3 fails\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* Rule 6: a cancelled rank that absorbs its cancellation and returns
 * normally is not an error (RETURN mode: KB_ECANCELED, then return 0). */
static int yield_absorb(fe *f, int r, const fe_act *a)
{
    (void)f;
    (void)a;
    int rc = kb_yield();
    if (rc == KB_ECANCELED) {
        tr_add("absorbed %d", r);
        return FE_STOP;
    }
    return rc;
}

static void test_cancelled_rank_absorbing_cancellation_is_not_recorded(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_RAISE(5, "r0 fails"), FE_END};
    static const fe_act p1[] = {FE_CALL(yield_absorb, NULL), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1, py2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, fe_return()), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_report.py::s_cancelled_rank_absorbing_not_recorded */
        "spawn_begin nprocs=3\n"
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
        "absorbed 1\n"
        "end 1\n"
        "finally 1\n"
        "unwind 2 cancel\n"
        "finally 2\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[0] first=0 code=5\n"
        "error_entry 0 code=5 msg=r0 fails\n"
        "error_msg spawn failed on ranks [0]: rank 0 raised code 5: r0 fails\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(kb_spawn_error_count(f->err), 1);
    fe_free(f);
}

/* C only: KB_ECANCELED returned by a rank that was not cancelled is an
 * ordinary failure code. */
static void test_ecanceled_return_from_uncancelled_rank_is_recorded(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_RET(KB_ECANCELED), FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, fe_return()), KB_ESPAWN);
    char want[1024];
    snprintf(want, sizeof want,
             "spawn_begin nprocs=1\n"
             "bind 0\n"
             "start 0\n"
             "step 0 0\n"
             "unwind 0 raise\n"
             "finally 0\n"
             "barrier_reset pending_worker=[] pending_coll=[]\n"
             "spawn_raised KB_ESPAWN\n"
             "error ranks=[0] first=0 code=%d\n"
             "error_entry 0 code=%d msg=rank function returned %d\n"
             "error_msg spawn failed on ranks [0]: rank 0 raised code %d: rank function returned %d\n"
             "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[]\n"
             "spawn_end\n",
             KB_ECANCELED, KB_ECANCELED, KB_ECANCELED, KB_ECANCELED, KB_ECANCELED);
    tr_assert(want);
    fe_free(f);
}

/* C only (fine print): kb_raise(0, ..) records KB_EINVAL. */
static void test_kb_raise_zero_records_einval(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_RAISE(0, "raised zero"), FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), KB_ESPAWN);
    assert_int_equal(kb_spawn_error_count(f->err), 1);
    assert_int_equal(kb_spawn_error_get(f->err, 0)->code, KB_EINVAL);
    assert_string_equal(kb_spawn_error_get(f->err, 0)->message, "raised zero");
    char want[256];
    snprintf(want, sizeof want, "spawn failed on ranks [0]: rank 0 raised code %d: raised zero", KB_EINVAL);
    assert_string_equal(kb_spawn_error_message(f->err), want);
    fe_free(f);
}

/* C only: kb_fail(0, ..) gives KB_EINVAL and records nothing. */
static void test_kb_fail_zero_returns_einval_and_records_nothing(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_FAIL(0, "zero"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert("spawn_begin nprocs=1\n"
              "bind 0\n"
              "start 0\n"
              "step 0 0\n"
              "fail_rc 0 KB_EINVAL\n"
              "step 0 1\n"
              "end 0\n"
              "finally 0\n"
              "spawn_return 0\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* C only (fine print): kb_fail records at call time and returns; the rank
 * goes on; the spawn fails when its function ends (here normally): its
 * cleanup first, the rest of the round skipped, siblings cancelled. */
static void test_kb_fail_then_normal_return_fails_the_spawn_when_fn_ends(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_FAIL(3, "failed but went on"), FE_Y, FE_MARK("r0 goes on"), FE_END};
    static const fe_act p1[] = {FE_Y, FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "start 1\n"
              "step 1 0\n"
              "step 0 2\n"
              "r0 goes on\n"
              "end 0\n"
              "finally 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0] first=0 code=3\n"
              "error_entry 0 code=3 msg=failed but went on\n"
              "error_msg spawn failed on ranks [0]: rank 0 raised code 3: failed but went on\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* C only (fine print): the first kb_fail of a rank counts; later kb_fail
 * calls, kb_raise and the returned code change nothing. */
static void test_first_kb_fail_of_a_rank_wins(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_FAIL(3, "first"), FE_FAIL(4, "second"), FE_RET(9), FE_END};
    static const fe_act p1[] = {FE_FAIL(3, "first"), FE_RAISE(4, "raised after"), FE_END};
    static const fe_act *const plans0[] = {p0};
    static const fe_act *const plans1[] = {p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans0, 1, NULL), KB_ESPAWN);
    assert_int_equal(kb_spawn_error_count(f->err), 1);
    assert_int_equal(kb_spawn_error_get(f->err, 0)->code, 3);
    assert_string_equal(kb_spawn_error_get(f->err, 0)->message, "first");
    assert_int_equal(fe_spawn_plans(f, plans1, 1, NULL), KB_ESPAWN);
    assert_int_equal(kb_spawn_error_count(f->err), 1);
    assert_int_equal(kb_spawn_error_get(f->err, 0)->code, 3);
    assert_string_equal(kb_spawn_error_get(f->err, 0)->message, "first");
    assert_string_equal(kb_spawn_error_message(f->err),
                        "spawn failed on ranks [0]: rank 0 raised code 3: first");
    fe_free(f);
}

/* C only: the failing rank's own cleanup handler calling kb_fail after
 * kb_raise changes nothing (the raise was recorded first). */
static void fail_again_in_cleanup(void *arg)
{
    (void)arg;
    tr_add("cleanup %d kb_fail %s", kb_rank(), fe_code(kb_fail(6, "too late")));
}

static int raise_with_failing_cleanup(fe *f, int r, const fe_act *a)
{
    (void)f;
    (void)r;
    (void)a;
    pthread_cleanup_push(fail_again_in_cleanup, NULL);
    kb_raise(5, "raised first");
    pthread_cleanup_pop(0);
    return 0;
}

static void test_kb_fail_in_cleanup_after_kb_raise_changes_nothing(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_CALL(raise_with_failing_cleanup, NULL), FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), KB_ESPAWN);
    tr_assert("spawn_begin nprocs=1\n"
              "bind 0\n"
              "start 0\n"
              "step 0 0\n"
              "cleanup 0 kb_fail 0\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0] first=0 code=5\n"
              "error_entry 0 code=5 msg=raised first\n"
              "error_msg spawn failed on ranks [0]: rank 0 raised code 5: raised first\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* C only (fine print): insertion order is kb_fail call order: a rank that
 * called kb_fail in round 1 and kept going is recorded before a rank that
 * raises in round 2, and is the one the message names. */
static void test_kb_fail_insertion_order_is_call_order(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_RAISE(4, "r0 fails in round 2"), FE_END};
    static const fe_act p1[] = {FE_FAIL(3, "r1 failed early"), FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "step 1 1\n"
              "step 0 1\n"
              "unwind 0 raise\n"
              "finally 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[0,1] first=1 code=3\n"
              "error_entry 1 code=3 msg=r1 failed early\n"
              "error_entry 0 code=4 msg=r0 fails in round 2\n"
              "error_msg spawn failed on ranks [0, 1]: rank 1 raised code 3: r1 failed early\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* Rule 7: the engine's wait failing in drain phase (a) fails the spawn like
 * a rank failure (siblings cancelled, abort with what is left queued, queues
 * cleared) with no rank recorded, and the report names the drain failure:
 * its code and handle (the reference only says "spawn failed on ranks []"). */
static void check_drain_message(const fe *f, int code, const char *handle)
{
    char num[64];
    const char *msg = kb_spawn_error_message(f->err);
    snprintf(num, sizeof num, "%d", code);
    assert_non_null(strstr(msg, num));
    snprintf(num, sizeof num, "%llu", (unsigned long long)fe_h(handle));
    assert_non_null(strstr(msg, num));
    assert_int_equal(kb_spawn_error_drain_code(f->err), code);
    assert_true(kb_spawn_error_drain_handle(f->err) == fe_h(handle));
    assert_int_equal(kb_spawn_error_count(f->err), 0);
    assert_null(kb_spawn_error_get(f->err, 0));
}

static void run_drain_failure_phase_a(const kb_spawn_opts *opts)
{
    static const fe_act p0[] = {FE_W("ok:0"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("h:bad"), FE_Y, FE_END};
    static const fe_act p2[] = {FE_ENQ("later:2"), FE_SUBMIT("c:2", 0, "m2"), FE_Y, FE_END};
    static const fe_act p3[] = {FE_END};
    static const fe_act *const plans[] = {p0, p1, p2, p3};
    fe *f = fe_new();
    fe_fail_on(f, "h:bad", 42);
    assert_int_equal(fe_spawn_plans(f, plans, 4, opts), KB_ESPAWN);
    /* derived from oracle: sem_report.py::s_drain_failure_phase_a
     * (edited: the report names the drain failure) */
    tr_assert(
        "spawn_begin nprocs=4\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "bind 3\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 ok:0\n"
        "start 1\n"
        "step 1 0\n"
        "wait_enqueue 1 h:bad\n"
        "start 2\n"
        "step 2 0\n"
        "step 2 1\n"
        "step 2 2\n"
        "start 3\n"
        "end 3\n"
        "finally 3\n"
        "engine_wait ok:0\n"
        "engine_wait h:bad\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 1 cancel\n"
        "finally 1\n"
        "unwind 2 cancel\n"
        "finally 2\n"
        "barrier_reset pending_worker=[later:2] pending_coll=[c:2]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[] first=None code=None\n"
        "error_drain code=42 handle=h:bad\n"
        "error_msg spawn failed on ranks []: drain failed: engine wait for handle h:bad (pending worker "
        "wait) returned 42\n"
        "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[ok:0]\n"
        "spawn_end\n");
    check_drain_message(f, 42, "h:bad");
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

static void test_drain_failure_in_phase_a_fails_spawn_and_is_named(void **state)
{
    (void)state;
    run_drain_failure_phase_a(NULL);
}

static void test_drain_failure_in_phase_a_fails_spawn_and_is_named_return_mode(void **state)
{
    (void)state;
    run_drain_failure_phase_a(fe_return());
}

/* Rule 7 in phase (b): the collectives after the failed one stay queued
 * until the abort. */
static void test_drain_failure_in_phase_b_fails_spawn_and_is_named(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("c:ok", 0, "mok"), FE_SUBMIT("c:bad", 1, "mbad"),
                                FE_SUBMIT("c:after", 2, "mafter"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("w:1"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    fe_fail_on(f, "c:bad", 43);
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    /* derived from oracle: sem_report.py::s_drain_failure_phase_b
     * (edited: the report names the drain failure) */
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "step 0 2\n"
              "step 0 3\n"
              "start 1\n"
              "step 1 0\n"
              "wait_enqueue 1 w:1\n"
              "engine_wait w:1\n"
              "main_wait c:ok meta=mok\n"
              "engine_wait c:ok\n"
              "main_wait c:bad meta=mbad\n"
              "engine_wait c:bad\n"
              "unwind 0 cancel\n"
              "finally 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "barrier_reset pending_worker=[] pending_coll=[c:after]\n"
              "spawn_raised KB_ESPAWN\n"
              "error ranks=[] first=None code=None\n"
              "error_drain code=43 handle=c:bad\n"
              "error_msg spawn failed on ranks []: drain failed: engine wait for handle c:bad (pending "
              "collective) returned 43\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[c:ok,w:1]\n"
              "spawn_end\n");
    check_drain_message(f, 43, "c:bad");
    fe_free(f);
}

/* Rule 7 after the last round: every rank finished, still a failure. */
static void test_drain_failure_after_last_round_fails_spawn(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("h:bad"), FE_END};
    static const fe_act p1[] = {FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    fe_fail_on(f, "h:bad", 44);
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    /* derived from oracle: sem_report.py::s_drain_failure_in_last_round
     * (edited: the report names the drain failure) */
    tr_assert(
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "end 0\n"
        "finally 0\n"
        "start 1\n"
        "end 1\n"
        "finally 1\n"
        "engine_wait h:bad\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[] first=None code=None\n"
        "error_drain code=44 handle=h:bad\n"
        "error_msg spawn failed on ranks []: drain failed: engine wait for handle h:bad (pending worker "
        "wait) returned 44\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    check_drain_message(f, 44, "h:bad");
    fe_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raise_records_rank_code_and_message),
        cmocka_unit_test(test_ecanceled_return_from_cancelled_rank_is_not_recorded),
        cmocka_unit_test(test_nonzero_return_is_recorded),
        cmocka_unit_test(test_cancelled_rank_converting_cancellation_is_recorded_sorted_first_named),
        cmocka_unit_test(test_cancelled_rank_cleanup_calling_kb_fail_is_recorded),
        cmocka_unit_test(test_cancelled_rank_absorbing_cancellation_is_not_recorded),
        cmocka_unit_test(test_ecanceled_return_from_uncancelled_rank_is_recorded),
        cmocka_unit_test(test_kb_raise_zero_records_einval),
        cmocka_unit_test(test_kb_fail_zero_returns_einval_and_records_nothing),
        cmocka_unit_test(test_kb_fail_then_normal_return_fails_the_spawn_when_fn_ends),
        cmocka_unit_test(test_first_kb_fail_of_a_rank_wins),
        cmocka_unit_test(test_kb_fail_in_cleanup_after_kb_raise_changes_nothing),
        cmocka_unit_test(test_kb_fail_insertion_order_is_call_order),
        cmocka_unit_test(test_drain_failure_in_phase_a_fails_spawn_and_is_named),
        cmocka_unit_test(test_drain_failure_in_phase_a_fails_spawn_and_is_named_return_mode),
        cmocka_unit_test(test_drain_failure_in_phase_b_fails_spawn_and_is_named),
        cmocka_unit_test(test_drain_failure_after_last_round_fails_spawn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
