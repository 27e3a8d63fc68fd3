/* SPDX-License-Identifier: MIT */
/*
 * The stall watchdog: a rank holding the baton past stall_ms is reported
 * once per stall (rank, time, its backtrace), the spawn then goes on; with
 * stall_abort the process aborts; KB_STALL_MS turns it on without code.
 * Each case runs in a forked child whose stderr the test reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"

/* Sleep ms of wall time even when the watchdog's signal interrupts. */
static void sleep_through(long ms)
{
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) != 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
            break;
    }
}

/* Rank 1 holds the baton for 600 ms in its first turn; the others yield. */
int kbt_stalling_rank(int rank, void *arg);
int kbt_stalling_rank(int rank, void *arg)
{
    (void)arg;
    if (rank == 1)
        sleep_through(600);
    return kb_yield();
}

struct child_args {
    kb_spawn_opts opts;
};

static int spawn_child(void *p)
{
    struct child_args *a = p;
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 90;
    int rc = kb_spawn(ctx, kbt_stalling_rank, NULL, 3, &a->opts, NULL);
    kb_ctx_destroy(ctx);
    fprintf(stderr, "spawn returned %d\n", rc);
    return rc == 0 ? 0 : 91;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_stall_is_reported_once_with_the_rank_and_its_backtrace(void **state)
{
    (void)state;
    struct child_args a = {.opts = {.stall_ms = 150}};
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(spawn_child, &a, 20000, &c), 0);
    assert_false(c.timed_out);
    assert_true(WIFEXITED(c.status));
    assert_int_equal(WEXITSTATUS(c.status), 0);
    assert_int_equal(count(c.out, "kbthreads: stall: rank 1 (kb-rank-1) has held the baton for"), 1);
    assert_int_equal(count(c.out, "kbthreads: stall:"), 2); /* the report and its "still waiting" line */
    /* The backtrace is the stalled thread's own: it shows the rank function
     * (exported from this executable with -rdynamic). */
    assert_non_null(strstr(c.out, kbt_backtrace_shows("kbt_stalling_rank")));
    assert_non_null(strstr(c.out, "spawn returned 0"));
}

static void test_no_report_when_every_turn_is_short(void **state)
{
    (void)state;
    struct child_args a = {.opts = {.stall_ms = 5000}};
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(spawn_child, &a, 20000, &c), 0);
    assert_true(WIFEXITED(c.status));
    assert_int_equal(WEXITSTATUS(c.status), 0);
    assert_null(strstr(c.out, "kbthreads: stall"));
}

static void test_stall_abort_aborts_after_the_report(void **state)
{
    (void)state;
    struct child_args a = {.opts = {.stall_ms = 150, .stall_abort = 1}};
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(spawn_child, &a, 20000, &c), 0);
    assert_true(WIFSIGNALED(c.status));
    assert_int_equal(WTERMSIG(c.status), SIGABRT);
    assert_non_null(strstr(c.out, "kbthreads: stall: rank 1 (kb-rank-1)"));
    assert_null(strstr(c.out, "spawn returned"));
}

static int env_child(void *p)
{
    (void)p;
    setenv("KB_STALL_MS", "150", 1);
    struct child_args a = {.opts = {0}};
    return spawn_child(&a);
}

static void test_KB_STALL_MS_turns_the_watchdog_on(void **state)
{
    (void)state;
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(env_child, NULL, 20000, &c), 0);
    assert_true(WIFEXITED(c.status));
    assert_int_equal(WEXITSTATUS(c.status), 0);
    assert_int_equal(count(c.out, "kbthreads: stall: rank 1 (kb-rank-1)"), 1);
}

static int bad_env_child(void *p)
{
    (void)p;
    setenv("KB_STALL_MS", "soon", 1);
    struct child_args a = {.opts = {0}};
    return spawn_child(&a);
}

static void test_a_malformed_KB_STALL_MS_is_ignored_with_a_warning(void **state)
{
    (void)state;
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(bad_env_child, NULL, 20000, &c), 0);
    assert_true(WIFEXITED(c.status));
    assert_int_equal(WEXITSTATUS(c.status), 0);
    assert_non_null(strstr(c.out, "kbthreads: ignoring KB_STALL_MS=soon"));
    assert_null(strstr(c.out, "kbthreads: stall:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stall_is_reported_once_with_the_rank_and_its_backtrace),
        cmocka_unit_test(test_no_report_when_every_turn_is_short),
        cmocka_unit_test(test_stall_abort_aborts_after_the_report),
        cmocka_unit_test(test_KB_STALL_MS_turns_the_watchdog_on),
        cmocka_unit_test(test_a_malformed_KB_STALL_MS_is_ignored_with_a_warning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
