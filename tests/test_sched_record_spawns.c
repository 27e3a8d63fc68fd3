/* SPDX-License-Identifier: MIT */
/*
 * Recordings for exploring tools: KB_RECORD gives every spawn of a process
 * its own recording in one file and KB_REPLAY hands the k-th back to the
 * k-th spawn; a recording is on disk round by round, so a process killed
 * mid-spawn leaves every round it began; a partial schedule forces only the
 * rounds it lists and never diverges.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"
#include "trace.h"

static char dir[] = "/tmp/kb-spawns-XXXXXX";

static const char *path(const char *name)
{
    static char buf[4][300];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static const char *slurp(const char *file)
{
    const char *text = kbt_slurp(file);
    assert_non_null(text);
    return text;
}

static void spit(const char *file, const char *text)
{
    assert_int_equal(kbt_spit(file, text), 0);
}

static int kill_in_round; /* a rank of round kill_in_round SIGKILLs its process; 0 = never */

static int stepper(int rank, void *arg)
{
    int steps = *(const int *)arg;
    for (int i = 0; i < steps; i++) {
        tr_add("rank %d step %d", rank, i);
        if (kill_in_round == i + 1 && rank == 1)
            raise(SIGKILL);
        if (kb_yield() != 0)
            return 1;
    }
    return 0;
}

/* Three spawns on one ctx, of 3, 2 and 4 ranks, each rank taking steps
 * turns; the trace of all three. */
static void three_spawns(int steps, int expect_rc)
{
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    static const int sizes[] = {3, 2, 4};
    for (int i = 0; i < 3; i++)
        assert_int_equal(kb_spawn(ctx, stepper, &steps, sizes[i], NULL, NULL), expect_rc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static void test_KB_RECORD_writes_one_recording_per_spawn_and_KB_REPLAY_hands_each_back(void **state)
{
    (void)state;
    setenv("KB_RECORD", path("three.sched"), 1);
    setenv("KB_SCHED_SEED", "11", 1);
    three_spawns(3, 0);
    char *seeded = strdup(tr_text());
    unsetenv("KB_SCHED_SEED");
    unsetenv("KB_RECORD");
    const char *text = slurp(path("three.sched"));
    assert_int_equal(count(text, "kbthreads-schedule 1\n"), 3);
    assert_non_null(strstr(text, "kbthreads-schedule 1\nspawn 1\nnprocs 3\n"));
    assert_non_null(strstr(text, "kbthreads-schedule 1\nspawn 2\nnprocs 2\n"));
    assert_non_null(strstr(text, "kbthreads-schedule 1\nspawn 3\nnprocs 4\n"));
    assert_int_equal(count(text, "end ok\n"), 3);

    three_spawns(3, 0);
    assert_string_not_equal(tr_text(), seeded); /* the seed changed the orders */
    setenv("KB_REPLAY", path("three.sched"), 1);
    three_spawns(3, 0);
    unsetenv("KB_REPLAY");
    assert_string_equal(tr_text(), seeded);
    free(seeded);
}

static void test_a_spawn_past_the_last_recording_diverges_before_any_rank_runs(void **state)
{
    (void)state;
    spit(path("two.sched"), "kbthreads-schedule 1\nnprocs 3\nround 1 0 1 2\n"
                            "kbthreads-schedule 1\nnprocs 2\nround 1 0 1\n");
    setenv("KB_REPLAY", path("two.sched"), 1);
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int one = 1;
    tr_reset();
    assert_int_equal(kb_spawn(ctx, stepper, &(int){0}, 3, NULL, NULL), 0);
    assert_int_equal(kb_spawn(ctx, stepper, &(int){0}, 2, NULL, NULL), 0);
    assert_int_equal(kb_spawn(ctx, stepper, &one, 2, NULL, NULL), KB_EDIVERGED);
    assert_string_equal(tr_text(), "");
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    unsetenv("KB_REPLAY");
}

static int killed_child(void *arg)
{
    (void)arg;
    setenv("KB_RECORD", path("killed.sched"), 1);
    kill_in_round = 3;
    three_spawns(5, 0);
    return 0;
}

static void test_a_process_killed_mid_spawn_leaves_every_round_it_began(void **state)
{
    (void)state;
    struct kbt_child res;
    assert_int_equal(kbt_run_forked(killed_child, NULL, 60000, &res), 0);
    assert_true(WIFSIGNALED(res.status));
    assert_int_equal(WTERMSIG(res.status), SIGKILL);
    const char *text = slurp(path("killed.sched"));
    assert_non_null(strstr(text, "spawn 1\nnprocs 3\nschedule round-robin\nround 1 0 1 2\ndrain 1 0\n"
                                 "round 2 0 1 2\ndrain 2 0\nround 3 0 1 2\n"));
    assert_null(strstr(text, "round 4"));
    assert_null(strstr(text, "end "));
}

static void test_a_partial_schedule_forces_only_its_rounds_and_never_diverges(void **state)
{
    (void)state;
    /* Round 2 listed with a rank (5) that is not there and without rank 0;
     * rounds 1 and 3-4 not listed; the program runs 4 rounds, not 9. */
    spit(path("partial.sched"), "kbthreads-schedule 1\nnprocs 6\npartial\nround 2 2 5 1\nround 9 1 0\n");
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int steps = 3;
    kb_spawn_opts o = {.replay_path = path("partial.sched"), .record_path = path("partial.out")};
    assert_int_equal(kb_spawn(ctx, stepper, &steps, 3, &o, NULL), KB_EDIVERGED); /* nprocs 6 recorded */
    spit(path("partial.sched"), "kbthreads-schedule 1\nnprocs 3\npartial\nround 2 2 1\nround 9 1 0\n");
    assert_int_equal(kb_spawn(ctx, stepper, &steps, 3, &o, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    const char *text = slurp(path("partial.out"));
    assert_non_null(strstr(text, "round 1 0 1 2\ndrain 1 0\nround 2 2 1 0\ndrain 2 0\n"
                                 "round 3 0 1 2\ndrain 3 0\nround 4 0 1 2\ndrain 4 0\nend ok\n"));
}

static void test_a_partial_schedule_past_its_last_recording_runs_round_robin(void **state)
{
    (void)state;
    spit(path("p1.sched"), "kbthreads-schedule 1\nspawn 1\nnprocs 3\npartial\nround 1 2 1 0\n");
    setenv("KB_REPLAY", path("p1.sched"), 1);
    setenv("KB_RECORD", path("p1.out"), 1);
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int steps = 1;
    assert_int_equal(kb_spawn(ctx, stepper, &steps, 3, NULL, NULL), 0);
    assert_int_equal(kb_spawn(ctx, stepper, &steps, 2, NULL, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    unsetenv("KB_REPLAY");
    unsetenv("KB_RECORD");
    const char *text = slurp(path("p1.out"));
    assert_non_null(strstr(text, "spawn 1\nnprocs 3\nschedule round-robin\nround 1 2 1 0\n"));
    assert_non_null(strstr(text, "spawn 2\nnprocs 2\nschedule round-robin\nround 1 0 1\n"));
}

static void test_malformed_partial_schedules_are_EINVAL(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "kbthreads-schedule 1\nnprocs 3\npartial\nround 3 0 1 2\nround 2 0 1 2\n",          /* falling */
        "kbthreads-schedule 1\nnprocs 3\npartial\nround 2 0 1 2\nround 2 0 1 2\n",          /* repeated */
        "kbthreads-schedule 1\nnprocs 3\npartial\nround 1 0 0\n",                           /* rank twice */
        "kbthreads-schedule 1\nnprocs 3\nround 1 0 1 2\nkbthreads-schedule 1\nround 1 0\n", /* no nprocs */
        "nprocs 3\nkbthreads-schedule 1\nnprocs 3\n", /* a line before the header */
    };
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int steps = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spit(path("bad.sched"), bad[i]);
        kb_spawn_opts o = {.replay_path = path("bad.sched")};
        tr_reset();
        assert_int_equal(kb_spawn(ctx, stepper, &steps, 3, &o, NULL), KB_EINVAL);
        assert_string_equal(tr_text(), "");
    }
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return kbt_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_process_killed_mid_spawn_leaves_every_round_it_began),
        cmocka_unit_test(test_KB_RECORD_writes_one_recording_per_spawn_and_KB_REPLAY_hands_each_back),
        cmocka_unit_test(test_a_spawn_past_the_last_recording_diverges_before_any_rank_runs),
        cmocka_unit_test(test_a_partial_schedule_forces_only_its_rounds_and_never_diverges),
        cmocka_unit_test(test_a_partial_schedule_past_its_last_recording_runs_round_robin),
        cmocka_unit_test(test_malformed_partial_schedules_are_EINVAL),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
