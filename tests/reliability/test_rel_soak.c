/* SPDX-License-Identifier: MIT */
/*
 * Soak: many handoffs in one spawn with the one-running invariant and the
 * round-robin order checked at every turn; 4096 ranks in one spawn; many
 * spawn/fail cycles on one ctx with no growth in threads or memory.
 *
 * ctest runs reduced sizes (smaller still under Valgrind); `make soak`
 * (KB_SOAK=1) runs the full ones: 10^8 handoffs, 4096 ranks, 10^4 cycles.
 * KB_SOAK_HANDOFFS / KB_SOAK_RANKS / KB_SOAK_CYCLES override each.
 *
 * Nothing here calls cmocka from a rank or a hook: violations are counted
 * and asserted on the main thread afterwards.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

static int soak_mode(void)
{
    const char *e = getenv("KB_SOAK");
    return e && *e && strcmp(e, "0") != 0;
}

static long size_of(const char *env, long full, long ctest, long valgrind)
{
    const char *e = getenv(env);
    if (e && *e)
        return atol(e);
    if (soak_mode())
        return full;
    return kbt_on_valgrind() ? valgrind : ctest;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- the one-running invariant ------------------------------------------------- */

/* Threads inside a running stretch (a rank between suspension points, or an
 * engine hook); must be 1 inside every stretch. */
static atomic_int running;
static atomic_long violations;

static void stretch_begin(void)
{
    if (atomic_fetch_add(&running, 1) != 0)
        atomic_fetch_add(&violations, 1);
}

static void stretch_end(void)
{
    if (atomic_fetch_sub(&running, 1) != 1)
        atomic_fetch_add(&violations, 1);
}

/* ---- 1. handoffs ----------------------------------------------------------------- */

#define HO_NPROCS     8
#define HO_WAIT_EVERY 64 /* every 64th turn a rank also waits on a fresh handle */

struct ho {
    long iters;      /* yields per rank */
    uint64_t turn;   /* turns seen, in order (plain: the baton orders it) */
    long bad_order;  /* a rank ran out of its round-robin turn */
    long bad_rc;     /* a call returned nonzero */
    long hook_waits; /* engine waits seen */
};

static int ho_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    stretch_begin();
    ((struct ho *)self)->hook_waits++;
    stretch_end();
    return 0;
}

/* Round-robin: turn t of the spawn belongs to rank t % nprocs, as long as
 * every rank suspends once per round (kb_wait on a fresh handle suspends
 * exactly once: the drain completes it). */
static int ho_rank(int rank, void *arg)
{
    struct ho *s = arg;
    kb_ctx *ctx = kb_current_ctx();
    stretch_begin();
    for (long i = 0; i < s->iters; i++) {
        if (s->turn % HO_NPROCS != (uint64_t)rank)
            s->bad_order++;
        s->turn++;
        stretch_end();
        int rc = i % HO_WAIT_EVERY == HO_WAIT_EVERY - 1
                     ? kb_wait(ctx, ((kb_handle)(rank + 1) << 40) + (kb_handle)i)
                     : kb_yield();
        stretch_begin();
        if (rc != 0)
            s->bad_rc++;
    }
    if (s->turn % HO_NPROCS != (uint64_t)rank)
        s->bad_order++;
    s->turn++;
    stretch_end();
    return 0;
}

static void test_handoffs_keep_one_running_and_the_order(void **state)
{
    (void)state;
    long want = size_of("KB_SOAK_HANDOFFS", 100000000L, 1000000L, 100000L);
    struct ho s;
    memset(&s, 0, sizeof s);
    /* a round is one handoff per rank, plus one back to the driver when
     * it has a drain to run */
    s.iters = want / HO_NPROCS + 1;
    kb_engine eng = {.self = &s, .wait = ho_wait, .bind = NULL, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    atomic_store(&running, 0);
    atomic_store(&violations, 0);
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    kb_spawn_opts o = {.stats = &st};
    double t0 = now_s();
    assert_int_equal(kb_spawn(ctx, ho_rank, &s, HO_NPROCS, &o, NULL), 0);
    double dt = now_s() - t0;
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    print_message("%llu handoffs (%llu rounds, %llu engine waits) in %.1f s: %.2f us per handoff; "
                  "%ld invariant violations, %ld out-of-order turns\n",
                  (unsigned long long)st.handoffs, (unsigned long long)st.rounds,
                  (unsigned long long)st.engine_waits, dt, dt * 1e6 / (double)st.handoffs,
                  atomic_load(&violations), s.bad_order);
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(s.bad_order, 0);
    assert_int_equal(s.bad_rc, 0);
    /* no lost or doubled turn: exactly iters + 1 rounds of HO_NPROCS turns */
    assert_int_equal(st.rounds, (uint64_t)s.iters + 1);
    assert_int_equal(st.turns, st.rounds * HO_NPROCS);
    /* one handoff per turn, plus one back to the driver per round with
     * waits to drain (every HO_WAIT_EVERY-th) and the last */
    assert_true(st.handoffs > st.turns && st.handoffs <= st.turns + st.rounds);
    assert_int_equal(s.turn, st.turns);
    assert_int_equal(st.engine_waits, (uint64_t)(s.iters / HO_WAIT_EVERY) * HO_NPROCS);
    assert_true(st.handoffs >= (uint64_t)want);
}

/* ---- 2. many ranks ----------------------------------------------------------------- */

struct many {
    int nprocs;
    kb_handle base; /* fresh handles per spawn: each wait suspends once */
    uint64_t turn;
    long bad_order, bad_rc;
    int max_tasks; /* threads of the process seen by the last rank */
};

static int many_rank(int rank, void *arg)
{
    struct many *m = arg;
    kb_ctx *ctx = kb_current_ctx();
    int rc = 0;
    stretch_begin();
    /* four rounds: yield, wait on a fresh handle, barrier, return */
    for (int step = 0; step < 4; step++) {
        if (m->turn % (uint64_t)m->nprocs != (uint64_t)rank)
            m->bad_order++;
        m->turn++;
        if (step == 3)
            break;
        stretch_end();
        rc = step == 0 ? kb_yield() : step == 1 ? kb_wait(ctx, m->base + (kb_handle)rank + 1) : kb_barrier();
        stretch_begin();
        if (rc != 0)
            m->bad_rc++;
    }
    if (rank == m->nprocs - 1)
        m->max_tasks = (int)kbt_task_count();
    stretch_end();
    return 0;
}

static void test_thousands_of_ranks(void **state)
{
    (void)state;
    long n = size_of("KB_SOAK_RANKS", 4096, 4096, 256);
    long before = kbt_thread_baseline();
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    struct many m;
    memset(&m, 0, sizeof m);
    m.nprocs = (int)n;
    atomic_store(&running, 0);
    atomic_store(&violations, 0);
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    kb_spawn_opts o = {.stack_size = 128 * 1024, .stats = &st};
    double t0 = now_s();
    int rc = kb_spawn(ctx, many_rank, &m, m.nprocs, &o, NULL);
    double dt = now_s() - t0;
    assert_int_equal(rc, 0);
    /* a second spawn reuses the parked threads */
    assert_int_equal(m.bad_order, 0);
    memset(&m, 0, sizeof m);
    m.nprocs = (int)n;
    m.base = (kb_handle)n;
    double t1 = now_s();
    assert_int_equal(kb_spawn(ctx, many_rank, &m, m.nprocs, &o, NULL), 0);
    double dt2 = now_s() - t1;
    long parked = kbt_settle_tasks(before + n, 3000);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    long after = kbt_settle_tasks(before, 10000);
    print_message("%ld ranks: %.2f s (threads created), %.2f s (reused); %llu handoffs; %d threads seen by "
                  "the last rank, %ld parked, %ld after kb_ctx_destroy (%ld before)\n",
                  n, dt, dt2, (unsigned long long)st.handoffs, m.max_tasks, parked, after, before);
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(m.bad_order, 0);
    assert_int_equal(m.bad_rc, 0);
    assert_int_equal(st.rounds, 4);
    assert_int_equal(st.turns, 4 * (uint64_t)n);
    assert_true(m.max_tasks >= n + 1); /* every rank has its own thread */
    assert_true(parked <= before + n);
    assert_true(after <= before);
}

/* ---- 3. spawn/fail cycles ------------------------------------------------------------ */

#define CY_NPROCS     4
#define CY_DRAIN_CODE 77

struct cycle {
    long i;
    int kind; /* what fails this cycle */
    long bad;
};

static int cy_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)self;
    (void)meta;
    (void)origin;
    return h >= ((kb_handle)1 << 50) ? CY_DRAIN_CODE : 0;
}

static void cy_cleanup(void *arg)
{
    (void)arg;
    (void)kb_yield(); /* KB_ECANCELED at once */
}

enum { CY_RAISE, CY_RETURN, CY_FAIL, CY_DRAIN, CY_ROUNDS, CY_FREE, CY_KINDS };

static int cy_body(struct cycle *c, int rank)
{
    kb_ctx *ctx = kb_current_ctx();
    int rc;
    if ((rc = kb_yield()) != 0)
        return rc;
    if ((rc = kb_wait(ctx, (kb_handle)(c->i % 512) * 8 + (kb_handle)rank + 1)) != 0)
        return rc;
    if (rank == 1) {
        switch (c->kind) {
        case CY_RAISE:
            kb_raise(5, "cycle %ld", c->i);
        case CY_RETURN:
            return 6;
        case CY_FAIL:
            if (kb_fail(7, "cycle %ld", c->i) != 0)
                c->bad++;
            break;
        case CY_DRAIN:
            if ((rc = kb_wait(ctx, ((kb_handle)1 << 50) + (kb_handle)c->i)) != 0)
                return rc;
            break;
        default:
            break;
        }
    }
    if ((rc = kb_barrier()) != 0)
        return rc;
    for (int i = 0; i < 10; i++) /* CY_ROUNDS / CY_FREE stop here */
        if ((rc = kb_yield()) != 0)
            return rc;
    return 0;
}

static int cy_rank(int rank, void *arg)
{
    int rc;
    pthread_cleanup_push(cy_cleanup, NULL);
    rc = cy_body(arg, rank);
    pthread_cleanup_pop(0);
    return rc;
}

static void cycles(kb_ctx *ctx, long from, long to)
{
    struct cycle c;
    memset(&c, 0, sizeof c);
    for (long i = from; i < to; i++) {
        c.i = i;
        c.kind = (int)(i % CY_KINDS);
        kb_spawn_opts o = {.cancel_mode = (i / CY_KINDS) % 2 ? KB_CANCEL_RETURN : KB_CANCEL_UNWIND,
                           .max_rounds = c.kind == CY_ROUNDS ? 5 : 0};
        kb_spawn_error *err = NULL;
        int rc;
        if (c.kind == CY_FREE) {
            kb_process_context *pc = NULL;
            rc = kb_start(ctx, cy_rank, &c, CY_NPROCS, &o, &pc);
            if (rc != 0)
                fail_msg("cycle %ld: kb_start returned %d", i, rc);
            if ((rc = kb_join(pc, 0, NULL)) != 0 || (rc = kb_join(pc, 0, NULL)) != 0)
                fail_msg("cycle %ld: kb_join(0) returned %d", i, rc);
            kb_process_context_free(pc); /* cancels the live ranks */
            continue;
        }
        rc = kb_spawn(ctx, cy_rank, &c, CY_NPROCS, &o, &err);
        int want = c.kind == CY_ROUNDS ? KB_ETIMEDOUT : KB_ESPAWN;
        if (rc != want || !err)
            fail_msg("cycle %ld (kind %d): kb_spawn returned %d, want %d with a report", i, c.kind, rc, want);
        if (c.kind == CY_DRAIN && kb_spawn_error_drain_code(err) != CY_DRAIN_CODE)
            fail_msg("cycle %ld: drain code %d", i, kb_spawn_error_drain_code(err));
        if (c.kind <= CY_FAIL && (kb_spawn_error_count(err) != 1 || kb_spawn_error_get(err, 0)->rank != 1))
            fail_msg("cycle %ld: %s", i, kb_spawn_error_message(err));
        kb_spawn_error_free(err);
        if (c.bad)
            fail_msg("cycle %ld: a rank saw an unexpected result", i);
    }
}

#define WARMUP          (8 * CY_KINDS) /* each kind in both cancel modes, twice */
#define HEAP_SLACK      (64 * 1024)
#define RSS_SLACK_BYTES (4 * 1024 * 1024)

static void test_spawn_fail_cycles_keep_threads_and_memory_flat(void **state)
{
    (void)state;
    long n = size_of("KB_SOAK_CYCLES", 10000, 2000, 500);
    long before = kbt_thread_baseline();
    kb_engine eng = {.self = NULL, .wait = cy_wait, .bind = NULL, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    /* the completed set reaches its final size during the warm-up: the
     * waited handles repeat every 512 cycles */
    for (kb_handle h = 1; h <= 512 * 8 + CY_NPROCS; h++)
        assert_int_equal(kb_complete(ctx, h), 0);
    cycles(ctx, 0, WARMUP);
    size_t heap0 = kbt_heap_in_use();
    long rss0 = kbt_rss_pages();
    long peak = 0;
    double t0 = now_s();
    for (long i = WARMUP; i < WARMUP + n; i += 100) {
        long to = i + 100 < WARMUP + n ? i + 100 : WARMUP + n;
        cycles(ctx, i, to);
        long t = kbt_settle_tasks(before + CY_NPROCS, 2000);
        if (t > peak)
            peak = t;
    }
    double dt = now_s() - t0;
    size_t heap1 = kbt_heap_in_use();
    long rss1 = kbt_rss_pages();
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    long end = kbt_settle_tasks(before, 5000);
    long page = sysconf(_SC_PAGESIZE);
    print_message(
        "%ld spawn/fail cycles in %.1f s; threads: %ld before, peak %ld, %ld after; heap %zu -> %zu "
        "bytes; RSS %ld -> %ld KiB\n",
        n, dt, before, peak, end, heap0, heap1, rss0 * page / 1024, rss1 * page / 1024);
    if (peak > before + CY_NPROCS)
        fail_msg("threads grew: %ld before the ctx, peak %ld", before, peak);
    if (end > before)
        fail_msg("%ld threads left after kb_ctx_destroy, %ld before", end, before);
    if (kbt_on_valgrind())
        return; /* Valgrind replaces the allocator; memcheck checks leaks */
    if (kbt_under_sanitizer())
        return; /* the sanitizers' allocators and shadow memory grow RSS; LSan checks leaks */
    if (heap1 > heap0 + HEAP_SLACK)
        fail_msg("heap grew by %zu bytes over %ld cycles", heap1 - heap0, n);
    if ((rss1 - rss0) * page > RSS_SLACK_BYTES)
        fail_msg("RSS grew by %ld KiB over %ld cycles", (rss1 - rss0) * page / 1024, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoffs_keep_one_running_and_the_order),
        cmocka_unit_test(test_thousands_of_ranks),
        cmocka_unit_test(test_spawn_fail_cycles_keep_threads_and_memory_flat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
