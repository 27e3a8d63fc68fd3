/* SPDX-License-Identifier: MIT */
/*
 * Real thread-creation failure (no fault seam): in a forked child, limit the
 * address space (RLIMIT_AS) so only a few 64 MiB rank stacks fit, then spawn
 * more ranks than that. kb_spawn must answer KB_EAGAIN with no rank run (no
 * fn, no bind: bind runs only after every rank thread exists), every created
 * thread gone, and the ctx usable for a clean spawn once the limit is lifted.
 * Root ignores RLIMIT_NPROC, so RLIMIT_AS is the robust real limit here.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

#define BIG_STACK    ((size_t)64 << 20)
#define LIMIT_NPROCS 32

struct tl_counts {
    int fn_calls;
    int bind_calls;
};

static void tl_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct tl_counts *)self)->bind_calls++;
}

static int tl_rank(int rank, void *arg)
{
    (void)rank;
    ((struct tl_counts *)arg)->fn_calls++;
    kb_yield();
    return 0;
}

static long vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = -1;
    if (f) {
        if (fscanf(f, "%ld", &size) != 1)
            size = -1;
        fclose(f);
    }
    return size < 0 ? -1 : size * sysconf(_SC_PAGESIZE);
}

/* headroom: address space allowed beyond what the child already maps. */
static int limited_spawn_child(size_t headroom)
{
    /* One malloc arena: per-thread arenas would reserve 64 MiB of address
     * space each and make the number of threads that fit unpredictable. */
    mallopt(M_ARENA_MAX, 1);
    struct tl_counts c = {0, 0};
    kb_engine eng = {.self = &c, .wait = NULL, .bind = tl_bind, .abort = NULL};
    kb_ctx *ctx = NULL;
    if (kb_ctx_create(&eng, &ctx) != 0) {
        fprintf(stderr, "kb_ctx_create failed\n");
        return 10;
    }
    long base = kbt_thread_baseline();
    struct rlimit old;
    if (getrlimit(RLIMIT_AS, &old) != 0 || vm_bytes() < 0)
        return 11;
    struct rlimit lim = {(rlim_t)vm_bytes() + headroom, old.rlim_max};
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
        fprintf(stderr, "setrlimit: %s\n", strerror(errno));
        return 12;
    }
    kb_spawn_opts o = {.stack_size = BIG_STACK, .cancel_mode = KB_CANCEL_UNWIND};
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, tl_rank, &c, LIMIT_NPROCS, &o, &err);
    setrlimit(RLIMIT_AS, &old);
    kb_spawn_error_free(err);
    int bad = 0;
    if (rc != KB_EAGAIN) {
        fprintf(stderr, "limited kb_spawn returned %d (%s), want KB_EAGAIN\n", rc, kb_strerror(rc));
        bad = 20;
    }
    if (c.fn_calls != 0 || c.bind_calls != 0) {
        fprintf(stderr, "after KB_EAGAIN: %d fn calls, %d bind calls, want 0 and 0\n", c.fn_calls,
                c.bind_calls);
        bad = 21;
    }
    long t = kbt_settle_tasks(base, 3000);
    if (t > base) {
        fprintf(stderr, "after KB_EAGAIN: %ld threads, %ld before the spawn\n", t, base);
        bad = 22;
    }
    rc = kb_spawn(ctx, tl_rank, &c, LIMIT_NPROCS, &o, NULL);
    if (rc != 0 || c.fn_calls != LIMIT_NPROCS || c.bind_calls != LIMIT_NPROCS) {
        fprintf(stderr, "clean spawn afterwards: rc %d, %d fn calls, %d binds\n", rc, c.fn_calls,
                c.bind_calls);
        bad = 23;
    }
    if (kb_ctx_destroy(ctx) != 0)
        bad = 24;
    t = kbt_settle_tasks(base, 3000);
    if (t > base) {
        fprintf(stderr, "after kb_ctx_destroy: %ld threads, %ld before\n", t, base);
        bad = 25;
    }
    return bad;
}

static int child_fail_mid_way(void *unused)
{
    (void)unused;
    return limited_spawn_child((size_t)512 << 20); /* about 7 stacks of 64 MiB fit, 32 needed */
}

static int child_fail_first(void *unused)
{
    (void)unused;
    return limited_spawn_child((size_t)32 << 20); /* not even one stack fits */
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KBT_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KBT_SANITIZER 1
#endif
#endif

static void run_child(int (*fn)(void *))
{
#ifdef KBT_SANITIZER
    print_message("skipped under a sanitizer: its shadow memory cannot live under RLIMIT_AS "
                  "(test_fault_threads covers thread-creation failure there)\n");
    skip();
#endif
    if (kbt_on_valgrind()) {
        print_message("skipped under Valgrind: RLIMIT_AS would starve Valgrind's own allocator "
                      "(test_fault_threads covers thread-creation failure there)\n");
        skip();
    }
    assert_true(kbt_settle_tasks(1, 2000) <= 1);
    struct kbt_child res;
    assert_int_equal(kbt_run_forked(fn, NULL, 60000, &res), 0);
    if (res.timed_out || !WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0) {
        fprintf(stderr, "child status 0x%x (timed out %d), output:\n%s\n", res.status, res.timed_out,
                res.out);
        fail_msg("thread-limit child failed");
    }
}

static void test_thread_limit_mid_spawn_gives_eagain_and_no_rank_runs(void **state)
{
    (void)state;
    run_child(child_fail_mid_way);
}

static void test_thread_limit_at_first_rank_gives_eagain_and_no_rank_runs(void **state)
{
    (void)state;
    run_child(child_fail_first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_limit_mid_spawn_gives_eagain_and_no_rank_runs),
        cmocka_unit_test(test_thread_limit_at_first_rank_gives_eagain_and_no_rank_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
