/* SPDX-License-Identifier: MIT */
/*
 * Record and replay (record_path, replay_path): the record's format, a
 * seeded run replayed without its seed gives the identical trace, and an
 * edited program replayed against an old recording fails with KB_EDIVERGED
 * naming the turn where it stopped matching. Bad recordings are refused
 * before any rank runs.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"
#include "trace.h"

static char dir[] = "/tmp/kb-replay-XXXXXX";

static const char *path(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static char *slurp(const char *file)
{
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void spit(const char *file, const char *text)
{
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* yields[r]: how many times rank r yields before returning. */
static int yields[8];

static int yielder(int rank, void *arg)
{
    (void)arg;
    for (int i = 0; i < yields[rank]; i++) {
        tr_add("rank %d step %d", rank, i);
        int rc = kb_wait(kb_current_ctx(), (kb_handle)(1000 + 10 * rank + i));
        if (rc != 0)
            return rc;
    }
    tr_add("rank %d done", rank);
    return 0;
}

static int spawn(int nprocs, const kb_spawn_opts *o, kb_spawn_error **err)
{
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    int rc = kb_spawn(ctx, yielder, NULL, nprocs, o, err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    return rc;
}

static void test_the_record_lists_each_rounds_turns_drains_and_the_end(void **state)
{
    (void)state;
    int y[] = {2, 0, 1};
    memcpy(yields, y, sizeof y);
    kb_spawn_opts o = {.record_path = path("rr.sched")};
    assert_int_equal(spawn(3, &o, NULL), 0);
    assert_string_equal(slurp(path("rr.sched")), "kbthreads-schedule 1\n"
                                                 "nprocs 3\n"
                                                 "schedule round-robin\n"
                                                 "round 1 0 1 2\n"
                                                 "drain 1 2\n"
                                                 "round 2 0 2\n"
                                                 "drain 2 1\n"
                                                 "round 3 0\n"
                                                 "drain 3 0\n"
                                                 "end ok\n");
}

static void test_a_seeded_run_replayed_without_its_seed_gives_the_same_trace(void **state)
{
    (void)state;
    int y[] = {3, 1, 4, 2, 0, 3};
    memcpy(yields, y, sizeof y);
    kb_spawn_opts rec = {.schedule = KB_SCHED_SEEDED, .seed = 1234, .record_path = path("seeded.sched")};
    assert_int_equal(spawn(6, &rec, NULL), 0);
    char *recorded = strdup(tr_text());
    kb_spawn_opts plain = {0};
    assert_int_equal(spawn(6, &plain, NULL), 0);
    assert_string_not_equal(tr_text(), recorded); /* the seed did change the order */
    kb_spawn_opts rep = {.replay_path = path("seeded.sched")};
    assert_int_equal(spawn(6, &rep, NULL), 0);
    assert_string_equal(tr_text(), recorded);
    free(recorded);
}

static void test_an_extra_yield_is_reported_as_divergence_at_its_turn(void **state)
{
    (void)state;
    int y[] = {2, 2, 2};
    memcpy(yields, y, sizeof y);
    kb_spawn_opts rec = {.record_path = path("three.sched")};
    assert_int_equal(spawn(3, &rec, NULL), 0);
    /* The edited program: rank 1 waits once more. Rounds 1-3 match (9
     * turns: 3 + 3 + 3); in round 4 rank 1 is still live but the recording
     * has no round 4: turn 10 diverges. */
    yields[1] = 3;
    kb_spawn_opts rep = {.replay_path = path("three.sched")};
    kb_spawn_error *err = NULL;
    assert_int_equal(spawn(3, &rep, &err), KB_EDIVERGED);
    assert_non_null(err);
    assert_int_equal(kb_spawn_error_code(err), KB_EDIVERGED);
    assert_int_equal(kb_spawn_error_turn(err), 10);
    assert_non_null(strstr(kb_spawn_error_message(err), "replay diverged at turn 10 (round 4)"));
    assert_int_equal(kb_spawn_error_live_count(err), 1);
    assert_int_equal(kb_spawn_error_live_get(err, 0)->rank, 1);
    assert_int_equal(kb_spawn_error_live_get(err, 0)->where, KB_AT_WAIT);
    assert_int_equal(kb_spawn_error_live_get(err, 0)->handle, 1012);
    kb_spawn_error_free(err);
}

static void test_a_rank_finishing_early_is_reported_at_the_round_it_is_missing_from(void **state)
{
    (void)state;
    int y[] = {3, 3};
    memcpy(yields, y, sizeof y);
    kb_spawn_opts rec = {.record_path = path("two.sched")};
    assert_int_equal(spawn(2, &rec, NULL), 0);
    yields[0] = 1; /* rank 0 now finishes in round 2, not round 4 */
    kb_spawn_opts rep = {.replay_path = path("two.sched")};
    kb_spawn_error *err = NULL;
    assert_int_equal(spawn(2, &rep, &err), KB_EDIVERGED);
    /* Rounds 1 and 2 match (4 turns); round 3 was recorded with ranks
     * [0, 1], the program has only [1]. */
    assert_int_equal(kb_spawn_error_turn(err), 5);
    assert_non_null(strstr(kb_spawn_error_message(err),
                           "replay diverged at turn 5 (round 3): the recording has ranks [0, 1] live, the "
                           "program [1]"));
    kb_spawn_error_free(err);
}

static void test_a_program_ending_before_the_recording_diverges(void **state)
{
    (void)state;
    int y[] = {2};
    memcpy(yields, y, sizeof y);
    kb_spawn_opts rec = {.record_path = path("one.sched")};
    assert_int_equal(spawn(1, &rec, NULL), 0);
    yields[0] = 1;
    kb_spawn_opts rep = {.replay_path = path("one.sched")};
    kb_spawn_error *err = NULL;
    assert_int_equal(spawn(1, &rep, &err), KB_EDIVERGED);
    assert_int_equal(kb_spawn_error_turn(err), 3);
    assert_int_equal(kb_spawn_error_live_count(err), 0);
    kb_spawn_error_free(err);
}

static void test_a_recording_for_another_nprocs_is_refused_before_any_rank_runs(void **state)
{
    (void)state;
    int y[] = {1, 1, 1};
    memcpy(yields, y, sizeof y);
    kb_spawn_opts rec = {.record_path = path("n3.sched")};
    assert_int_equal(spawn(3, &rec, NULL), 0);
    kb_spawn_opts rep = {.replay_path = path("n3.sched")};
    assert_int_equal(spawn(2, &rep, NULL), KB_EDIVERGED);
    assert_string_equal(tr_text(), "");
}

static void test_malformed_recordings_are_EINVAL_before_any_rank_runs(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",                                                      /* empty */
        "kbthreads-schedule 2\nnprocs 1\nround 1 0\n",           /* unknown version */
        "nprocs 1\nround 1 0\n",                                 /* no version line */
        "kbthreads-schedule 1\nround 1 0\n",                     /* no nprocs */
        "kbthreads-schedule 1\nnprocs 1\nround 2 0\n",           /* rounds out of sequence */
        "kbthreads-schedule 1\nnprocs 1\nround 1 1\n",           /* rank out of range */
        "kbthreads-schedule 1\nnprocs 2\nround 1 0 0\n",         /* a rank twice in a round */
        "kbthreads-schedule 1\nnprocs 1\nround 1 x\n",           /* not a number */
        "kbthreads-schedule 1\nnprocs 1\nnprocs 1\nround 1 0\n", /* nprocs twice */
    };
    yields[0] = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spit(path("bad.sched"), bad[i]);
        kb_spawn_opts rep = {.replay_path = path("bad.sched")};
        assert_int_equal(spawn(1, &rep, NULL), KB_EINVAL);
        assert_string_equal(tr_text(), "");
    }
}

static void test_a_missing_recording_is_its_errno(void **state)
{
    (void)state;
    kb_spawn_opts rep = {.replay_path = path("no-such-file")};
    assert_int_equal(spawn(1, &rep, NULL), -ENOENT);
}

static void test_an_unwritable_record_path_is_its_errno_before_any_rank_runs(void **state)
{
    (void)state;
    yields[0] = 1;
    kb_spawn_opts rec = {.record_path = "/nonexistent-dir/x.sched"};
    assert_int_equal(spawn(1, &rec, NULL), -ENOENT);
    assert_string_equal(tr_text(), "");
}

static void test_KB_RECORD_and_KB_REPLAY_work_without_code_changes(void **state)
{
    (void)state;
    int y[] = {1, 2};
    memcpy(yields, y, sizeof y);
    setenv("KB_RECORD", path("env.sched"), 1);
    assert_int_equal(spawn(2, NULL, NULL), 0);
    unsetenv("KB_RECORD");
    assert_non_null(strstr(slurp(path("env.sched")), "round 3 1\n"));
    yields[1] = 3;
    setenv("KB_REPLAY", path("env.sched"), 1);
    assert_int_equal(spawn(2, NULL, NULL), KB_EDIVERGED);
    unsetenv("KB_REPLAY");
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
        cmocka_unit_test(test_the_record_lists_each_rounds_turns_drains_and_the_end),
        cmocka_unit_test(test_a_seeded_run_replayed_without_its_seed_gives_the_same_trace),
        cmocka_unit_test(test_an_extra_yield_is_reported_as_divergence_at_its_turn),
        cmocka_unit_test(test_a_rank_finishing_early_is_reported_at_the_round_it_is_missing_from),
        cmocka_unit_test(test_a_program_ending_before_the_recording_diverges),
        cmocka_unit_test(test_a_recording_for_another_nprocs_is_refused_before_any_rank_runs),
        cmocka_unit_test(test_malformed_recordings_are_EINVAL_before_any_rank_runs),
        cmocka_unit_test(test_a_missing_recording_is_its_errno),
        cmocka_unit_test(test_an_unwritable_record_path_is_its_errno_before_any_rank_runs),
        cmocka_unit_test(test_KB_RECORD_and_KB_REPLAY_work_without_code_changes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
