/* SPDX-License-Identifier: MIT */
/*
 * Allocation failure (through the KB_FAULT_ALLOC seam): for nth = 1, 2, ...
 * until the operation no longer reaches its nth allocation, the call returns
 * KB_ENOMEM (or succeeds), has no effect when it fails, leaks nothing (memcheck
 * run) and leaves the ctx working.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* This program links libkbthreads_fault: declare its seams. */
#define KB_FAULT_INJECTION 1
#include "fault.h"
#include "kbthreads.h"
#include "kbt_util.h"

#define MAX_NTH   100000
#define BATCH     1024
#define RANK_BULK 40

static int noop_rank(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    return 0;
}

/* A rank using every allocating call from inside a rank. Handles are fresh
 * per spawn (spawn_id). Any failure is returned as the rank's code. */
struct alloc_run {
    unsigned spawn_id;
    int fn_calls;
    int fn_ends;
    int bind_calls;
};

static void ar_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct alloc_run *)self)->bind_calls++;
}

static int alloc_rank(int rank, void *arg)
{
    struct alloc_run *a = arg;
    kb_ctx *ctx = kb_current_ctx();
    kb_handle base = ((kb_handle)a->spawn_id << 24) | ((kb_handle)(rank + 1) << 16);
    int rc;
    a->fn_calls++;
    /* Enough entries that the queues (and, in the drain, the completed set)
     * grow several times while ranks run. */
    for (kb_handle i = 0; i < RANK_BULK; i++) {
        if ((rc = kb_enqueue_wait(ctx, base + 0x1000 + i)) != 0)
            return rc;
        if ((rc = kb_collective_submit(ctx, base + 0x2000 + i, rank, NULL)) != 0)
            return rc;
        if ((rc = kb_complete(ctx, base + 0x3000 + i)) != 0)
            return rc;
    }
    if ((rc = kb_wait(ctx, base + 2)) != 0)
        return rc;
    if ((rc = kb_collective_submit(ctx, base + 3, rank, NULL)) != 0 || (rc = kb_wait(ctx, base + 3)) != 0)
        return rc;
    if ((rc = kb_complete(ctx, base + 4)) != 0 || (rc = kb_wait(ctx, base + 4)) != 0)
        return rc;
    if ((rc = kb_barrier()) != 0)
        return rc;
    if ((rc = kb_yield()) != 0)
        return rc;
    a->fn_ends++;
    return 0;
}

static kb_ctx *alloc_ctx(struct alloc_run *a)
{
    kb_engine eng = {.self = a, .wait = NULL, .bind = ar_bind, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    return ctx;
}

/* The ctx works: a clean spawn of the full program, queues empty after. */
static void assert_ctx_works(kb_ctx *ctx, struct alloc_run *a)
{
    a->spawn_id++;
    a->fn_calls = a->fn_ends = a->bind_calls = 0;
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, alloc_rank, a, 4, NULL, &err);
    if (rc != 0)
        fail_msg("clean spawn after a fault returned %d: %s", rc, kb_spawn_error_message(err));
    assert_int_equal(a->fn_ends, 4);
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
    assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 0);
}

static void test_ctx_create_alloc_failure_gives_enomem(void **state)
{
    (void)state;
    struct alloc_run a;
    memset(&a, 0, sizeof a);
    kb_engine eng = {.self = &a, .wait = NULL, .bind = ar_bind, .abort = NULL};
    int failures = 0;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        kb_ctx *ctx = NULL;
        kb__fault_arm(KB_FAULT_ALLOC, nth);
        int rc = kb_ctx_create(&eng, &ctx);
        long calls = kb__fault_calls(KB_FAULT_ALLOC);
        kb__fault_arm(KB_FAULT_ALLOC, 0);
        if (rc == KB_ENOMEM) {
            failures++;
            continue;
        }
        if (rc != 0)
            fail_msg("nth=%ld: kb_ctx_create returned %d", nth, rc);
        assert_non_null(ctx);
        assert_ctx_works(ctx, &a);
        assert_int_equal(kb_ctx_destroy(ctx), 0);
        if (calls < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    assert_true(failures >= 1);
}

static void test_spawn_alloc_failure_gives_enomem_or_a_report(void **state)
{
    (void)state;
    struct alloc_run a;
    memset(&a, 0, sizeof a);
    long before = kbt_thread_baseline();
    int enomem = 0, espawn = 0;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        /* A fresh ctx each time: its queues and completed set start small and
         * grow while the ranks run, so the in-rank calls meet the fault too. */
        kb_ctx *ctx = alloc_ctx(&a);
        a.spawn_id++;
        a.fn_calls = a.fn_ends = a.bind_calls = 0;
        kb_spawn_error *err = NULL;
        kb__fault_arm(KB_FAULT_ALLOC, nth);
        int rc = kb_spawn(ctx, alloc_rank, &a, 4, NULL, &err);
        long calls = kb__fault_calls(KB_FAULT_ALLOC);
        kb__fault_arm(KB_FAULT_ALLOC, 0);
        if (rc == 0) {
            assert_null(err);
            assert_int_equal(a.fn_ends, 4);
        } else if (rc == KB_ENOMEM) {
            /* Failed before any rank ran. */
            enomem++;
            assert_int_equal(a.fn_calls, 0);
            assert_int_equal(a.bind_calls, 0);
        } else if (rc == KB_ESPAWN) {
            /* A rank's own call ran out of memory and returned it. */
            espawn++;
            if (err == NULL)
                fail_msg("nth=%ld: KB_ESPAWN without a report", nth);
            size_t n = kb_spawn_error_count(err);
            int drain = kb_spawn_error_drain_code(err);
            if (n == 0 && drain == 0)
                fail_msg("nth=%ld: empty report: %s", nth, kb_spawn_error_message(err));
            if (drain != 0 && drain != KB_ENOMEM)
                fail_msg("nth=%ld: drain code %d", nth, drain);
            for (size_t i = 0; i < n; i++) {
                const kb_rank_error *e = kb_spawn_error_get(err, i);
                assert_non_null(e);
                assert_non_null(e->message);
                if (e->code != KB_ENOMEM)
                    fail_msg("nth=%ld: rank %d code %d, want KB_ENOMEM", nth, e->rank, e->code);
            }
            assert_non_null(kb_spawn_error_message(err));
        } else {
            fail_msg("nth=%ld: kb_spawn returned %d (%s)", nth, rc, kb_strerror(rc));
        }
        kb_spawn_error_free(err);
        /* Success drained the queues; failure cleared them. */
        assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
        assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 0);
        assert_ctx_works(ctx, &a);
        /* No thread beyond one parked per rank survives a failed spawn. */
        long t = kbt_settle_tasks(before + 4, 2000);
        if (t > before + 4)
            fail_msg("nth=%ld: %ld threads, %ld before the ctx", nth, t, before);
        assert_int_equal(kb_ctx_destroy(ctx), 0);
        if (calls < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    print_message("kb_spawn: %ld allocations, %d KB_ENOMEM, %d KB_ESPAWN\n", nth - 1, enomem, espawn);
    assert_true(enomem >= 1);
    assert_true(espawn >= 1); /* some fault hit a rank's own call */
    assert_true(kbt_settle_tasks(before, 3000) <= before);
}

static void test_start_alloc_failure_gives_enomem(void **state)
{
    (void)state;
    struct alloc_run a;
    memset(&a, 0, sizeof a);
    kb_ctx *ctx = alloc_ctx(&a);
    int enomem = 0;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        a.spawn_id++;
        a.fn_calls = a.fn_ends = a.bind_calls = 0;
        kb_process_context *pc = NULL;
        kb__fault_arm(KB_FAULT_ALLOC, nth);
        int rc = kb_start(ctx, alloc_rank, &a, 4, NULL, &pc);
        long calls = kb__fault_calls(KB_FAULT_ALLOC);
        kb__fault_arm(KB_FAULT_ALLOC, 0);
        if (rc == KB_ENOMEM) {
            enomem++;
            assert_int_equal(a.bind_calls, 0);
        } else if (rc == 0) {
            assert_int_equal(a.bind_calls, 4);
            assert_int_equal(kb_join(pc, -1, NULL), 1);
            assert_int_equal(a.fn_ends, 4);
            kb_process_context_free(pc);
        } else {
            fail_msg("nth=%ld: kb_start returned %d (%s)", nth, rc, kb_strerror(rc));
        }
        assert_int_equal(a.fn_calls, rc == 0 ? 4 : 0);
        assert_ctx_works(ctx, &a);
        if (calls < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    assert_true(enomem >= 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* Driver side, on an idle ctx: BATCH calls of one kind with the nth
 * allocation failing. The failing call returns KB_ENOMEM and is not applied;
 * every earlier one is. */
enum batch_op { OP_ENQUEUE, OP_SUBMIT, OP_COMPLETE };

static int batch_meta[BATCH];
static kb_handle got_w[BATCH];
static kb_collective got_c[BATCH];

static int batch_call(kb_ctx *ctx, enum batch_op op, int j, kb_handle h)
{
    switch (op) {
    case OP_ENQUEUE:
        return kb_enqueue_wait(ctx, h);
    case OP_SUBMIT:
        return kb_collective_submit(ctx, h, j, &batch_meta[j]);
    default:
        return kb_complete(ctx, h);
    }
}

/* A fresh ctx per nth, so every growth step of the queue or set is the one
 * that fails once. require_failure: the operation must report at least one
 * KB_ENOMEM over the loop (kb_complete need not: ck_hs grows its table
 * after inserting and then ignores a failed growth, so the call succeeds). */
static void batch_alloc_failure(enum batch_op op, int require_failure)
{
    struct alloc_run a;
    memset(&a, 0, sizeof a);
    int failures = 0;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        kb_ctx *ctx = alloc_ctx(&a);
        kb_handle base = (kb_handle)nth << 32;
        int ok = 0, rc = 0;
        kb__fault_arm(KB_FAULT_ALLOC, nth);
        for (int j = 0; j < BATCH; j++) {
            rc = batch_call(ctx, op, j, base + (kb_handle)j + 1);
            if (rc != 0)
                break;
            ok++;
        }
        long calls = kb__fault_calls(KB_FAULT_ALLOC);
        kb__fault_arm(KB_FAULT_ALLOC, 0);
        if (rc != 0) {
            if (rc != KB_ENOMEM)
                fail_msg("nth=%ld: call %d returned %d, want KB_ENOMEM", nth, ok, rc);
            failures++;
        }
        if (op == OP_ENQUEUE) {
            assert_int_equal(kb_pending_waits(ctx, got_w, BATCH), (size_t)ok);
            for (int j = 0; j < ok; j++)
                assert_int_equal(got_w[j], base + (kb_handle)j + 1);
        } else if (op == OP_SUBMIT) {
            assert_int_equal(kb_pending_collectives(ctx, got_c, BATCH), (size_t)ok);
            for (int j = 0; j < ok; j++) {
                assert_int_equal(got_c[j].handle, base + (kb_handle)j + 1);
                assert_int_equal(got_c[j].sip_id, j);
                assert_ptr_equal(got_c[j].meta, &batch_meta[j]);
            }
        } else {
            for (int j = 0; j < BATCH; j++)
                assert_int_equal(kb_is_completed(ctx, base + (kb_handle)j + 1), j < ok ? 1 : 0);
        }
        /* A one-rank spawn drains whatever was queued: then everything that
         * was accepted is completed, and the rejected one is not. */
        assert_int_equal(kb_spawn(ctx, noop_rank, NULL, 1, NULL, NULL), 0);
        assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
        assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 0);
        for (int j = 0; j < ok; j++)
            assert_int_equal(kb_is_completed(ctx, base + (kb_handle)j + 1), 1);
        if (rc != 0)
            assert_int_equal(kb_is_completed(ctx, base + (kb_handle)ok + 1), 0);
        assert_ctx_works(ctx, &a);
        assert_int_equal(kb_ctx_destroy(ctx), 0);
        if (calls < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    assert_true(nth > 2); /* the batch did reach several growth steps */
    if (require_failure)
        assert_true(failures >= 1);
}

static void test_enqueue_wait_alloc_failure_gives_enomem_and_no_entry(void **state)
{
    (void)state;
    batch_alloc_failure(OP_ENQUEUE, 1);
}

static void test_collective_submit_alloc_failure_gives_enomem_and_no_entry(void **state)
{
    (void)state;
    batch_alloc_failure(OP_SUBMIT, 1);
}

static void test_complete_under_alloc_failure_gives_enomem_or_marks(void **state)
{
    (void)state;
    batch_alloc_failure(OP_COMPLETE, 0);
}

/* A strict replay checks every round's live ranks against the recording;
 * that check allocates. When its allocation fails the spawn stops with
 * KB_ENOMEM and a report saying so, never with KB_EDIVERGED: running out
 * of memory is not the program leaving the recording. */
#define REPLAY_RANKS  3
#define REPLAY_YIELDS 2

static int yielding_rank(int rank, void *arg)
{
    (void)rank;
    int *calls = arg;
    (*calls)++;
    for (int i = 0; i < REPLAY_YIELDS; i++) {
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void test_replay_alloc_failure_gives_enomem_not_a_divergence(void **state)
{
    (void)state;
    char path[] = "/tmp/kb-fault-replay-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    /* REPLAY_YIELDS + 1 rounds, every rank live in each. */
    assert_int_equal(kbt_spit(path, "kbthreads-schedule 1\nnprocs 3\nschedule seeded 7\n"
                                    "round 1 2 0 1\nround 2 1 2 0\nround 3 0 2 1\nend ok\n"),
                     0);
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts o = {.replay_path = path};
    int calls = 0;
    assert_int_equal(kb_spawn(ctx, yielding_rank, &calls, REPLAY_RANKS, &o, NULL), 0);
    int midrun = 0;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        calls = 0;
        kb_spawn_error *err = NULL;
        kb__fault_arm(KB_FAULT_ALLOC, nth);
        int rc = kb_spawn(ctx, yielding_rank, &calls, REPLAY_RANKS, &o, &err);
        long seen = kb__fault_calls(KB_FAULT_ALLOC);
        kb__fault_arm(KB_FAULT_ALLOC, 0);
        if (rc == KB_EDIVERGED)
            fail_msg("nth=%ld: out of memory reported as a divergence: %s", nth, kb_spawn_error_message(err));
        if (rc != 0 && rc != KB_ENOMEM)
            fail_msg("nth=%ld: kb_spawn returned %d (%s)", nth, rc, kb_strerror(rc));
        if (rc == KB_ENOMEM && !err)
            assert_int_equal(calls, 0); /* before any rank ran: no report */
        if (rc == KB_ENOMEM && err) {   /* stopped once the ranks existed (calls: maybe none ran) */
            midrun++;
            assert_non_null(err);
            assert_int_equal(kb_spawn_error_code(err), KB_ENOMEM);
            assert_non_null(strstr(kb_spawn_error_message(err), "out of memory"));
            assert_int_equal(kb_spawn_error_live_count(err), REPLAY_RANKS);
        }
        kb_spawn_error_free(err);
        if (seen < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    assert_true(midrun >= 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    unlink(path);
}

/* A spawn with delays (kb_spawn_opts.delays, copied; KB_SCHED_DELAYS,
 * parsed): each allocation failing in turn gives KB_ENOMEM before any rank
 * ran, or a spawn that ran as it should. */
static void spawn_delays_under_alloc_failure(const kb_spawn_opts *o)
{
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int enomem = 0, calls;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        calls = 0;
        kb__fault_arm(KB_FAULT_ALLOC, nth);
        int rc = kb_spawn(ctx, yielding_rank, &calls, REPLAY_RANKS, o, NULL);
        long seen = kb__fault_calls(KB_FAULT_ALLOC);
        kb__fault_arm(KB_FAULT_ALLOC, 0);
        if (rc == KB_ENOMEM) {
            enomem++;
            assert_int_equal(calls, 0);
        } else if (rc != 0) {
            fail_msg("nth=%ld: kb_spawn returned %d (%s)", nth, rc, kb_strerror(rc));
        } else {
            assert_int_equal(calls, REPLAY_RANKS);
        }
        if (seen < nth)
            break;
    }
    assert_true(nth < MAX_NTH);
    assert_true(enomem >= 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_delays_alloc_failure_gives_enomem_before_any_rank_runs(void **state)
{
    (void)state;
    const uint64_t d[] = {1, 4, 4};
    kb_spawn_opts o = {.schedule = KB_SCHED_DELAYS, .delays = d, .ndelays = 3};
    spawn_delays_under_alloc_failure(&o);
    setenv("KB_SCHED_DELAYS", "1,4,4/2", 1);
    spawn_delays_under_alloc_failure(NULL);
    unsetenv("KB_SCHED_DELAYS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctx_create_alloc_failure_gives_enomem),
        cmocka_unit_test(test_spawn_alloc_failure_gives_enomem_or_a_report),
        cmocka_unit_test(test_start_alloc_failure_gives_enomem),
        cmocka_unit_test(test_enqueue_wait_alloc_failure_gives_enomem_and_no_entry),
        cmocka_unit_test(test_collective_submit_alloc_failure_gives_enomem_and_no_entry),
        cmocka_unit_test(test_complete_under_alloc_failure_gives_enomem_or_marks),
        cmocka_unit_test(test_replay_alloc_failure_gives_enomem_not_a_divergence),
        cmocka_unit_test(test_delays_alloc_failure_gives_enomem_before_any_rank_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
