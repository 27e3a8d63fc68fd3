/* SPDX-License-Identifier: MIT */
/*
 * Semantics: join=False, i.e. kb_start / kb_join / kb_process_context_free
 * (SEMANTICS.md rule 8: the reference ignores join, libkbthreads implements
 * it; issue 2 fine print). C only; where a trace follows an oracle scenario
 * it says "derived from oracle": the rounds, drains and failures are the
 * scenario's, with start, join and free lines where the oracle has spawn lines.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include "fake_engine.h"

static const fe_act ry[] = {FE_Y, FE_END};
static const fe_act ryyy[] = {FE_Y, FE_Y, FE_Y, FE_END};
static const fe_act rnone[] = {FE_END};
static const fe_act ryy[] = {FE_Y, FE_Y, FE_END};

/* kb_start binds every rank (0..N-1, before any runs) and runs none. */
static void test_start_binds_every_rank_and_runs_none(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {ry, ry, ry};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 3, NULL, &pc), 0);
    assert_non_null(pc);
    tr_assert("start_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start_return 0\n");
    for (int r = 0; r < 3; r++)
        assert_int_equal(f->calls[r], 0);
    assert_int_equal(fe_join(f, pc, -1), 1);
    fe_pc_free(f, pc);
    fe_free(f);
}

/* kb_join with no time limit runs the rounds kb_spawn would: the same
 * trace. */
static void test_join_without_timeout_gives_the_spawn_trace(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {ry, ryyy, rnone, ryy};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 4, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, -1), 1);
    fe_pc_free(f, pc);
    /* derived from oracle: sem_rounds.py::s_round_order_uneven_lengths */
    tr_assert("start_begin nprocs=4\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "bind 3\n"
              "start_return 0\n"
              "join timeout=-1\n"
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
              "join_return 1\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n");
    assert_int_equal(f->aborts, 0);
    fe_free(f);
}

/* kb_join(pc, 0): the timeout has passed at the end of every round, after
 * its drain, so each call runs exactly one round; the call in which the last
 * rank finishes returns 1; later calls return 1 again (no round, *err NULL). */
static const char *const expect_one_round_per_call =
    /* derived from oracle: sem_drain.py::s_one_drain_after_every_round */
    "start_begin nprocs=2\n"
    "bind 0\n"
    "bind 1\n"
    "start_return 0\n"
    "join timeout=0\n"
    "start 0\n"
    "step 0 0\n"
    "step 0 1\n"
    "start 1\n"
    "step 1 0\n"
    "step 1 1\n"
    "engine_wait e:0:0\n"
    "engine_wait e:1:0\n"
    "join_return 0\n"
    "post ranks=[suspended,suspended] pending_worker=[] pending_coll=[] completed=[e:0:0,e:1:0]\n"
    "join timeout=0\n"
    "step 0 2\n"
    "step 0 3\n"
    "step 1 2\n"
    "end 1\n"
    "finally 1\n"
    "engine_wait e:0:1\n"
    "engine_wait e:1:1\n"
    "join_return 0\n"
    "post ranks=[suspended,dead] pending_worker=[] pending_coll=[] completed=[e:0:0,e:0:1,e:1:0,e:1:1]\n"
    "join timeout=0\n"
    "step 0 4\n"
    "end 0\n"
    "finally 0\n"
    "engine_wait e:0:2\n"
    "join_return 1\n"
    "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[e:0:0,e:0:1,e:0:2,e:1:0,e:1:1]\n"
    "join timeout=0\n"
    "join_return 1\n"
    "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[e:0:0,e:0:1,e:0:2,e:1:0,e:1:1]\n"
    "join timeout=-1\n"
    "join_return 1\n"
    "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[e:0:0,e:0:1,e:0:2,e:1:0,e:1:1]\n"
    "free_begin\n"
    "free_end\n"
    "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[e:0:0,e:0:1,e:0:2,e:1:0,e:1:1]\n";

static const fe_act d0[] = {FE_ENQ("e:0:0"), FE_Y, FE_ENQ("e:0:1"), FE_Y, FE_ENQ("e:0:2"), FE_END};
static const fe_act d1[] = {FE_ENQ("e:1:0"), FE_Y, FE_ENQ("e:1:1"), FE_END};

static void test_join_timeout_zero_runs_exactly_one_round_with_its_drain_per_call(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {d0, d1};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 2, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, 0), 0);
    assert_int_equal(fe_join(f, pc, 0), 0);
    assert_int_equal(fe_join(f, pc, 0), 1);
    assert_int_equal(fe_join(f, pc, 0), 1);
    assert_int_equal(fe_join(f, pc, -1), 1);
    fe_pc_free(f, pc);
    tr_assert(expect_one_round_per_call);
    assert_int_equal(f->aborts, 0);
    fe_free(f);
}

/* Once finished, kb_join returns the same result with *err left NULL. */
static void test_join_after_finish_returns_one_again_with_err_null(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {ry};
    kb_process_context *pc = NULL;
    kb_spawn_error *err = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 1, NULL, &pc), 0);
    assert_int_equal(kb_join(pc, -1, &err), 1);
    assert_null(err);
    assert_int_equal(kb_join(pc, -1, &err), 1);
    assert_null(err);
    assert_int_equal(kb_join(pc, 0, NULL), 1);
    kb_process_context_free(pc);
    assert_int_equal(f->aborts, 0);
    fe_free(f);
}

/* A failure in kb_join is reported like kb_spawn's (abort once); later
 * calls give KB_ESPAWN again with *err NULL; freeing it calls no second
 * abort. */
static const fe_act p09_01[] = {FE_Y, FE_AR("g01", 2), FE_Y, FE_END};
static const fe_act p09_2[] = {FE_Y, FE_RAISE(1, "rank 2 boom at step 1"), FE_END};
static const fe_act p09_3[] = {FE_Y, FE_Y, FE_Y, FE_END};

static void test_join_failure_is_reported_once_then_espawn_with_err_null(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {p09_01, p09_01, p09_2, p09_3};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 4, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, -1), KB_ESPAWN);
    assert_int_equal(fe_join(f, pc, 0), KB_ESPAWN);
    fe_pc_free(f, pc);
    /* derived from oracle: ref_scenarios.py::s_09_rank2_raises_step2 */
    tr_assert("start_begin nprocs=4\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "bind 3\n"
              "start_return 0\n"
              "join timeout=-1\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "start 3\n"
              "step 3 0\n"
              "step 0 1\n"
              "coll_arrive 0 g01 n=1/2\n"
              "step 1 1\n"
              "coll_arrive 1 g01 n=2/2\n"
              "coll_issue 1 coll:g01 sip=0\n"
              "wait_enqueue 1 coll:g01\n"
              "step 2 1\n"
              "unwind 2 raise\n"
              "finally 2\n"
              "unwind 0 cancel\n"
              "finally 0\n"
              "unwind 1 cancel\n"
              "finally 1\n"
              "unwind 3 cancel\n"
              "finally 3\n"
              "barrier_reset pending_worker=[coll:g01] pending_coll=[coll:g01]\n"
              "join_raised KB_ESPAWN\n"
              "error ranks=[2] first=2 code=1\n"
              "error_entry 2 code=1 msg=rank 2 boom at step 1\n"
              "error_msg spawn failed on ranks [2]: rank 2 raised code 1: rank 2 boom at step 1\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "join timeout=0\n"
              "join_raised KB_ESPAWN err=NULL\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n");
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

/* Freeing a live process context cancels the live ranks in rank order
 * (their cleanup runs; finished ones untouched), calls abort once with the
 * queues as they are, and clears both queues. */
static void run_free_live(const kb_spawn_opts *opts)
{
    static const fe_act *const plans[] = {ryy, rnone, ryy};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 3, opts, &pc), 0);
    assert_int_equal(fe_join(f, pc, 0), 0);
    /* between kb_join calls the test thread may use the ctx */
    assert_int_equal(kb_enqueue_wait(f->ctx, fe_h("between:1")), 0);
    assert_int_equal(kb_collective_submit(f->ctx, fe_h("betweenc:1"), 0, "mb"), 0);
    fe_pc_free(f, pc);
    tr_assert("start_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start_return 0\n"
              "join timeout=0\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "end 1\n"
              "finally 1\n"
              "start 2\n"
              "step 2 0\n"
              "join_return 0\n"
              "post ranks=[suspended,dead,suspended] pending_worker=[] pending_coll=[] completed=[]\n"
              "free_begin\n"
              "unwind 0 cancel\n"
              "finally 0\n"
              "unwind 2 cancel\n"
              "finally 2\n"
              "barrier_reset pending_worker=[between:1] pending_coll=[betweenc:1]\n"
              "free_end\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n");
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

static void test_free_live_context_cancels_in_rank_order_then_aborts_and_clears(void **state)
{
    (void)state;
    run_free_live(NULL);
}

static void test_free_live_context_cancels_in_rank_order_then_aborts_and_clears_return_mode(void **state)
{
    (void)state;
    run_free_live(fe_return());
}

/* Freeing a context whose ranks never ran: fn is never called, abort once. */
static void test_free_unjoined_context_never_calls_fn_and_aborts_once(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {ry, ry, ry};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 3, NULL, &pc), 0);
    fe_pc_free(f, pc);
    tr_assert("start_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start_return 0\n"
              "free_begin\n"
              "barrier_reset pending_worker=[] pending_coll=[]\n"
              "free_end\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n");
    for (int r = 0; r < 3; r++)
        assert_int_equal(f->calls[r], 0);
    assert_int_equal(f->aborts, 1);
    fe_free(f);
}

/* Freeing a finished context calls no abort and leaves the queues alone. */
static void test_free_finished_context_calls_no_abort(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {ry, ry};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 2, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, -1), 1);
    assert_int_equal(kb_enqueue_wait(f->ctx, fe_h("after:1")), 0);
    tr_reset();
    fe_pc_free(f, pc);
    tr_assert("free_begin\n"
              "free_end\n"
              "post ranks=[dead,dead] pending_worker=[after:1] pending_coll=[] completed=[]\n");
    assert_int_equal(f->aborts, 0);
    fe_free(f);
}

/* nprocs 0: kb_start binds nothing; kb_join returns 1 with no round and no
 * drain (old entries stay); freeing it calls no abort. */
static void test_nprocs_zero_context_joins_at_once_and_frees_without_abort(void **state)
{
    (void)state;
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(kb_enqueue_wait(f->ctx, fe_h("old:w")), 0);
    assert_int_equal(fe_start_plans(f, NULL, 0, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, -1), 1);
    assert_int_equal(fe_join(f, pc, 0), 1);
    fe_pc_free(f, pc);
    assert_int_equal(fe_start_plans(f, NULL, 0, NULL, &pc), 0);
    fe_pc_free(f, pc);
    tr_assert("start_begin nprocs=0\n"
              "start_return 0\n"
              "join timeout=-1\n"
              "join_return 1\n"
              "post ranks=[] pending_worker=[old:w] pending_coll=[] completed=[]\n"
              "join timeout=0\n"
              "join_return 1\n"
              "post ranks=[] pending_worker=[old:w] pending_coll=[] completed=[]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[] pending_worker=[old:w] pending_coll=[] completed=[]\n"
              "start_begin nprocs=0\n"
              "start_return 0\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[] pending_worker=[old:w] pending_coll=[] completed=[]\n");
    assert_int_equal(f->aborts, 0);
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* Fine print: the ctx stays busy from kb_start until the context is freed,
 * finished or not. */
static void test_ctx_is_busy_until_the_process_context_is_freed(void **state)
{
    (void)state;
    static const fe_act *const plans[] = {ry};
    kb_process_context *pc = NULL, *pc2 = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 1, NULL, &pc), 0);
    assert_int_equal(kb_spawn(f->ctx, fe_traced, f, 1, NULL, NULL), KB_EBUSY);
    assert_int_equal(kb_start(f->ctx, fe_traced, f, 1, NULL, &pc2), KB_EBUSY);
    assert_int_equal(kb_ctx_destroy(f->ctx), KB_EBUSY);
    assert_int_equal(fe_join(f, pc, -1), 1);
    assert_int_equal(kb_spawn(f->ctx, fe_traced, f, 1, NULL, NULL), KB_EBUSY);
    assert_int_equal(kb_start(f->ctx, fe_traced, f, 1, NULL, &pc2), KB_EBUSY);
    assert_int_equal(kb_ctx_destroy(f->ctx), KB_EBUSY);
    fe_pc_free(f, pc);
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    fe_free(f);
}

/* kb_join may run on any thread (one at a time): the hooks run there. */
struct joiner {
    fe *f;
    kb_process_context *pc;
    int rc;
};

static void *join_thread(void *arg)
{
    struct joiner *j = arg;
    j->rc = fe_join(j->f, j->pc, -1);
    return NULL;
}

static void test_join_on_another_thread_drives_the_rounds_there(void **state)
{
    (void)state;
    static const fe_act w0[] = {FE_W("t:1"), FE_Y, FE_END};
    static const fe_act *const plans[] = {w0, ry};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 2, NULL, &pc), 0);
    struct joiner j = {f, pc, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, join_thread, &j), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(j.rc, 1);
    fe_pc_free(f, pc);
    tr_assert("start_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start_return 0\n"
              "join timeout=-1\n"
              "start 0\n"
              "step 0 0\n"
              "wait_enqueue 0 t:1\n"
              "start 1\n"
              "step 1 0\n"
              "engine_wait t:1\n"
              "wait_done 0 t:1\n"
              "step 0 1\n"
              "end 1\n"
              "finally 1\n"
              "end 0\n"
              "finally 0\n"
              "join_return 1\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[t:1]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[t:1]\n");
    fe_free(f);
}

/* A positive timeout is checked at the end of a round, after its drain:
 * with rounds longer than the timeout, one round per call; with a long
 * timeout, the whole run in one call. */
static int slow_body(fe *f, int r, void *arg)
{
    (void)f;
    (void)arg;
    for (int i = 0; i < 2; i++) {
        struct timespec ts = {0, 15 * 1000 * 1000};
        tr_add("step %d %d", r, i);
        kb_enqueue_wait(f->ctx, fe_h(r ? "slow:1" : "slow:0"));
        nanosleep(&ts, NULL);
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void test_join_timeout_is_checked_after_each_rounds_drain(void **state)
{
    (void)state;
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    f->body = slow_body;
    assert_int_equal(fe_start(f, fe_traced, f, 2, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, 5), 0);
    assert_int_equal(fe_join(f, pc, 5), 0);
    assert_int_equal(fe_join(f, pc, 5), 1);
    fe_pc_free(f, pc);
    tr_assert("start_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start_return 0\n"
              "join timeout=5\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "engine_wait slow:0\n"
              "engine_wait slow:1\n"
              "join_return 0\n"
              "post ranks=[suspended,suspended] pending_worker=[] pending_coll=[] completed=[slow:0,slow:1]\n"
              "join timeout=5\n"
              "step 0 1\n"
              "step 1 1\n"
              "join_return 0\n"
              "post ranks=[suspended,suspended] pending_worker=[] pending_coll=[] completed=[slow:0,slow:1]\n"
              "join timeout=5\n"
              "end 0\n"
              "finally 0\n"
              "end 1\n"
              "finally 1\n"
              "join_return 1\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[slow:0,slow:1]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[slow:0,slow:1]\n");
    fe_free(f);

    f = fe_new();
    f->body = slow_body;
    assert_int_equal(fe_start(f, fe_traced, f, 2, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, 60000), 1);
    fe_pc_free(f, pc);
    fe_free(f);
}

/* Between kb_join calls any one thread may use the ctx: a completion made
 * there is seen by the ranks (fast path), a wait queued there is drained
 * after the next round. */
static void test_ctx_used_between_joins_is_seen_by_the_next_round(void **state)
{
    (void)state;
    static const fe_act b0[] = {FE_Y, FE_W("b:1"), FE_END};
    static const fe_act *const plans[] = {b0};
    kb_process_context *pc = NULL;
    fe *f = fe_new();
    assert_int_equal(fe_start_plans(f, plans, 1, NULL, &pc), 0);
    assert_int_equal(fe_join(f, pc, 0), 0);
    assert_int_equal(kb_complete(f->ctx, fe_h("b:1")), 0);
    assert_int_equal(kb_enqueue_wait(f->ctx, fe_h("b:2")), 0);
    assert_int_equal(fe_join(f, pc, 0), 1);
    fe_pc_free(f, pc);
    tr_assert("start_begin nprocs=1\n"
              "bind 0\n"
              "start_return 0\n"
              "join timeout=0\n"
              "start 0\n"
              "step 0 0\n"
              "join_return 0\n"
              "post ranks=[suspended] pending_worker=[] pending_coll=[] completed=[]\n"
              "join timeout=0\n"
              "step 0 1\n"
              "wait_fast 0 b:1\n"
              "end 0\n"
              "finally 0\n"
              "engine_wait b:2\n"
              "join_return 1\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[b:1,b:2]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[b:1,b:2]\n");
    fe_free(f);
}

/* Fine print: kb_spawn/kb_start/kb_join (on any ctx) and kb_ctx_destroy give
 * KB_EBUSY inside an engine hook; kb_start/kb_join/kb_spawn from a rank give
 * KB_EPERM. */
struct reentry {
    kb_ctx *other;
    kb_process_context *pc;
};

static int cb_reentry(fe *f, kb_handle h, void *arg)
{
    struct reentry *re = arg;
    kb_process_context *pc2 = NULL;
    (void)h;
    tr_add("hook spawn %s", fe_code(kb_spawn(f->ctx, fe_traced, f, 1, NULL, NULL)));
    tr_add("hook spawn_other %s", fe_code(kb_spawn(re->other, fe_traced, f, 1, NULL, NULL)));
    tr_add("hook start_other %s", fe_code(kb_start(re->other, fe_traced, f, 1, NULL, &pc2)));
    tr_add("hook join %s", fe_code(kb_join(re->pc, 0, NULL)));
    tr_add("hook destroy %s", fe_code(kb_ctx_destroy(f->ctx)));
    tr_add("hook destroy_other %s", fe_code(kb_ctx_destroy(re->other)));
    return 0;
}

static struct reentry reentry;

static int rank_reentry(fe *f, int r, const fe_act *a)
{
    kb_process_context *pc2 = NULL;
    (void)a;
    tr_add("r%d spawn %s", r, fe_code(kb_spawn(f->ctx, fe_traced, f, 1, NULL, NULL)));
    tr_add("r%d start %s", r, fe_code(kb_start(f->ctx, fe_traced, f, 1, NULL, &pc2)));
    tr_add("r%d start_other %s", r, fe_code(kb_start(reentry.other, fe_traced, f, 1, NULL, &pc2)));
    tr_add("r%d join %s", r, fe_code(kb_join(reentry.pc, 0, NULL)));
    tr_add("r%d join_null %s", r, fe_code(kb_join(NULL, 0, NULL)));
    return 0;
}

static void test_hooks_get_ebusy_and_ranks_get_eperm_for_driver_calls(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_CALL(rank_reentry, NULL), FE_W("hk:1"), FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(kb_ctx_create(NULL, &reentry.other), 0);
    fe_on_wait(f, "hk:1", cb_reentry, &reentry);
    assert_int_equal(fe_start_plans(f, plans, 1, NULL, &reentry.pc), 0);
    assert_int_equal(fe_join(f, reentry.pc, -1), 1);
    fe_pc_free(f, reentry.pc);
    tr_assert("start_begin nprocs=1\n"
              "bind 0\n"
              "start_return 0\n"
              "join timeout=-1\n"
              "start 0\n"
              "step 0 0\n"
              "r0 spawn KB_EPERM\n"
              "r0 start KB_EPERM\n"
              "r0 start_other KB_EPERM\n"
              "r0 join KB_EPERM\n"
              "r0 join_null KB_EINVAL\n"
              "step 0 1\n"
              "wait_enqueue 0 hk:1\n"
              "engine_wait hk:1\n"
              "hook spawn KB_EBUSY\n"
              "hook spawn_other KB_EBUSY\n"
              "hook start_other KB_EBUSY\n"
              "hook join KB_EBUSY\n"
              "hook destroy KB_EBUSY\n"
              "hook destroy_other KB_EBUSY\n"
              "wait_done 0 hk:1\n"
              "end 0\n"
              "finally 0\n"
              "join_return 1\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[hk:1]\n"
              "free_begin\n"
              "free_end\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[hk:1]\n");
    assert_int_equal(kb_ctx_destroy(reentry.other), 0);
    fe_free(f);
}

/* ---- timed joins keep the round boundaries ranks run themselves -------- */

static int yield_50(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (int i = 0; i < 50; i++) {
        int rc = kb_yield();
        if (rc)
            return rc;
    }
    return 0;
}

static void stats_of_start_and_join(long timeout_ms, kb_spawn_stats *st)
{
    kb_ctx *ctx;
    kb_process_context *pc;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_start(ctx, yield_50, NULL, 3, NULL, &pc), 0);
    int rc;
    while ((rc = kb_join(pc, timeout_ms, NULL)) == 0)
        ;
    assert_int_equal(rc, 1);
    assert_int_equal(kb_process_context_stats(pc, st), 0);
    kb_process_context_free(pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* A kb_join with a timeout that does not pass drives the rounds as
 * kb_spawn does: a round with nothing to drain hands the baton from rank
 * to rank, never through the driver, so rounds, turns, handoffs and
 * drains are kb_spawn's. */
static void test_timed_join_hands_the_baton_as_kb_spawn_does(void **state)
{
    (void)state;
    kb_ctx *ctx;
    kb_spawn_stats spawned = {0}, timed = {0}, untimed = {0};
    kb_spawn_opts opts = {.stats = &spawned};
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, yield_50, NULL, 3, &opts, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    stats_of_start_and_join(60000, &timed);
    stats_of_start_and_join(-1, &untimed);
    assert_int_equal(spawned.rounds, 51);
    assert_int_equal(timed.rounds, spawned.rounds);
    assert_int_equal(timed.turns, spawned.turns);
    assert_int_equal(timed.drains, spawned.drains);
    assert_int_equal(timed.handoffs, spawned.handoffs);
    assert_int_equal(timed.handoffs, timed.turns + 1); /* one from the driver, one back */
    assert_int_equal(untimed.handoffs, spawned.handoffs);
}

static int yield_until_cancelled(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    while (kb_yield() == 0)
        ;
    return 0;
}

/* Ranks that yield forever, with nothing to drain, never hand the baton to
 * the driver by themselves: a timed join still returns 0 once its
 * deadline has passed, at the end of a round, having run many rounds
 * without the driver; the process context then cancels them. opts may
 * turn on the stall watchdog, whose timed waits also watch the deadline. */
static void check_timed_join_returns_from_endless_rounds(const kb_spawn_opts *opts)
{
    kb_ctx *ctx;
    kb_process_context *pc;
    kb_spawn_stats st = {0};
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_start(ctx, yield_until_cancelled, NULL, 2, opts, &pc), 0);
    assert_int_equal(kb_join(pc, 20, NULL), 0);
    assert_int_equal(kb_process_context_stats(pc, &st), 0);
    assert_true(st.rounds > 1);
    assert_int_equal(st.turns, 2 * st.rounds);   /* the join returned at a round's end */
    assert_int_equal(st.handoffs, st.turns + 1); /* the driver was in no round boundary */
    assert_int_equal(st.drains, st.rounds);      /* the empty drains, one per round */
    assert_int_equal(kb_join(pc, 0, NULL), 0);   /* and again: exactly one more round */
    kb_spawn_stats again = {0};
    assert_int_equal(kb_process_context_stats(pc, &again), 0);
    assert_int_equal(again.rounds, st.rounds + 1);
    kb_process_context_free(pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_timed_join_returns_after_its_deadline_when_ranks_never_need_the_driver(void **state)
{
    (void)state;
    check_timed_join_returns_from_endless_rounds(NULL);
}

static void test_timed_join_with_the_stall_watchdog_returns_after_its_deadline(void **state)
{
    (void)state;
    kb_spawn_opts opts = {.stall_ms = 60000};
    check_timed_join_returns_from_endless_rounds(&opts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_binds_every_rank_and_runs_none),
        cmocka_unit_test(test_join_without_timeout_gives_the_spawn_trace),
        cmocka_unit_test(test_join_timeout_zero_runs_exactly_one_round_with_its_drain_per_call),
        cmocka_unit_test(test_join_after_finish_returns_one_again_with_err_null),
        cmocka_unit_test(test_join_failure_is_reported_once_then_espawn_with_err_null),
        cmocka_unit_test(test_free_live_context_cancels_in_rank_order_then_aborts_and_clears),
        cmocka_unit_test(test_free_live_context_cancels_in_rank_order_then_aborts_and_clears_return_mode),
        cmocka_unit_test(test_free_unjoined_context_never_calls_fn_and_aborts_once),
        cmocka_unit_test(test_free_finished_context_calls_no_abort),
        cmocka_unit_test(test_nprocs_zero_context_joins_at_once_and_frees_without_abort),
        cmocka_unit_test(test_ctx_is_busy_until_the_process_context_is_freed),
        cmocka_unit_test(test_join_on_another_thread_drives_the_rounds_there),
        cmocka_unit_test(test_join_timeout_is_checked_after_each_rounds_drain),
        cmocka_unit_test(test_ctx_used_between_joins_is_seen_by_the_next_round),
        cmocka_unit_test(test_hooks_get_ebusy_and_ranks_get_eperm_for_driver_calls),
        cmocka_unit_test(test_timed_join_hands_the_baton_as_kb_spawn_does),
        cmocka_unit_test(test_timed_join_returns_after_its_deadline_when_ranks_never_need_the_driver),
        cmocka_unit_test(test_timed_join_with_the_stall_watchdog_returns_after_its_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
