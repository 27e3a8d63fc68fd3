/* SPDX-License-Identifier: MIT */
/*
 * Fault injection over a representative program, SQLite style: for each
 * fault kind (allocation, thread creation, synchronisation-object setup) and
 * n = 1, 2, ... until the program no longer reaches an n-th call of that
 * kind, run the whole program with the n-th call failing. Each step must
 * return its documented result or a documented error; afterwards no
 * allocation made by the library is still live (exact accounting through
 * --wrap=malloc..., and memcheck's leak check on the Valgrind run), no
 * thread is left once the ctx is destroyed (/proc/self/task; while it lives
 * it keeps at most one parked thread per rank), and the ctx still runs a
 * clean spawn identical to the fault-free one.
 *
 * The program: kb_ctx_create; driver-side kb_complete / kb_enqueue_wait /
 * kb_collective_submit; a 4-rank spawn with fresh and completed waits,
 * kb_enqueue_wait, an all-reduce through kb_collective_submit, a barrier
 * and an engine wait that queues new work; a RETURN-mode spawn in which
 * rank 2 raises after the barrier and the siblings are cancelled; an
 * UNWIND-mode spawn whose drain fails; a max_rounds spawn; kb_start with
 * kb_join(0), kb_join(5 ms), kb_join(-1) and kb_process_context_free; a
 * kb_start freed while its ranks are live; then the clean spawn and
 * kb_ctx_destroy.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* This program links libkbthreads_fault: declare its seams (CMake defines
 * KB_FAULT_INJECTION for it). */
#ifndef KB_FAULT_INJECTION
#define KB_FAULT_INJECTION 1
#endif
#include "fault.h"
#include "kbthreads.h"
#include "kbt_util.h"
#include "rel_alloc_acct.h"

#define NPROCS      4
#define MAX_NTH     100000
#define H_PRE_DONE  ((kb_handle)100)
#define H_PRE_QUEUE ((kb_handle)101)
#define H_PRE_COLL  ((kb_handle)102)
#define H_MORE      ((kb_handle)103) /* the engine's wait for it queues H_EXTRA */
#define H_EXTRA     ((kb_handle)104)
#define H_DRAIN_BAD ((kb_handle)105) /* the engine's wait for it fails */
#define H_COLL_BASE ((kb_handle)0x1000)
#define H_RANK_BASE ((kb_handle)0x2000)
#define DRAIN_CODE  77
#define RAISE_CODE  5

/* ---- the program ------------------------------------------------------------ */

struct prog {
    kb_ctx *ctx;
    int step;       /* which spawn: handles are fresh per step */
    int raise_rank; /* -1: none */
    int drain_rank; /* -1: none; else waits on H_DRAIN_BAD */
    int yields;     /* extra yields at the end of the body */
    int arrived;    /* the all-reduce */
    int issued;
    int fn_calls;      /* rank functions called */
    int fn_ends;       /* rank functions that reached their end */
    int binds, aborts; /* engine hooks */
    int cleanups;      /* cleanup handlers run */
};

static int hook_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    struct prog *P = self;
    (void)meta;
    (void)origin;
    if (h == H_DRAIN_BAD)
        return DRAIN_CODE;
    if (h == H_MORE)
        return kb_enqueue_wait(P->ctx, H_EXTRA + (kb_handle)P->step * 0x10000);
    return 0;
}

static void hook_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct prog *)self)->binds++;
}

static void hook_abort(void *self, kb_ctx *ctx)
{
    (void)ctx;
    ((struct prog *)self)->aborts++;
}

static void rank_cleanup(void *arg)
{
    struct prog *P = arg;
    P->cleanups++;
    /* library calls from a cleanup handler: KB_ECANCELED at once */
    (void)kb_yield();
}

/* Any result a rank does not expect is returned as its failure code. */
static int rank_body(struct prog *P, int rank)
{
    kb_ctx *ctx = kb_current_ctx();
    kb_handle own = H_RANK_BASE + (kb_handle)P->step * 0x100 + (kb_handle)rank;
    kb_handle coll = H_COLL_BASE + (kb_handle)P->step;
    int rc;
    if ((rc = kb_wait(ctx, own)) != 0) /* fresh: enqueued, drained */
        return rc;
    if ((rc = kb_wait(ctx, own)) != 0) /* completed: the fast path */
        return rc;
    if ((rc = kb_enqueue_wait(ctx, own + 0x80)) != 0)
        return rc;
    if (rank == 0 && (rc = kb_enqueue_wait(ctx, H_MORE + (kb_handle)P->step * 0x10000)) != 0)
        return rc;
    /* enough entries that the queues and the completed set grow */
    for (kb_handle i = 0; rank == 0 && i < 40; i++)
        if ((rc = kb_enqueue_wait(ctx, own + 0x1000 + i)) != 0)
            return rc;
    for (kb_handle i = 0; rank == 1 && i < 20; i++)
        if ((rc = kb_collective_submit(ctx, own + 0x2000 + i, rank, "bulk")) != 0)
            return rc;
    if (rank == P->drain_rank && (rc = kb_wait(ctx, H_DRAIN_BAD)) != 0)
        return rc;
    /* the all-reduce */
    if (++P->arrived == NPROCS) {
        if ((rc = kb_collective_submit(ctx, coll, rank, "ar")) != 0)
            return rc;
        P->issued = 1;
    } else {
        while (!P->issued)
            if ((rc = kb_yield()) != 0)
                return rc;
    }
    if ((rc = kb_wait(ctx, coll)) != 0)
        return rc;
    if ((rc = kb_barrier()) != 0)
        return rc;
    if (rank == P->raise_rank)
        kb_raise(RAISE_CODE, "rank %d raises at step %d", rank, P->step);
    for (int i = 0; i < P->yields; i++)
        if ((rc = kb_yield()) != 0)
            return rc;
    P->fn_ends++;
    return 0;
}

static int rank_fn(int rank, void *arg)
{
    struct prog *P = arg;
    int rc;
    P->fn_calls++;
    pthread_cleanup_push(rank_cleanup, P);
    rc = rank_body(P, rank);
    pthread_cleanup_pop(0);
    return rc;
}

static void prepare(struct prog *P, int raise_rank, int drain_rank, int yields)
{
    P->step++;
    P->raise_rank = raise_rank;
    P->drain_rank = drain_rank;
    P->yields = yields;
    P->arrived = P->issued = 0;
    P->fn_calls = P->fn_ends = P->binds = P->aborts = P->cleanups = 0;
}

/* ---- checks ------------------------------------------------------------------- */

struct fault_run {
    enum kb_fault_kind kind;
    long nth;
    long threads0;   /* threads before the ctx */
    int faults_seen; /* steps that returned an error because of the fault */
};

#define CHECK(R, cond, ...)                                                                                  \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            print_message("fault kind %d, nth %ld: ", (int)(R)->kind, (R)->nth);                             \
            fail_msg(__VA_ARGS__);                                                                           \
        }                                                                                                    \
    } while (0)

static int resource_error(int rc)
{
    return rc == KB_ENOMEM || rc == KB_EAGAIN;
}

/* A spawn that failed before any rank ran left nothing behind. */
static void check_not_started(struct fault_run *R, struct prog *P, const char *what, int rc)
{
    CHECK(R, resource_error(rc), "%s returned %d (%s)", what, rc, kb_strerror(rc));
    CHECK(R, P->fn_calls == 0 && P->binds == 0 && P->aborts == 0, "%s: %d rank(s) ran, %d bound after %d",
          what, P->fn_calls, P->binds, rc);
    R->faults_seen++;
}

/* A KB_ESPAWN report: the expected causes, or out-of-memory ones. err may be
 * NULL only when allocations fail (the report itself could not be made). */
static void check_report(struct fault_run *R, const char *what, const kb_spawn_error *err, int allow_raise,
                         int allow_drain)
{
    if (!err) {
        CHECK(R, R->kind == KB_FAULT_ALLOC, "%s: KB_ESPAWN without a report", what);
        return;
    }
    size_t n = kb_spawn_error_count(err);
    int dc = kb_spawn_error_drain_code(err);
    CHECK(R, n > 0 || dc != 0, "%s: a report without a cause: %s", what, kb_spawn_error_message(err));
    CHECK(R, dc == 0 || dc == KB_ENOMEM || (allow_drain && dc == DRAIN_CODE), "%s: drain code %d", what, dc);
    for (size_t i = 0; i < n; i++) {
        const kb_rank_error *e = kb_spawn_error_get(err, i);
        CHECK(R, e && e->message, "%s: entry %zu missing", what, i);
        CHECK(R, e->code == KB_ENOMEM || (allow_raise && e->code == RAISE_CODE && e->rank == 2),
              "%s: rank %d failed with %d: %s", what, e->rank, e->code, e->message);
    }
    CHECK(R, kb_spawn_error_message(err) != NULL, "%s: no message", what);
}

static void check_threads(struct fault_run *R, const char *what)
{
    long t = kbt_settle_tasks(R->threads0 + NPROCS, 2000);
    CHECK(R, t <= R->threads0 + NPROCS, "after %s: %ld threads, %ld before the ctx", what, t, R->threads0);
}

static void check_queues_empty(struct fault_run *R, struct prog *P, const char *what)
{
    size_t w = kb_pending_waits(P->ctx, NULL, 0), c = kb_pending_collectives(P->ctx, NULL, 0);
    CHECK(R, w == 0 && c == 0, "after %s: %zu waits and %zu collectives pending", what, w, c);
}

/* ---- the steps ------------------------------------------------------------------ */

static char record_path[64], trace_path[64];

/* Spawn 1 also records its schedule, writes a timeline and fills stats. */
static void step_spawn_ok(struct fault_run *R, struct prog *P)
{
    prepare(P, -1, -1, 2);
    uint64_t turns[NPROCS], cpu[NPROCS];
    kb_spawn_stats st = {.rank_turns = turns, .rank_cpu_ns = cpu, .rank_cap = NPROCS};
    kb_spawn_opts o = {.record_path = record_path, .trace_path = trace_path, .stats = &st};
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(P->ctx, rank_fn, P, NPROCS, &o, &err);
    if (rc == 0) {
        CHECK(R, err == NULL && P->fn_ends == NPROCS, "spawn 1: %d of %d ranks ended", P->fn_ends, NPROCS);
    } else if (rc == KB_ESPAWN) {
        check_report(R, "spawn 1", err, 0, 0);
        R->faults_seen++;
    } else {
        check_not_started(R, P, "spawn 1", rc);
    }
    if (rc == 0 || rc == KB_ESPAWN)
        check_queues_empty(R, P, "spawn 1");
    kb_spawn_error_free(err);
    check_threads(R, "spawn 1");
}

static void step_spawn_raise(struct fault_run *R, struct prog *P)
{
    prepare(P, 2, -1, 1);
    kb_spawn_opts o = {.cancel_mode = KB_CANCEL_RETURN};
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(P->ctx, rank_fn, P, NPROCS, &o, &err);
    if (rc == KB_ESPAWN) {
        check_report(R, "spawn 2", err, 1, 0);
        /* without the fault: exactly rank 2's raise, siblings absorbed their cancellation */
        if (err && kb_spawn_error_count(err) == 1 && kb_spawn_error_get(err, 0)->code == RAISE_CODE)
            CHECK(R, P->aborts == 1, "spawn 2: abort ran %d times", P->aborts);
        else
            R->faults_seen++;
        check_queues_empty(R, P, "spawn 2");
    } else {
        CHECK(R, rc != 0, "spawn 2 succeeded although rank 2 raises");
        check_not_started(R, P, "spawn 2", rc);
    }
    kb_spawn_error_free(err);
    check_threads(R, "spawn 2");
}

static void step_spawn_drain_fails(struct fault_run *R, struct prog *P)
{
    prepare(P, -1, 1, 0);
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(P->ctx, rank_fn, P, NPROCS, NULL, &err); /* UNWIND */
    if (rc == KB_ESPAWN) {
        check_report(R, "spawn 3", err, 0, 1);
        if (!err || kb_spawn_error_drain_code(err) != DRAIN_CODE)
            R->faults_seen++;
        check_queues_empty(R, P, "spawn 3");
    } else {
        CHECK(R, rc != 0, "spawn 3 succeeded although its drain fails");
        check_not_started(R, P, "spawn 3", rc);
    }
    kb_spawn_error_free(err);
    check_threads(R, "spawn 3");
}

static void step_spawn_max_rounds(struct fault_run *R, struct prog *P)
{
    prepare(P, -1, -1, 50);
    kb_spawn_opts o = {.max_rounds = 4};
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(P->ctx, rank_fn, P, NPROCS, &o, &err);
    if (rc == KB_ETIMEDOUT) {
        CHECK(R, err != NULL || R->kind == KB_FAULT_ALLOC, "spawn 4: KB_ETIMEDOUT without a report");
        if (err) {
            size_t live = kb_spawn_error_live_count(err);
            CHECK(R, live == NPROCS || (R->kind == KB_FAULT_ALLOC && live == 0), "spawn 4: %zu live ranks",
                  live);
            for (size_t i = 0; i < kb_spawn_error_count(err); i++)
                CHECK(R, kb_spawn_error_get(err, i)->code == KB_ENOMEM, "spawn 4: rank %d code %d",
                      kb_spawn_error_get(err, i)->rank, kb_spawn_error_get(err, i)->code);
        }
        check_queues_empty(R, P, "spawn 4");
    } else if (rc == KB_ESPAWN) {
        check_report(R, "spawn 4", err, 0, 0);
        R->faults_seen++;
        check_queues_empty(R, P, "spawn 4");
    } else {
        CHECK(R, rc != 0, "spawn 4 succeeded although max_rounds stops it");
        check_not_started(R, P, "spawn 4", rc);
    }
    kb_spawn_error_free(err);
    check_threads(R, "spawn 4");
}

/* Spawn 1 again, replaying its recording: the same schedule, or (when the
 * fault cut spawn 1 short or kept its recording from being written) a
 * documented refusal. */
static void step_spawn_replay(struct fault_run *R, struct prog *P)
{
    prepare(P, -1, -1, 2);
    kb_spawn_opts o = {.replay_path = record_path};
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(P->ctx, rank_fn, P, NPROCS, &o, &err);
    if (rc == 0) {
        CHECK(R, P->fn_ends == NPROCS, "replay: %d of %d ranks ended", P->fn_ends, NPROCS);
    } else if (rc == KB_ESPAWN) {
        check_report(R, "replay", err, 0, 0);
        R->faults_seen++;
    } else if (rc == KB_EDIVERGED || rc == KB_EINVAL || rc == -ENOENT) {
        /* the recording is short, truncated or missing: no rank may have
         * run past a divergence unnoticed */
        CHECK(R, R->faults_seen > 0, "replay of a fault-free recording returned %d", rc);
        R->faults_seen++;
    } else if (rc == KB_ENOMEM && P->binds > 0) {
        /* checking a round against the recording ran out of memory once
         * the ranks were bound: the spawn stopped as out of memory (engine
         * aborted, queues cleared), never as a divergence */
        CHECK(R, R->kind == KB_FAULT_ALLOC, "replay: KB_ENOMEM after ranks ran without an allocation fault");
        CHECK(R, !err || kb_spawn_error_code(err) == KB_ENOMEM, "replay: KB_ENOMEM with a report of code %d",
              kb_spawn_error_code(err));
        R->faults_seen++;
    } else {
        check_not_started(R, P, "replay", rc);
    }
    if (rc == 0 || rc == KB_ESPAWN || rc == KB_EDIVERGED || rc == KB_ENOMEM)
        check_queues_empty(R, P, "replay");
    kb_spawn_error_free(err);
    check_threads(R, "replay");
}

/* kb_start, then kb_join calls; free_live: free after the first join. */
static void step_start(struct fault_run *R, struct prog *P, int free_live)
{
    const char *what = free_live ? "start 6" : "start 5";
    prepare(P, -1, -1, 3);
    kb_process_context *pc = NULL;
    int rc = kb_start(P->ctx, rank_fn, P, NPROCS, NULL, &pc);
    if (rc != 0) {
        check_not_started(R, P, what, rc);
        CHECK(R, pc == NULL, "%s: a process context after %d", what, rc);
        check_threads(R, what);
        return;
    }
    CHECK(R, P->binds == NPROCS && P->fn_calls == 0, "%s: %d bound, %d ran before kb_join", what, P->binds,
          P->fn_calls);
    static const long timeouts[] = {0, 5, -1};
    int last = 0;
    for (int j = 0; j < (free_live ? 1 : 3); j++) {
        kb_spawn_error *err = NULL;
        rc = kb_join(pc, timeouts[j], &err);
        if (rc == KB_ESPAWN) {
            check_report(R, what, err, 0, 0);
            R->faults_seen++;
        } else {
            CHECK(R, rc == 0 || rc == 1, "%s: kb_join(%ld) returned %d", what, timeouts[j], rc);
            CHECK(R, timeouts[j] >= 0 || rc == 1, "%s: kb_join(-1) returned %d", what, rc);
        }
        kb_spawn_error_free(err);
        last = rc;
        if (rc != 0)
            break;
    }
    if (!free_live && last == 1)
        CHECK(R, P->fn_ends == NPROCS, "%s: %d of %d ranks ended", what, P->fn_ends, NPROCS);
    kb_process_context_free(pc);
    check_queues_empty(R, P, what);
    check_threads(R, what);
}

/* Run the program with the nth call of kind failing. Returns how many calls
 * of that kind it made. */
static long run_program(struct fault_run *R, const kb_engine *eng_tpl)
{
    struct prog P;
    memset(&P, 0, sizeof P);
    kb_engine eng = *eng_tpl;
    eng.self = &P;
    kb__fault_arm(R->kind, R->nth);
    int rc = kb_ctx_create(&eng, &P.ctx);
    if (rc != 0) {
        long calls = kb__fault_calls(R->kind);
        kb__fault_arm(R->kind, 0);
        CHECK(R, rc == KB_ENOMEM && P.ctx == NULL, "kb_ctx_create returned %d", rc);
        R->faults_seen++;
        return calls;
    }
    /* driver-side calls on the idle ctx */
    const kb_handle hs[3] = {H_PRE_DONE, H_PRE_QUEUE, H_PRE_COLL};
    for (int i = 0; i < 3; i++) {
        rc = i == 0   ? kb_complete(P.ctx, hs[i])
             : i == 1 ? kb_enqueue_wait(P.ctx, hs[i])
                      : kb_collective_submit(P.ctx, hs[i], 7, "pre");
        CHECK(R, rc == 0 || rc == KB_ENOMEM, "driver call %d returned %d", i, rc);
        R->faults_seen += rc != 0;
    }
    for (kb_handle h = 0; h < 100; h++) { /* the completed set grows */
        rc = kb_complete(P.ctx, H_RANK_BASE + 0x100000 + h);
        CHECK(R, rc == 0 || rc == KB_ENOMEM, "kb_complete returned %d", rc);
    }
    unlink(record_path);
    unlink(trace_path);
    step_spawn_ok(R, &P);
    step_spawn_replay(R, &P);
    step_spawn_raise(R, &P);
    step_spawn_drain_fails(R, &P);
    step_spawn_max_rounds(R, &P);
    step_start(R, &P, 0);
    step_start(R, &P, 1);
    long calls = kb__fault_calls(R->kind);
    kb__fault_arm(R->kind, 0);

    /* the ctx still works: a clean spawn of the first program */
    prepare(&P, -1, -1, 2);
    kb_spawn_error *err = NULL;
    rc = kb_spawn(P.ctx, rank_fn, &P, NPROCS, NULL, &err);
    CHECK(R, rc == 0 && P.fn_ends == NPROCS && P.binds == NPROCS && P.aborts == 0,
          "clean spawn after the fault: %d (%s), %d ranks ended", rc, kb_spawn_error_message(err), P.fn_ends);
    check_queues_empty(R, &P, "the clean spawn");
    CHECK(R, kb_is_completed(P.ctx, H_PRE_DONE) == 1, "a completed handle was forgotten");
    kb_spawn_error_free(err);
    CHECK(R, kb_ctx_destroy(P.ctx) == 0, "kb_ctx_destroy failed");
    return calls;
}

static void fault_loop(enum kb_fault_kind kind, const char *name)
{
    kb_engine eng = {.self = NULL, .wait = hook_wait, .bind = hook_bind, .abort = hook_abort};
    struct fault_run R;
    memset(&R, 0, sizeof R);
    R.kind = kind;
    /* one fault-free run first: lazy one-time allocations (stdio, TLS) */
    R.nth = 0;
    R.threads0 = kbt_thread_baseline();
    run_program(&R, &eng);
    long threads0 = kbt_settle_tasks(R.threads0, 3000);
    long live0 = rel_acct_live();
    size_t bytes0 = rel_acct_bytes();
    long points = 0, runs = 0;
    long nth;
    for (nth = 1; nth < MAX_NTH; nth++) {
        R.nth = nth;
        R.threads0 = threads0;
        long calls = run_program(&R, &eng);
        runs++;
        /* nothing the library allocated is still live, no thread is left */
        long live = rel_acct_live();
        CHECK(&R, live == live0, "%ld blocks (%zu bytes) live after the run, %ld (%zu) before", live,
              rel_acct_bytes(), live0, bytes0);
        long t = kbt_settle_tasks(threads0, 3000);
        CHECK(&R, t <= threads0, "%ld threads after kb_ctx_destroy, %ld before", t, threads0);
        if (calls < nth)
            break;
        points = nth;
    }
    assert_true(nth < MAX_NTH);
    print_message("%s: %ld failure points (%ld runs), %d steps answered with an error, %ld blocks leaked\n",
                  name, points, runs, R.faults_seen, rel_acct_live() - live0);
    assert_true(points >= 1);
    assert_true(R.faults_seen >= 1);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    fault_loop(KB_FAULT_ALLOC, "allocation");
}

static void test_thread_creation_failures(void **state)
{
    (void)state;
    fault_loop(KB_FAULT_THREAD, "thread creation");
}

static void test_sync_setup_failures(void **state)
{
    (void)state;
    fault_loop(KB_FAULT_SYNC, "sync setup");
}

/* The accounting itself sees a leak: a block allocated and not freed. */
static void test_accounting_sees_a_leak(void **state)
{
    (void)state;
    long live0 = rel_acct_live();
    void *p = malloc(24);
    assert_non_null(p);
    assert_int_equal(rel_acct_live(), live0 + 1);
    p = realloc(p, 4096);
    assert_non_null(p);
    assert_int_equal(rel_acct_live(), live0 + 1);
    free(p);
    assert_int_equal(rel_acct_live(), live0);
}

int main(void)
{
    snprintf(record_path, sizeof record_path, "/tmp/kb_rel_fault_%ld.sched", (long)getpid());
    snprintf(trace_path, sizeof trace_path, "/tmp/kb_rel_fault_%ld.json", (long)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accounting_sees_a_leak),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_thread_creation_failures),
        cmocka_unit_test(test_sync_setup_failures),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(record_path);
    unlink(trace_path);
    return rc;
}
