/* SPDX-License-Identifier: MIT */
/*
 * A real limit (no fault seam): in a forked child, limit the address space
 * (RLIMIT_AS) so only a few 64 MiB rank stacks fit, then spawn more ranks
 * than that. kb_spawn must answer KB_EAGAIN before it creates any thread
 * (the sizes are checked before memory is spent; kb_spawn_check names
 * RLIMIT_AS) with no rank run (no fn, no bind), and the ctx must be usable
 * for a clean spawn once the limit is lifted. Threads the ctx keeps parked
 * are not counted against the limit. Root ignores RLIMIT_NPROC, so
 * RLIMIT_AS is the robust real limit here. (A thread that cannot be
 * created although the check passed still gives KB_EAGAIN with every
 * created thread gone: test_fault_threads.)
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
    char why[512];
    int check = kb_spawn_check(ctx, LIMIT_NPROCS, &o, why, sizeof why);
    int rc = kb_spawn(ctx, tl_rank, &c, LIMIT_NPROCS, &o, &err);
    long t = kbt_task_count();
    setrlimit(RLIMIT_AS, &old);
    kb_spawn_error_free(err);
    int bad = 0;
    if (check != KB_EAGAIN || !strstr(why, "RLIMIT_AS")) {
        fprintf(stderr, "kb_spawn_check returned %d (%s), want KB_EAGAIN naming RLIMIT_AS\n", check, why);
        bad = 19;
    }
    if (rc != KB_EAGAIN) {
        fprintf(stderr, "limited kb_spawn returned %d (%s), want KB_EAGAIN\n", rc, kb_strerror(rc));
        bad = 20;
    }
    if (c.fn_calls != 0 || c.bind_calls != 0) {
        fprintf(stderr, "after KB_EAGAIN: %d fn calls, %d bind calls, want 0 and 0\n", c.fn_calls,
                c.bind_calls);
        bad = 21;
    }
    if (t > base) {
        fprintf(stderr, "after KB_EAGAIN: %ld threads, %ld before the spawn: threads were created\n", t,
                base);
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

static int child_room_for_some(void *unused)
{
    (void)unused;
    return limited_spawn_child((size_t)512 << 20); /* about 7 stacks of 64 MiB fit, 32 needed */
}

static int child_room_for_none(void *unused)
{
    (void)unused;
    return limited_spawn_child((size_t)32 << 20); /* not even one stack fits */
}

/* Parked threads need no room: after a spawn of 4 ranks, an address space
 * with no room for another stack still runs 4, and refuses 5. */
static int child_parked_threads_reused(void *unused)
{
    (void)unused;
    mallopt(M_ARENA_MAX, 1);
    struct tl_counts c = {0, 0};
    kb_ctx *ctx = NULL;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 10;
    kb_spawn_opts o = {.stack_size = BIG_STACK, .cancel_mode = KB_CANCEL_UNWIND};
    if (kb_spawn(ctx, tl_rank, &c, 4, &o, NULL) != 0)
        return 11;
    struct rlimit old;
    if (getrlimit(RLIMIT_AS, &old) != 0 || vm_bytes() < 0)
        return 12;
    struct rlimit lim = {(rlim_t)vm_bytes() + ((size_t)16 << 20), old.rlim_max};
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        return 13;
    int four = kb_spawn(ctx, tl_rank, &c, 4, &o, NULL);
    int five = kb_spawn(ctx, tl_rank, &c, 5, &o, NULL);
    setrlimit(RLIMIT_AS, &old);
    int bad = 0;
    if (four != 0) {
        fprintf(stderr, "4 ranks on 4 parked threads: %d (%s), want 0\n", four, kb_strerror(four));
        bad = 20;
    }
    if (five != KB_EAGAIN) {
        fprintf(stderr, "5 ranks, room for 4: %d (%s), want KB_EAGAIN\n", five, kb_strerror(five));
        bad = 21;
    }
    if (c.fn_calls != 8) {
        fprintf(stderr, "%d fn calls, want 8\n", c.fn_calls);
        bad = 22;
    }
    if (kb_ctx_destroy(ctx) != 0)
        bad = 23;
    return bad;
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

static void test_address_space_for_some_stacks_gives_eagain_before_any_thread(void **state)
{
    (void)state;
    run_child(child_room_for_some);
}

static void test_address_space_for_no_stack_gives_eagain_before_any_thread(void **state)
{
    (void)state;
    run_child(child_room_for_none);
}

static void test_parked_threads_need_no_room(void **state)
{
    (void)state;
    run_child(child_parked_threads_reused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_space_for_some_stacks_gives_eagain_before_any_thread),
        cmocka_unit_test(test_address_space_for_no_stack_gives_eagain_before_any_thread),
        cmocka_unit_test(test_parked_threads_need_no_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
