/* SPDX-License-Identifier: MIT */
/*
 * Churn: 2000 spawns on one ctx, every 10th failing (raise, nonzero return,
 * kb_fail, drain failure; UNWIND and RETURN cancel modes alternating), leave
 * no extra threads and no memory growth behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

#define CHURN_NPROCS 4
#define DRAIN_CODE   77
#define H_COMMON     ((kb_handle)0x1000)
#define H_COLL       ((kb_handle)0x2000)
#define H_DRAIN_FAIL ((kb_handle)0x100000)
#define H_PREGROW    ((kb_handle)0x200000)
#define PREGROW      4096

struct churn {
    int spawn;     /* index of the current spawn */
    int fail_kind; /* -1: none; 0 raise, 1 return code, 2 kb_fail, 3 drain */
    long bad;      /* unexpected results seen inside ranks */
};

static int churn_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)self;
    (void)meta;
    (void)origin;
    return h >= H_DRAIN_FAIL && h < H_PREGROW ? DRAIN_CODE : 0;
}

static int churn_rank(int rank, void *arg)
{
    struct churn *c = arg;
    kb_ctx *ctx = kb_current_ctx();
    int rc;
    if ((rc = kb_yield()) != 0)
        return rc;
    if (c->fail_kind == 0 && rank == 2)
        kb_raise(5, "spawn %d: rank %d raises", c->spawn, rank);
    if (c->fail_kind == 1 && rank == 2)
        return 6;
    if (c->fail_kind == 2 && rank == 2 && kb_fail(7, "spawn %d: rank %d fails", c->spawn, rank) != 0)
        c->bad++;
    if (c->fail_kind == 3 && rank == 1 && (rc = kb_wait(ctx, H_DRAIN_FAIL + (kb_handle)c->spawn)) != 0)
        return rc;
    if ((rc = kb_enqueue_wait(ctx, H_COMMON)) != 0 ||
        (rc = kb_wait(ctx, H_COMMON + (kb_handle)rank + 1)) != 0)
        return rc;
    if ((rc = kb_collective_submit(ctx, H_COLL, rank, NULL)) != 0 || (rc = kb_wait(ctx, H_COLL)) != 0)
        return rc;
    if ((rc = kb_barrier()) != 0)
        return rc;
    return kb_yield();
}

static kb_ctx *churn_ctx(void)
{
    kb_engine eng = {.self = NULL, .wait = churn_wait, .bind = NULL, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    /* Give the completed set its size up front, so the drain-failure handles
     * (which may or may not be marked completed) cannot trigger a resize that
     * looks like growth. */
    for (kb_handle h = 0; h < PREGROW; h++)
        assert_int_equal(kb_complete(ctx, H_PREGROW + h), 0);
    return ctx;
}

/* Run spawns [from, to) on ctx; fail the test on any unexpected result. */
static void churn(kb_ctx *ctx, int from, int to)
{
    struct churn c = {0, -1, 0};
    for (int i = from; i < to; i++) {
        c.spawn = i;
        c.fail_kind = i % 10 == 9 ? (i / 10) % 4 : -1;
        kb_spawn_opts o = {.stack_size = 0,
                           .cancel_mode = (i / 10) % 2 ? KB_CANCEL_RETURN : KB_CANCEL_UNWIND};
        kb_spawn_error *err = NULL;
        int rc = kb_spawn(ctx, churn_rank, &c, CHURN_NPROCS, &o, &err);
        if (c.fail_kind < 0) {
            if (rc != 0)
                fail_msg("spawn %d returned %d (%s), want 0", i, rc, kb_strerror(rc));
        } else {
            if (rc != KB_ESPAWN || err == NULL)
                fail_msg("spawn %d (failure kind %d) returned %d, want KB_ESPAWN with a report", i,
                         c.fail_kind, rc);
            if (c.fail_kind == 3) {
                if (kb_spawn_error_drain_code(err) != DRAIN_CODE)
                    fail_msg("spawn %d: drain code %d", i, kb_spawn_error_drain_code(err));
            } else if (kb_spawn_error_count(err) != 1 || kb_spawn_error_get(err, 0)->rank != 2) {
                fail_msg("spawn %d: %zu root causes: %s", i, kb_spawn_error_count(err),
                         kb_spawn_error_message(err));
            }
        }
        kb_spawn_error_free(err);
        if (c.bad)
            fail_msg("spawn %d: a rank saw an unexpected result", i);
    }
}

static int churn_spawns(void)
{
    return kbt_on_valgrind() ? 200 : 2000;
}

#define WARMUP 40 /* covers every failure kind in both cancel modes */

static void test_2000_spawns_keep_thread_count_flat(void **state)
{
    (void)state;
    long before = kbt_thread_baseline();
    kb_ctx *ctx = churn_ctx();
    churn(ctx, 0, WARMUP);
    long after_warmup = kbt_settle_tasks(before + CHURN_NPROCS, 2000);
    /* At most one parked thread per rank may stay with the ctx. */
    assert_true(after_warmup <= before + CHURN_NPROCS);
    long peak = 0;
    int n = churn_spawns();
    for (int i = WARMUP; i < WARMUP + n; i += 100) {
        churn(ctx, i, i + 100);
        long t = kbt_settle_tasks(before + CHURN_NPROCS, 2000);
        if (t > peak)
            peak = t;
    }
    if (peak > before + CHURN_NPROCS)
        fail_msg("threads grew: %ld before the ctx, peak %ld after settling", before, peak);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    long end = kbt_settle_tasks(before, 5000);
    if (end > before)
        fail_msg("%ld threads left after kb_ctx_destroy, %ld before", end, before);
}

/*
 * Memory: after a warm-up (glibc caches thread stacks, creates per-thread
 * malloc arenas and loads libgcc_s on the first unwind), neither the heap in
 * use (mallinfo2, all arenas) nor RSS may grow. Slack: 64 KiB of heap (allocator
 * bookkeeping and queue capacities rounding; a leak of even 32 bytes per spawn
 * is 64 KB over 2000 spawns) and 2 MiB of RSS (page-granular arena and stack
 * cache effects; a leaked thread stack or a per-spawn page would be ≥ 8 MiB).
 */
#define HEAP_SLACK      (64 * 1024)
#define RSS_SLACK_BYTES (2 * 1024 * 1024)

static void test_2000_spawns_keep_memory_flat(void **state)
{
    (void)state;
    kb_ctx *ctx = churn_ctx();
    churn(ctx, 0, WARMUP);
    size_t heap0 = kbt_heap_in_use();
    long rss0 = kbt_rss_pages();
    churn(ctx, WARMUP, WARMUP + churn_spawns());
    size_t heap1 = kbt_heap_in_use();
    long rss1 = kbt_rss_pages();
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    if (kbt_on_valgrind()) {
        /* Valgrind replaces the allocator; its leak check covers this run. */
        print_message("under Valgrind: heap/RSS numbers not compared (memcheck checks leaks)\n");
        return;
    }
    if (kbt_under_sanitizer()) {
        /* ASan/TSan replace the allocator (mallinfo2 reads 0) and grow RSS
         * with quarantine and shadow memory; LeakSanitizer checks leaks. */
        print_message("under a sanitizer: heap/RSS numbers not compared\n");
        return;
    }
    long page = sysconf(_SC_PAGESIZE);
    print_message("heap in use %zu -> %zu bytes, RSS %ld -> %ld KiB\n", heap0, heap1, rss0 * page / 1024,
                  rss1 * page / 1024);
    assert_true(rss0 > 0 && rss1 > 0);
    if (heap1 > heap0 + HEAP_SLACK)
        fail_msg("heap grew by %zu bytes over %d spawns", heap1 - heap0, churn_spawns());
    if ((rss1 - rss0) * page > RSS_SLACK_BYTES)
        fail_msg("RSS grew by %ld KiB over %d spawns", (rss1 - rss0) * page / 1024, churn_spawns());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_2000_spawns_keep_thread_count_flat),
        cmocka_unit_test(test_2000_spawns_keep_memory_flat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
