/* SPDX-License-Identifier: MIT */
/*
 * The timeline (trace_path, KB_TRACE): a Chrome trace-event JSON file that
 * a real JSON parser accepts (tests/sched/check_trace.py, run with python3),
 * whose slices and instants match a known program event for event, and
 * writing it does not change the schedule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"
#include "trace.h"

static char dir[] = "/tmp/kb-trace-XXXXXX";
static char file[300];

static int engine_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)self;
    (void)h;
    (void)meta;
    (void)origin;
    return 0;
}

/* Rank 0 waits on 7; rank 1 submits collective 9 and waits on it; rank 2
 * records a failure with kb_fail and returns, in round 1. */
static int known(int rank, void *arg)
{
    (void)arg;
    kb_ctx *ctx = kb_current_ctx();
    tr_add("rank %d start", rank);
    if (rank == 0 && kb_wait(ctx, 7) != 0)
        return 1;
    if (rank == 1 && (kb_collective_submit(ctx, 9, 4, NULL) != 0 || kb_wait(ctx, 9) != 0))
        return 1;
    if (rank == 2)
        kb_fail(3, "rank 2 fails");
    else if (kb_barrier() != 0)
        return 1;
    tr_add("rank %d end", rank);
    return 0;
}

/* Run the checker; return its stdout (the events), or fail the test. */
static char *check(const char *json)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "python3 %s/sched/check_trace.py %s", KB_TESTS_DIR, json);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char out[65536];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    if (status != 0)
        fail_msg("check_trace.py: %s", out);
    return out;
}

static int spawn_known(const char *trace, kb_spawn_error **err)
{
    kb_engine eng = {.wait = engine_wait};
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    tr_reset();
    kb_spawn_opts o = {.trace_path = trace};
    int rc = kb_spawn(ctx, known, NULL, 3, &o, err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    return rc;
}

static void test_the_trace_is_valid_json_with_the_known_programs_events(void **state)
{
    (void)state;
    kb_spawn_error *err = NULL;
    assert_int_equal(spawn_known(file, &err), KB_ESPAWN);
    kb_spawn_error_free(err);
    /* File order is the order things happened (a slice is written when it
     * ends). Round 1: each rank's turn with its instants; rank 2's failure
     * ends the round, so no drain: the driver stops the spawn and cancels
     * ranks 0 and 1, whose cancelled turns end their functions. */
    assert_string_equal(check(file), "rank 0 wait handle=7\n"
                                     "rank 0 turn round=1\n"
                                     "rank 1 collective handle=9,sip_id=4\n"
                                     "rank 1 wait handle=9\n"
                                     "rank 1 turn round=1\n"
                                     "rank 2 fail code=3\n"
                                     "rank 2 turn round=1\n"
                                     "driver round round=1\n"
                                     "driver stop code=-10000\n"
                                     "rank 0 cancel\n"
                                     "rank 0 turn round=1\n"
                                     "rank 1 cancel\n"
                                     "rank 1 turn round=1\n");
}

static int steps(int rank, void *arg)
{
    (void)arg;
    kb_ctx *ctx = kb_current_ctx();
    for (int i = 0; i < 2; i++) {
        tr_add("rank %d step %d", rank, i);
        if (kb_wait(ctx, (kb_handle)(100 + rank)) != 0) /* the second one takes the fast path */
            return 1;
        if (kb_barrier() != 0)
            return 1;
    }
    return 0;
}

static void test_drains_show_their_engine_waits_and_barriers_their_arrivals(void **state)
{
    (void)state;
    kb_engine eng = {.wait = engine_wait};
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    kb_spawn_opts o = {.trace_path = file};
    tr_reset();
    assert_int_equal(kb_spawn(ctx, steps, NULL, 2, &o, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_string_equal(check(file), "rank 0 wait handle=100\n"
                                     "rank 0 turn round=1\n"
                                     "rank 1 wait handle=101\n"
                                     "rank 1 turn round=1\n"
                                     "driver round round=1\n"
                                     "driver engine_wait handle=100,origin=queued\n"
                                     "driver engine_wait handle=101,origin=queued\n"
                                     "driver drain round=1\n"
                                     "rank 0 barrier\n"
                                     "rank 0 turn round=2\n"
                                     "rank 1 barrier\n"
                                     "rank 1 turn round=2\n"
                                     "driver round round=2\n"
                                     "driver drain round=2\n"
                                     "rank 0 wait_fast handle=100\n"
                                     "rank 0 barrier\n"
                                     "rank 0 turn round=3\n"
                                     "rank 1 wait_fast handle=101\n"
                                     "rank 1 barrier\n"
                                     "rank 1 turn round=3\n"
                                     "driver round round=3\n"
                                     "driver drain round=3\n"
                                     "rank 0 turn round=4\n"
                                     "rank 1 turn round=4\n"
                                     "driver round round=4\n"
                                     "driver drain round=4\n");
}

static void test_tracing_does_not_change_the_schedule(void **state)
{
    (void)state;
    kb_spawn_error *err = NULL;
    assert_int_equal(spawn_known(NULL, &err), KB_ESPAWN);
    char *plain = strdup(tr_text());
    kb_spawn_error_free(err);
    assert_int_equal(spawn_known(file, &err), KB_ESPAWN);
    assert_string_equal(tr_text(), plain);
    kb_spawn_error_free(err);
    free(plain);
}

static void test_KB_TRACE_writes_the_trace_without_code_changes(void **state)
{
    (void)state;
    char env_file[320];
    snprintf(env_file, sizeof env_file, "%s/env.json", dir);
    setenv("KB_TRACE", env_file, 1);
    kb_spawn_error *err = NULL;
    assert_int_equal(spawn_known(NULL, &err), KB_ESPAWN);
    unsetenv("KB_TRACE");
    kb_spawn_error_free(err);
    assert_non_null(strstr(check(env_file), "rank 2 fail code=3\n"));
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(file, sizeof file, "%s/trace.json", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return kbt_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_trace_is_valid_json_with_the_known_programs_events),
        cmocka_unit_test(test_drains_show_their_engine_waits_and_barriers_their_arrivals),
        cmocka_unit_test(test_tracing_does_not_change_the_schedule),
        cmocka_unit_test(test_KB_TRACE_writes_the_trace_without_code_changes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
