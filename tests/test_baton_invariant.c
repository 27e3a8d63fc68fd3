/* SPDX-License-Identifier: MIT */
/*
 * The baton: exactly one thread runs at a time (ranks and the driver), over at
 * least 10^6 handoffs, and plain (non-atomic) data written by one holder is
 * seen by the next without locks.
 *
 * Every running stretch (a rank between two suspension points, or an engine
 * hook on the driver side) increments an atomic on entry and decrements it on
 * exit; a value other than 1 inside a stretch is a violation. Nothing here
 * calls cmocka from a rank or a hook: violations are counted and asserted on
 * the main thread afterwards.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

static atomic_int running;
static atomic_long violations;
static atomic_int max_running;
static long stretches; /* plain: only the baton holder touches it */
static long window_ns; /* > 0: every stretch watches the counter this long */

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void stretch_begin(void)
{
    int prev = atomic_fetch_add(&running, 1);
    if (prev != 0)
        atomic_fetch_add(&violations, 1);
    int now = prev + 1;
    int m = atomic_load(&max_running);
    while (now > m && !atomic_compare_exchange_weak(&max_running, &m, now)) {
    }
    stretches++;
    /* Widen the window: a second thread running now, even briefly, is seen. */
    for (int i = 0; i < 32; i++)
        if (atomic_load(&running) != 1) {
            atomic_fetch_add(&violations, 1);
            return;
        }
    if (window_ns > 0) {
        /* Longer than a futex wake-up: a thread resumed out of turn while
         * this one runs is caught for sure. */
        long end = now_ns() + window_ns;
        while (now_ns() < end)
            if (atomic_load(&running) != 1) {
                atomic_fetch_add(&violations, 1);
                return;
            }
    }
}

static void stretch_end(void)
{
    /* Still alone at the end of the stretch? */
    if (atomic_load(&running) != 1)
        atomic_fetch_add(&violations, 1);
    atomic_fetch_sub(&running, 1);
}

static void reset_counters(void)
{
    atomic_store(&running, 0);
    atomic_store(&violations, 0);
    atomic_store(&max_running, 0);
    stretches = 0;
    window_ns = 0;
}

/* Driver side: every hook is a stretch of its own. */
static int counted_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)self;
    (void)h;
    (void)meta;
    (void)origin;
    stretch_begin();
    stretch_end();
    return 0;
}

static void counted_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)self;
    (void)ctx;
    (void)rank;
    stretch_begin();
    stretch_end();
}

static void counted_abort(void *self, kb_ctx *ctx)
{
    (void)self;
    (void)ctx;
    stretch_begin();
    stretch_end();
}

static kb_ctx *counted_ctx(void)
{
    kb_engine eng = {.self = NULL, .wait = counted_wait, .bind = counted_bind, .abort = counted_abort};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    return ctx;
}

struct yield_args {
    int nprocs;
    long yields;
    long rc_errors;
    long seq; /* plain: rank stretches so far, in turn order */
    long out_of_turn;
};

/* Rank 0 also queues a fresh wait every 8th step so the driver's wait hook
 * runs (and is counted) regularly between rounds. */
static int yield_loop_rank(int rank, void *arg)
{
    struct yield_args *a = arg;
    kb_ctx *ctx = kb_current_ctx();
    stretch_begin();
    /* Round-robin with every rank alive throughout: rank r's i-th stretch is
     * rank stretch number i*nprocs + r. */
    if (a->seq++ != rank)
        a->out_of_turn++;
    for (long i = 0; i < a->yields; i++) {
        if (rank == 0 && (i & 7) == 0 && kb_enqueue_wait(ctx, (kb_handle)(i + 1)) != 0)
            a->rc_errors++;
        stretch_end();
        int rc = kb_yield();
        stretch_begin();
        if (a->seq++ != (i + 1) * a->nprocs + rank)
            a->out_of_turn++;
        if (rc != 0)
            a->rc_errors++;
    }
    stretch_end();
    return 0;
}

static void test_one_thread_runs_over_a_million_handoffs(void **state)
{
    (void)state;
    const int nprocs = 4;
    struct yield_args a = {nprocs, kbt_on_valgrind() ? 20000 : 250000, 0, 0, 0};
    reset_counters();
    kb_ctx *ctx = counted_ctx();
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, yield_loop_rank, &a, nprocs, NULL, &err);
    assert_int_equal(rc, 0);
    assert_null(err);
    assert_int_equal(a.rc_errors, 0);
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(atomic_load(&max_running), 1);
    assert_int_equal(atomic_load(&running), 0);
    assert_int_equal(a.out_of_turn, 0);
    assert_int_equal(a.seq, nprocs * (a.yields + 1));
    /* Every rank stretch starts with a handoff to that rank: nprocs*(yields+1)
     * rank stretches, plus nprocs binds and yields/8 wait hooks. */
    long expect = nprocs * (a.yields + 1) + nprocs + (a.yields + 7) / 8;
    assert_int_equal(stretches, expect);
    if (!kbt_on_valgrind())
        assert_true(stretches >= 1000000);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* Fewer handoffs, but every stretch lasts longer than a futex wake-up, so
 * any thread resumed while another one runs overlaps it visibly. */
static void test_one_thread_runs_when_every_stretch_is_long(void **state)
{
    (void)state;
    const int nprocs = 8;
    struct yield_args a = {nprocs, kbt_on_valgrind() ? 200 : 2000, 0, 0, 0};
    reset_counters();
    window_ns = 20000;
    kb_ctx *ctx = counted_ctx();
    assert_int_equal(kb_spawn(ctx, yield_loop_rank, &a, nprocs, NULL, NULL), 0);
    window_ns = 0;
    assert_int_equal(a.rc_errors, 0);
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(atomic_load(&max_running), 1);
    assert_int_equal(a.out_of_turn, 0);
    assert_int_equal(a.seq, nprocs * (a.yields + 1));
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* Every kind of suspension point and the cancel/unwind path, in one spawn:
 * yields, switching waits, fast waits, collectives, barriers, then a failure
 * whose siblings unwind through cleanup handlers (each one a stretch). */
struct mixed_args {
    int steps;
    int fail_rank;
    long rc_errors;
    int cleanups;
};

static void mixed_cleanup(void *arg)
{
    struct mixed_args *a = arg;
    stretch_begin();
    a->cleanups++;
    stretch_end();
}

static int mixed_rank(int rank, void *arg)
{
    struct mixed_args *a = arg;
    kb_ctx *ctx = kb_current_ctx();
    int rc = 0;
    pthread_cleanup_push(mixed_cleanup, a);
    stretch_begin();
    for (int s = 0; s < a->steps; s++) {
        kb_handle h = ((kb_handle)(rank + 1) << 20) | (kb_handle)(s + 1);
        int r = 0;
        stretch_end();
        switch ((rank + s) % 5) {
        case 0:
            r = kb_yield();
            break;
        case 1:
            r = kb_wait(ctx, h);
            break;
        case 2:
            r = kb_collective_submit(ctx, h, rank, NULL);
            if (r == 0)
                r = kb_wait(ctx, h);
            break;
        case 3:
            r = kb_barrier();
            break;
        default:
            r = kb_complete(ctx, h);
            if (r == 0)
                r = kb_wait(ctx, h); /* fast path: no switch */
            if (r == 0)
                r = kb_yield();
            break;
        }
        stretch_begin();
        if (r != 0)
            a->rc_errors++;
        if (rank == a->fail_rank && s == a->steps - 1) {
            stretch_end();
            kb_raise(5, "rank %d fails", rank);
        }
    }
    stretch_end();
    pthread_cleanup_pop(0);
    return rc;
}

static void test_one_thread_runs_across_waits_barriers_and_cancellation(void **state)
{
    (void)state;
    const int nprocs = 16;
    struct mixed_args a = {kbt_on_valgrind() ? 20 : 400, nprocs / 2, 0, 0};
    reset_counters();
    kb_ctx *ctx = counted_ctx();
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, mixed_rank, &a, nprocs, NULL, &err);
    assert_int_equal(rc, KB_ESPAWN);
    assert_non_null(err);
    assert_int_equal(kb_spawn_error_count(err), 1);
    assert_int_equal(kb_spawn_error_get(err, 0)->rank, nprocs / 2);
    kb_spawn_error_free(err);
    assert_int_equal(a.rc_errors, 0);
    assert_true(a.cleanups >= 1); /* the raising rank's own cleanup at least */
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(atomic_load(&max_running), 1);
    assert_int_equal(atomic_load(&running), 0);
    assert_true(stretches > (long)nprocs * a.steps);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* ------------------------------------------------------------------------ */
/* Plain data crosses every handoff                                          */
/* ------------------------------------------------------------------------ */

#define VIS_WORDS 64

struct vis {
    int nprocs;
    long yields;
    /* plain shared data, deliberately neither atomic nor volatile */
    uint64_t seq;
    uint64_t words[VIS_WORDS];
    long driver_token; /* written by the wait hook, read by rank 0 */
    long rank0_rounds; /* written by rank 0, read by the wait hook */
    long bad_seq, bad_words, bad_token, bad_hook;
    long hook_calls;
};

static uint64_t vis_word(uint64_t seq, int i)
{
    uint64_t x = seq * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    return x;
}

static void vis_check_and_write(struct vis *v, uint64_t expect_seq)
{
    if (v->seq != expect_seq)
        v->bad_seq++;
    for (int i = 0; i < VIS_WORDS; i++)
        if (v->words[i] != vis_word(v->seq, i))
            v->bad_words++;
    v->seq = expect_seq + 1;
    for (int i = 0; i < VIS_WORDS; i++)
        v->words[i] = vis_word(v->seq, i);
}

/* Rank r's j-th stretch is global stretch j*nprocs + r (round-robin, every
 * rank alive for the whole run). */
static int vis_rank(int rank, void *arg)
{
    struct vis *v = arg;
    kb_ctx *ctx = kb_current_ctx();
    for (long j = 0;; j++) {
        vis_check_and_write(v, (uint64_t)(j * v->nprocs + rank));
        if (rank == 0) {
            /* The hook of the previous drain saw rank 0's previous write and
             * left its token. */
            if (j > 0 && v->driver_token != j - 1)
                v->bad_token++;
            v->rank0_rounds = j;
            kb_enqueue_wait(ctx, (kb_handle)(j + 1));
        }
        if (j == v->yields)
            break;
        kb_yield();
    }
    return 0;
}

static int vis_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)meta;
    (void)origin;
    struct vis *v = self;
    v->hook_calls++;
    if ((long)h - 1 != v->rank0_rounds)
        v->bad_hook++;
    /* The last rank of the round wrote seq; check its words too. */
    if (v->seq != (uint64_t)((v->rank0_rounds + 1) * v->nprocs))
        v->bad_hook++;
    for (int i = 0; i < VIS_WORDS; i++)
        if (v->words[i] != vis_word(v->seq, i))
            v->bad_hook++;
    v->driver_token = v->rank0_rounds;
    return 0;
}

static void test_plain_writes_are_seen_by_the_next_holder(void **state)
{
    (void)state;
    struct vis *v = calloc(1, sizeof *v);
    assert_non_null(v);
    v->nprocs = 8;
    v->yields = kbt_on_valgrind() ? 3000 : 20000;
    for (int i = 0; i < VIS_WORDS; i++)
        v->words[i] = vis_word(0, i);
    kb_engine eng = {.self = v, .wait = vis_wait, .bind = NULL, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, vis_rank, v, v->nprocs, NULL, NULL), 0);
    assert_int_equal(v->bad_seq, 0);
    assert_int_equal(v->bad_words, 0);
    assert_int_equal(v->bad_token, 0);
    assert_int_equal(v->bad_hook, 0);
    assert_int_equal(v->hook_calls, v->yields + 1);
    assert_int_equal(v->seq, (uint64_t)((v->yields + 1) * v->nprocs));
    /* The driver sees the last rank's writes after kb_spawn returns. */
    for (int i = 0; i < VIS_WORDS; i++)
        assert_int_equal(v->words[i], vis_word(v->seq, i));
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_thread_runs_over_a_million_handoffs),
        cmocka_unit_test(test_one_thread_runs_when_every_stretch_is_long),
        cmocka_unit_test(test_one_thread_runs_across_waits_barriers_and_cancellation),
        cmocka_unit_test(test_plain_writes_are_seen_by_the_next_holder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
