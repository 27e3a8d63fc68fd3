/* SPDX-License-Identifier: MIT */
/*
 * The crash report: a fatal signal in a rank prints
 * "kbthreads: rank R (kb-rank-R) crashed: SIG..." and a backtrace, and the
 * process still dies of that signal. Off by default; KB_CRASH_REPORT=1
 * turns it on. Each case runs in a forked child (core dumps disabled).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"

enum how { SEGV, ABRT, FPE_RAISE, OVERFLOW };

static enum how crash_how;

/* Recurses until the stack overflows (the depth is a volatile, so the
 * compiler cannot prove the recursion endless or turn it into a loop). */
static volatile int overflow_depth = 1 << 30;

int kbt_deep(int n);
int kbt_deep(int n)
{
    volatile char pad[1024];
    pad[0] = (char)n;
    if (n >= overflow_depth)
        return 0;
    return kbt_deep(n + 1) + pad[0];
}

int kbt_crashing_rank(int rank, void *arg);
int kbt_crashing_rank(int rank, void *arg)
{
    (void)arg;
    if (kb_yield() != 0)
        return 1;
    if (rank == 2) {
        switch (crash_how) {
        case SEGV: {
            volatile int *volatile p = NULL;
            *p = 1;
            break;
        }
        case ABRT:
            abort();
        case FPE_RAISE:
            raise(SIGFPE);
            break;
        case OVERFLOW:
            return kbt_deep(0);
        }
    }
    return 0;
}

struct child_args {
    enum how how;
    int opt_on;
    int env_on;
};

static int crash_child(void *p)
{
    struct child_args *a = p;
    /* cmocka catches fatal signals in tests; this child wants the default. */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    crash_how = a->how;
    if (a->env_on)
        setenv("KB_CRASH_REPORT", "1", 1);
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 90;
    kb_spawn_opts o = {.crash_report = a->opt_on, .stack_size = 256 * 1024};
    int rc = kb_spawn(ctx, kbt_crashing_rank, NULL, 4, &o, NULL);
    kb_ctx_destroy(ctx);
    return rc == 0 ? 0 : 91;
}

/* frame: a symbol the backtrace must show (the crashing function). */
static void expect_report(struct child_args a, int sig, const char *line, const char *frame)
{
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(crash_child, &a, 30000, &c), 0);
    assert_false(c.timed_out);
    assert_true(WIFSIGNALED(c.status));
    assert_int_equal(WTERMSIG(c.status), sig);
    if (line) {
        assert_non_null(strstr(c.out, line));
        assert_non_null(strstr(c.out, kbt_backtrace_shows(frame))); /* the backtrace */
    } else {
        assert_null(strstr(c.out, "crashed:"));
    }
}

static void test_segv_in_a_rank_is_reported_and_still_kills_with_sigsegv(void **state)
{
    (void)state;
    expect_report((struct child_args){.how = SEGV, .opt_on = 1}, SIGSEGV,
                  "kbthreads: rank 2 (kb-rank-2) crashed: SIGSEGV", "kbt_crashing_rank");
}

static void test_abort_in_a_rank_is_reported_as_sigabrt(void **state)
{
    (void)state;
    expect_report((struct child_args){.how = ABRT, .opt_on = 1}, SIGABRT,
                  "kbthreads: rank 2 (kb-rank-2) crashed: SIGABRT", "(abort+");
}

static void test_sigfpe_in_a_rank_is_reported(void **state)
{
    (void)state;
    expect_report((struct child_args){.how = FPE_RAISE, .opt_on = 1}, SIGFPE,
                  "kbthreads: rank 2 (kb-rank-2) crashed: SIGFPE", "kbt_crashing_rank");
}

static void test_stack_overflow_in_a_rank_is_reported_from_the_alternate_stack(void **state)
{
    (void)state;
    if (kbt_on_valgrind())
        skip(); /* Valgrind cannot deliver a signal on a thread that overflowed its stack */
    expect_report((struct child_args){.how = OVERFLOW, .opt_on = 1}, SIGSEGV,
                  "kbthreads: rank 2 (kb-rank-2) crashed: SIGSEGV", "kbt_deep");
}

static void test_KB_CRASH_REPORT_turns_the_report_on(void **state)
{
    (void)state;
    expect_report((struct child_args){.how = SEGV, .env_on = 1}, SIGSEGV,
                  "kbthreads: rank 2 (kb-rank-2) crashed: SIGSEGV", "kbt_crashing_rank");
}

static void test_without_the_option_a_crash_prints_no_report(void **state)
{
    (void)state;
    expect_report((struct child_args){.how = SEGV}, SIGSEGV, NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segv_in_a_rank_is_reported_and_still_kills_with_sigsegv),
        cmocka_unit_test(test_abort_in_a_rank_is_reported_as_sigabrt),
        cmocka_unit_test(test_sigfpe_in_a_rank_is_reported),
        cmocka_unit_test(test_stack_overflow_in_a_rank_is_reported_from_the_alternate_stack),
        cmocka_unit_test(test_KB_CRASH_REPORT_turns_the_report_on),
        cmocka_unit_test(test_without_the_option_a_crash_prints_no_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
