/* SPDX-License-Identifier: MIT */
/*
 * Semantics: the drain (SEMANTICS.md rules 2 and 3; issue 2 "Semantics").
 * Expected traces are the normalised output of the oracle scenario named
 * above each (tests/oracle/sem_drain.py), unless marked "C only".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "fake_engine.h"

/* Engine callbacks: a drain that creates new work. */
struct sub {
    const char *name;
    int sip;
    const char *meta;
};

static int cb_enqueue(fe *f, kb_handle h, void *arg)
{
    (void)h;
    return kb_enqueue_wait(f->ctx, fe_h(arg));
}

static int cb_submit(fe *f, kb_handle h, void *arg)
{
    const struct sub *s = arg;
    (void)h;
    return kb_collective_submit(f->ctx, fe_h(s->name), s->sip, (void *)(uintptr_t)s->meta);
}

/* Rule 2: exactly one drain after every round, including the one in which
 * the last rank finishes. */
static void test_one_drain_after_every_round_including_the_last(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("e:0:0"), FE_Y, FE_ENQ("e:0:1"), FE_Y, FE_ENQ("e:0:2"), FE_END};
    static const fe_act p1[] = {FE_ENQ("e:1:0"), FE_Y, FE_ENQ("e:1:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_one_drain_after_every_round */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "start 1\n"
        "step 1 0\n"
        "step 1 1\n"
        "engine_wait e:0:0\n"
        "engine_wait e:1:0\n"
        "step 0 2\n"
        "step 0 3\n"
        "step 1 2\n"
        "end 1\n"
        "finally 1\n"
        "engine_wait e:0:1\n"
        "engine_wait e:1:1\n"
        "step 0 4\n"
        "end 0\n"
        "finally 0\n"
        "engine_wait e:0:2\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[e:0:0,e:0:1,e:0:2,e:1:0,e:1:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 2: the last drain also runs phase (b). */
static void test_drain_after_last_round_completes_collectives(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("c:last", 0, "m-last"), FE_END};
    static const fe_act p1[] = {FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_drain_after_last_round_collective */
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
        "main_wait c:last meta=m-last\n"
        "engine_wait c:last\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[c:last]\n"
        "spawn_end\n");
    fe_free(f);
}

static void old_entries(fe *f)
{
    assert_int_equal(kb_enqueue_wait(f->ctx, fe_h("old:w")), 0);
    assert_int_equal(kb_collective_submit(f->ctx, fe_h("old:c"), 7, "m-old"), 0);
}

/* Rule 2: nprocs=0 runs no round and no drain; queue entries left from
 * before stay. */
static void test_nprocs_zero_runs_no_round_no_drain_and_keeps_old_entries(void **state)
{
    (void)state;
    fe *f = fe_new();
    old_entries(f);
    assert_int_equal(fe_spawn_plans(f, NULL, 0, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_nprocs0_no_round_no_drain_keeps_entries */
        "spawn_begin nprocs=0\n"
        "spawn_return 0\n"
        "post ranks=[] pending_worker=[old:w] pending_coll=[old:c] completed=[]\n"
        "spawn_end\n");
    assert_int_equal(f->waits, 0);
    assert_int_equal(f->binds, 0);
    fe_free(f);
}

/* Rule 2: the kept entries are drained after the next spawn's first round. */
static void test_old_entries_are_drained_after_the_next_spawns_first_round(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    old_entries(f);
    assert_int_equal(fe_spawn_plans(f, NULL, 0, NULL), 0);
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_old_entries_drained_after_next_spawns_first_round */
        "spawn_begin nprocs=0\n"
        "spawn_return 0\n"
        "post ranks=[] pending_worker=[old:w] pending_coll=[old:c] completed=[]\n"
        "spawn_end\n"
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "engine_wait old:w\n"
        "main_wait old:c meta=m-old\n"
        "engine_wait old:c\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[old:c,old:w]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: phase (a) pops worker waits FIFO (enqueue order, not sorted). */
static void test_phase_a_is_fifo_not_sorted(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("q:3"), FE_ENQ("q:1"), FE_ENQ("q:2"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_phase_a_fifo_not_sorted */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "step 0 3\n"
        "engine_wait q:3\n"
        "engine_wait q:1\n"
        "engine_wait q:2\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[q:1,q:2,q:3]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: a handle queued several times is engine-waited once. */
static void test_handle_queued_twice_is_waited_once(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("d:1"), FE_ENQ("d:1"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("d:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_duplicate_waited_once */
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "start 1\n"
        "step 1 0\n"
        "wait_enqueue 1 d:1\n"
        "start 2\n"
        "step 2 0\n"
        "wait_enqueue 2 d:1\n"
        "engine_wait d:1\n"
        "end 0\n"
        "finally 0\n"
        "wait_done 1 d:1\n"
        "end 1\n"
        "finally 1\n"
        "wait_done 2 d:1\n"
        "end 2\n"
        "finally 2\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[d:1]\n"
        "spawn_end\n");
    assert_int_equal(f->waits, 1);
    fe_free(f);
}

/* Rule 3: a queued handle that is already completed is not waited. */
static void test_queued_handle_already_completed_is_not_waited(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_DONE("c:1"), FE_ENQ("c:1"), FE_ENQ("n:1"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_completed_handle_in_queue_not_waited */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "step 0 3\n"
        "engine_wait n:1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[c:1,n:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: (a) is emptied before (b) even when the collective was queued
 * first. */
static void test_phase_a_runs_before_phase_b_even_if_collective_queued_first(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("c:1", 0, "m1"), FE_ENQ("w:0"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("w:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_phase_a_before_b_collective_queued_first */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "start 1\n"
        "step 1 0\n"
        "wait_enqueue 1 w:1\n"
        "engine_wait w:0\n"
        "engine_wait w:1\n"
        "main_wait c:1 meta=m1\n"
        "engine_wait c:1\n"
        "end 0\n"
        "finally 0\n"
        "wait_done 1 w:1\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[c:1,w:0,w:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: phase (b) pops collectives FIFO and hands the engine their meta
 * through a driver-side wait. */
static void test_phase_b_is_fifo_and_passes_meta(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("c:2", 0, "m2"), FE_SUBMIT("c:1", 1, "m1"),
                                FE_SUBMIT("c:3", 2, "m3"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_phase_b_fifo_with_meta */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "step 0 3\n"
        "main_wait c:2 meta=m2\n"
        "engine_wait c:2\n"
        "main_wait c:1 meta=m1\n"
        "engine_wait c:1\n"
        "main_wait c:3 meta=m3\n"
        "engine_wait c:3\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[c:1,c:2,c:3]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: phase (b) takes the fast path (no engine call) for a handle
 * phase (a) completed. */
static void test_phase_b_skips_engine_for_handle_phase_a_completed(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("x:1", 0, "mx"), FE_Y, FE_END};
    static const fe_act p1[] = {FE_W("x:1"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_phase_b_fast_when_phase_a_completed_it */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "start 1\n"
        "step 1 0\n"
        "wait_enqueue 1 x:1\n"
        "engine_wait x:1\n"
        "end 0\n"
        "finally 0\n"
        "wait_done 1 x:1\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[x:1]\n"
        "spawn_end\n");
    assert_int_equal(f->waits, 1);
    fe_free(f);
}

/* Rule 3: the drain loops when the engine's wait queues a worker wait
 * during phase (a). */
static void test_drain_loops_when_engine_enqueues_wait_in_phase_a(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("a:1"), FE_ENQ("a:3"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    fe_on_wait(f, "a:1", cb_enqueue, "a:2");
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_loop_engine_enqueues_wait_in_phase_a */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "engine_wait a:1\n"
        "engine_wait a:3\n"
        "engine_wait a:2\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[a:1,a:2,a:3]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: a collective submitted by the engine during phase (a) is
 * completed by phase (b) of the same drain, after the older one. */
static void test_drain_completes_collective_engine_submits_in_phase_a(void **state)
{
    (void)state;
    static const struct sub s = {"c:new", 5, "m-new"};
    static const fe_act p0[] = {FE_SUBMIT("c:old", 4, "m-old"), FE_ENQ("a:1"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    fe_on_wait(f, "a:1", cb_submit, (void *)(uintptr_t)&s);
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_loop_engine_submits_collective_in_phase_a */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "engine_wait a:1\n"
        "main_wait c:old meta=m-old\n"
        "engine_wait c:old\n"
        "main_wait c:new meta=m-new\n"
        "engine_wait c:new\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[a:1,c:new,c:old]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: a worker wait the engine queues during phase (b) is waited after
 * phase (b) is empty, in another pass of the same drain. */
static void test_drain_loops_when_engine_enqueues_wait_in_phase_b(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("c:1", 0, "m1"), FE_SUBMIT("c:2", 1, "m2"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    fe_on_wait(f, "c:1", cb_enqueue, "w:late");
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_loop_engine_enqueues_wait_in_phase_b */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "main_wait c:1 meta=m1\n"
        "engine_wait c:1\n"
        "main_wait c:2 meta=m2\n"
        "engine_wait c:2\n"
        "engine_wait w:late\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[c:1,c:2,w:late]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: loop until both queues are empty through a chain of new work
 * (a -> b -> a -> b, the last one already completed: fast path). */
static void test_drain_loops_until_both_queues_are_empty(void **state)
{
    (void)state;
    static const struct sub k2 = {"k:2", 1, "m2"}, k4 = {"k:4", 2, "m4"};
    static const fe_act p0[] = {FE_ENQ("k:1"), FE_W("k:4"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    fe_on_wait(f, "k:1", cb_submit, (void *)(uintptr_t)&k2);
    fe_on_wait(f, "k:2", cb_enqueue, "k:3");
    fe_on_wait(f, "k:3", cb_submit, (void *)(uintptr_t)&k4);
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_loop_chain_until_both_empty */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "wait_enqueue 0 k:4\n"
        "engine_wait k:1\n"
        "engine_wait k:4\n"
        "main_wait k:2 meta=m2\n"
        "engine_wait k:2\n"
        "engine_wait k:3\n"
        "wait_done 0 k:4\n"
        "step 0 2\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[k:1,k:2,k:3,k:4]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: a worker wait completed by a later rank in the same round is not
 * engine-waited by the drain; the waiter resumes in the next round. */
static void test_wait_completed_later_in_the_round_is_not_engine_waited(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_W("s:1"), FE_END};
    static const fe_act p1[] = {FE_DONE("s:1"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_wait_completed_by_later_rank_same_round_not_waited */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "wait_enqueue 0 s:1\n"
        "start 1\n"
        "step 1 0\n"
        "step 1 1\n"
        "wait_done 0 s:1\n"
        "end 0\n"
        "finally 0\n"
        "end 1\n"
        "finally 1\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[s:1]\n"
        "spawn_end\n");
    assert_int_equal(f->waits, 0);
    fe_free(f);
}

/* Rule 3: a collective whose handle is already completed takes phase (b)'s
 * fast path. */
static void test_collective_already_completed_is_not_engine_waited(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_DONE("cc:1"), FE_SUBMIT("cc:1", 0, "mcc"), FE_SUBMIT("cc:2", 1, "mcc2"),
                                FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_collective_already_completed_not_waited */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "step 0 3\n"
        "main_wait cc:2 meta=mcc2\n"
        "engine_wait cc:2\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[cc:1,cc:2]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Rule 3: handles the engine completes from inside its wait (kb_complete,
 * or a driver-side kb_wait) are skipped when phase (a) reaches them. */
static int cb_complete_and_wait(fe *f, kb_handle h, void *arg)
{
    (void)h;
    (void)arg;
    int rc = kb_complete(f->ctx, fe_h("z:2"));
    if (rc != 0)
        return rc;
    return fe_driver_wait(f, fe_h("z:3"), NULL);
}

static void test_handles_the_engine_completes_meanwhile_are_skipped(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("z:1"), FE_ENQ("z:2"), FE_ENQ("z:3"), FE_ENQ("z:4"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    fe_on_wait(f, "z:1", cb_complete_and_wait, NULL);
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_engine_completing_queued_handles_skips_them */
        "spawn_begin nprocs=1\n"
        "bind 0\n"
        "start 0\n"
        "step 0 0\n"
        "step 0 1\n"
        "step 0 2\n"
        "step 0 3\n"
        "step 0 4\n"
        "engine_wait z:1\n"
        "driver_wait z:3\n"
        "main_wait z:3 meta=None\n"
        "engine_wait z:3\n"
        "engine_wait z:4\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[z:1,z:2,z:3,z:4]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Work the bind hook queues (before any rank runs) is drained after
 * round 1. */
static void bind_enqueue(fe *f, int rank)
{
    char name[32];
    snprintf(name, sizeof name, "bind:%d", rank);
    int rc = kb_enqueue_wait(f->ctx, fe_h(name));
    if (rc != 0)
        tr_add("bind_enqueue_rc %s", fe_code(rc));
}

static void test_work_queued_by_the_bind_hook_is_drained_after_round_one(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_END};
    static const fe_act p1[] = {FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    f->on_bind = bind_enqueue;
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert(
        /* oracle: sem_drain.py::s_bind_hook_enqueued_work_drained_after_round_one */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
        "start 0\n"
        "step 0 0\n"
        "start 1\n"
        "end 1\n"
        "finally 1\n"
        "engine_wait bind:0\n"
        "engine_wait bind:1\n"
        "end 0\n"
        "finally 0\n"
        "spawn_return 0\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[bind:0,bind:1]\n"
        "spawn_end\n");
    fe_free(f);
}

/* Work the abort hook queues is discarded with the rest (the queues are
 * cleared after the abort). */
static void abort_enqueue(fe *f)
{
    int rc = kb_enqueue_wait(f->ctx, fe_h("abort:w"));
    if (rc == 0)
        rc = kb_collective_submit(f->ctx, fe_h("abort:c"), 9, "ma");
    if (rc != 0)
        tr_add("abort_enqueue_rc %s", fe_code(rc));
}

static void test_work_queued_by_the_abort_hook_is_cleared(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_Y, FE_END};
    static const fe_act p1[] = {FE_RAISE(5, "r1 fails"), FE_END};
    static const fe_act *const plans[] = {p0, p1};
    fe *f = fe_new();
    f->on_abort = abort_enqueue;
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), KB_ESPAWN);
    tr_assert(
        /* oracle: sem_drain.py::s_abort_hook_enqueued_work_is_cleared */
        "spawn_begin nprocs=2\n"
        "bind 0\n"
        "bind 1\n"
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
        "error_entry 1 code=5 msg=r1 fails\n"
        "error_msg spawn failed on ranks [1]: rank 1 raised code 5: r1 fails\n"
        "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

/* C only: the engine's wait learns why it is called: KB_WAIT_QUEUED (no
 * meta) in phase (a), KB_WAIT_COLLECTIVE with the collective's meta in
 * phase (b). */
static void test_drain_tells_engine_the_origin_of_each_wait(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_SUBMIT("o:c", 3, "m-c"), FE_ENQ("o:q"), FE_Y, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    f->trace_origin = 1;
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert("spawn_begin nprocs=1\n"
              "bind 0\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "step 0 2\n"
              "engine_wait o:q origin=queued meta=None\n"
              "main_wait o:c meta=m-c\n"
              "engine_wait o:c origin=collective meta=m-c\n"
              "end 0\n"
              "finally 0\n"
              "spawn_return 0\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[o:c,o:q]\n"
              "spawn_end\n");
    assert_int_equal(f->nlog, 2);
    assert_int_equal(f->log[1].origin, KB_WAIT_COLLECTIVE);
    assert_string_equal((const char *)f->log[1].meta, "m-c");
    assert_null(f->log[0].meta);
    fe_free(f);
}

/* C only (the reference's engine without wait): with no engine at all,
 * every handle completes as soon as the drain reaches it. */
static int null_engine_body(int rank, void *arg)
{
    kb_ctx *ctx = arg;
    kb_handle h = fe_h("nul:1"), c = fe_h("nul:c");
    tr_add("r%d wait %d", rank, kb_wait(ctx, h));
    tr_add("r%d submit %d", rank, kb_collective_submit(ctx, c, 0, NULL));
    tr_add("r%d yield %d", rank, kb_yield());
    tr_add("r%d completed %d %d", rank, kb_is_completed(ctx, h), kb_is_completed(ctx, c));
    return 0;
}

static void test_null_engine_completes_handles_when_the_drain_reaches_them(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    tr_reset();
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, null_engine_body, ctx, 2, NULL, NULL), 0);
    tr_assert("r0 wait 0\n" /* both waits resume in round 2 */
              "r0 submit 0\n"
              "r1 wait 0\n"
              "r1 submit 0\n"
              "r0 yield 0\n"
              "r0 completed 1 1\n"
              "r1 yield 0\n"
              "r1 completed 1 1\n");
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
    assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_drain_after_every_round_including_the_last),
        cmocka_unit_test(test_drain_after_last_round_completes_collectives),
        cmocka_unit_test(test_nprocs_zero_runs_no_round_no_drain_and_keeps_old_entries),
        cmocka_unit_test(test_old_entries_are_drained_after_the_next_spawns_first_round),
        cmocka_unit_test(test_phase_a_is_fifo_not_sorted),
        cmocka_unit_test(test_handle_queued_twice_is_waited_once),
        cmocka_unit_test(test_queued_handle_already_completed_is_not_waited),
        cmocka_unit_test(test_phase_a_runs_before_phase_b_even_if_collective_queued_first),
        cmocka_unit_test(test_phase_b_is_fifo_and_passes_meta),
        cmocka_unit_test(test_phase_b_skips_engine_for_handle_phase_a_completed),
        cmocka_unit_test(test_drain_loops_when_engine_enqueues_wait_in_phase_a),
        cmocka_unit_test(test_drain_completes_collective_engine_submits_in_phase_a),
        cmocka_unit_test(test_drain_loops_when_engine_enqueues_wait_in_phase_b),
        cmocka_unit_test(test_drain_loops_until_both_queues_are_empty),
        cmocka_unit_test(test_wait_completed_later_in_the_round_is_not_engine_waited),
        cmocka_unit_test(test_collective_already_completed_is_not_engine_waited),
        cmocka_unit_test(test_handles_the_engine_completes_meanwhile_are_skipped),
        cmocka_unit_test(test_work_queued_by_the_bind_hook_is_drained_after_round_one),
        cmocka_unit_test(test_work_queued_by_the_abort_hook_is_cleared),
        cmocka_unit_test(test_drain_tells_engine_the_origin_of_each_wait),
        cmocka_unit_test(test_null_engine_completes_handles_when_the_drain_reaches_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
