/* SPDX-License-Identifier: MIT */
/*
 * The six example scenarios of the reference oracle
 * (../shared/reference/oracle/scenarios, expected traces in oracle/expected)
 * ported to C: each must produce the expected trace line for line after the
 * normalisation documented in tests/support/fake_engine.h. The traces are
 * kept in tests/support/reference_traces.h (the build and the tests never
 * read ../shared); refresh or check them with
 * /usr/bin/python3 tests/oracle/refresh.py.
 *
 * "raise" in a scenario is kb_raise(code, message) in the plain tests; every
 * scenario also runs in RETURN cancel mode, where a cancelled rank sees
 * KB_ECANCELED and its body returns it: the trace must be the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"
#include "reference_traces.h"

/* ------------------------------------------------------------------------ */
/* 02_nprocs4_yields3: nprocs=4, every rank yields 3 times (count via arg).  */
/* ------------------------------------------------------------------------ */

static int body_02(fe *f, int r, void *arg)
{
    (void)f;
    int n = *(const int *)arg;
    for (int i = 0; i < n; i++) {
        tr_add("step %d %d", r, i);
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void run_02(const kb_spawn_opts *opts)
{
    fe *f = fe_new();
    static const int three = 3;
    assert_int_equal(fe_spawn_body(f, body_02, (void *)(uintptr_t)&three, 4, opts), 0);
    tr_assert(expect_02);
    fe_free(f);
}

static void test_ref_02_nprocs4_yields3(void **state)
{
    (void)state;
    run_02(NULL);
}

static void test_ref_02_nprocs4_yields3_return_mode(void **state)
{
    (void)state;
    run_02(fe_return());
}

/* ------------------------------------------------------------------------ */
/* 04_worker_waits_fifo: drain order is FIFO (enqueue order, not sorted), a */
/* duplicate handle is engine-waited once, a completed handle is fast.      */
/* ------------------------------------------------------------------------ */

static const fe_act p04_0[] = {FE_W("h:40"), FE_Y, FE_W("h:10"), FE_END};
static const fe_act p04_1[] = {FE_W("h:30"), FE_W("h:7"), FE_END};
static const fe_act p04_2[] = {FE_W("h:20"), FE_W("h:shared"), FE_END};
static const fe_act p04_3[] = {FE_W("h:10"), FE_W("h:shared"), FE_Y, FE_END};
static const fe_act *const plans_04[] = {p04_0, p04_1, p04_2, p04_3};

static void run_04(const kb_spawn_opts *opts)
{
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans_04, 4, opts), 0);
    tr_assert(expect_04);
    fe_free(f);
}

static void test_ref_04_worker_waits_fifo(void **state)
{
    (void)state;
    run_04(NULL);
}

static void test_ref_04_worker_waits_fifo_return_mode(void **state)
{
    (void)state;
    run_04(fe_return());
}

/* ------------------------------------------------------------------------ */
/* 06_allreduce4: all_reduce across 4 ranks in one round, two more steps.   */
/* ------------------------------------------------------------------------ */

static const fe_act p06[] = {FE_Y, FE_AR("ar0", 4), FE_Y, FE_Y, FE_END};
static const fe_act *const plans_06[] = {p06, p06, p06, p06};

static void run_06(const kb_spawn_opts *opts)
{
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans_06, 4, opts), 0);
    tr_assert(expect_06);
    fe_free(f);
}

static void test_ref_06_allreduce4(void **state)
{
    (void)state;
    run_06(NULL);
}

static void test_ref_06_allreduce4_return_mode(void **state)
{
    (void)state;
    run_06(fe_return());
}

/* ------------------------------------------------------------------------ */
/* 09_rank2_raises_step2: rank 2 raises in its 2nd step while rank 0 is     */
/* parked in a 2-rank collective and rank 1 has enqueued its wait.          */
/* ------------------------------------------------------------------------ */

static const fe_act p09_01[] = {FE_Y, FE_AR("g01", 2), FE_Y, FE_END};
static const fe_act p09_2[] = {FE_Y, FE_RAISE(1, "rank 2 boom at step 1"), FE_END};
static const fe_act p09_3[] = {FE_Y, FE_Y, FE_Y, FE_END};
static const fe_act *const plans_09[] = {p09_01, p09_01, p09_2, p09_3};

static void run_09(const kb_spawn_opts *opts)
{
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans_09, 4, opts), KB_ESPAWN);
    tr_assert(expect_09);
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

static void test_ref_09_rank2_raises_step2(void **state)
{
    (void)state;
    run_09(NULL);
}

static void test_ref_09_rank2_raises_step2_return_mode(void **state)
{
    (void)state;
    run_09(fe_return());
}

/* ------------------------------------------------------------------------ */
/* 10_rank0_raises_before_yield: later ranks have not started yet.          */
/* ------------------------------------------------------------------------ */

static const fe_act p10_0[] = {FE_RAISE(1, "rank 0 boom before first yield"), FE_END};
static const fe_act p10_n[] = {FE_Y, FE_Y, FE_END};
static const fe_act *const plans_10[] = {p10_0, p10_n, p10_n, p10_n};

static void run_10(const kb_spawn_opts *opts)
{
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans_10, 4, opts), KB_ESPAWN);
    tr_assert(expect_10);
    /* never-started ranks never called fn */
    assert_int_equal(f->calls[0], 1);
    assert_int_equal(f->calls[1], 0);
    assert_int_equal(f->calls[2], 0);
    assert_int_equal(f->calls[3], 0);
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

static void test_ref_10_rank0_raises_before_yield(void **state)
{
    (void)state;
    run_10(NULL);
}

static void test_ref_10_rank0_raises_before_yield_return_mode(void **state)
{
    (void)state;
    run_10(fe_return());
}

/* ------------------------------------------------------------------------ */
/* 24_drain_after_last_round: rank 0 enqueues a handle (non-blocking) and   */
/* returns; rank 1 returns at once; the drain after the last round waits.   */
/* ------------------------------------------------------------------------ */

static const fe_act p24_0[] = {FE_ENQ("late:0"), FE_END};
static const fe_act p24_1[] = {FE_END};
static const fe_act *const plans_24[] = {p24_0, p24_1};

static void run_24(const kb_spawn_opts *opts)
{
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans_24, 2, opts), 0);
    tr_assert(expect_24);
    fe_free(f);
}

static void test_ref_24_drain_after_last_round(void **state)
{
    (void)state;
    run_24(NULL);
}

static void test_ref_24_drain_after_last_round_return_mode(void **state)
{
    (void)state;
    run_24(fe_return());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_02_nprocs4_yields3),
        cmocka_unit_test(test_ref_02_nprocs4_yields3_return_mode),
        cmocka_unit_test(test_ref_04_worker_waits_fifo),
        cmocka_unit_test(test_ref_04_worker_waits_fifo_return_mode),
        cmocka_unit_test(test_ref_06_allreduce4),
        cmocka_unit_test(test_ref_06_allreduce4_return_mode),
        cmocka_unit_test(test_ref_09_rank2_raises_step2),
        cmocka_unit_test(test_ref_09_rank2_raises_step2_return_mode),
        cmocka_unit_test(test_ref_10_rank0_raises_before_yield),
        cmocka_unit_test(test_ref_10_rank0_raises_before_yield_return_mode),
        cmocka_unit_test(test_ref_24_drain_after_last_round),
        cmocka_unit_test(test_ref_24_drain_after_last_round_return_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
