/* SPDX-License-Identifier: MIT */
/*
 * KB_SCHED_DELAYS: round-robin, except that at each delayed turn the rank
 * whose turn it is moves behind the ranks still to run in its round
 * (docs/scheduling.md, "Delays"). Turns count from 1 over the spawn, one
 * per live rank per round; a delay of a round's last rank changes nothing;
 * every order of a round comes from exactly one list of delays with fewer
 * delays at each turn than ranks left to run; bad values are KB_EINVAL in
 * code, ignored with a warning that says why in the environment, which
 * gives a program's k-th spawn the value's k-th list.
 */
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

#define ROUNDS 3 /* every rank yields ROUNDS - 1 times: ROUNDS rounds */

static char dir[] = "/tmp/kb-delays-XXXXXX";
static char file[300];

static int yielder(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (int i = 1; i < ROUNDS; i++)
        if (kb_yield() != 0)
            return 1;
    return 0;
}

/* Rank r yields r times: it runs in rounds 1 .. r + 1, then finishes. */
static int staggered(int rank, void *arg)
{
    (void)arg;
    for (int i = 0; i < rank; i++)
        if (kb_yield() != 0)
            return 1;
    return 0;
}

/* Spawn n ranks of fn with o (record_path set here): the recording's
 * text (static), or NULL when kb_spawn returned *rc != 0. */
static const char *record_fn(kb_rank_fn fn, int n, kb_spawn_opts o, int *rc)
{
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    o.record_path = file;
    remove(file);
    *rc = kb_spawn(ctx, fn, NULL, n, &o, NULL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    if (*rc != 0)
        return NULL;
    const char *text = kbt_slurp(file);
    assert_non_null(text);
    return text;
}

static const char *record_ok(int n, kb_spawn_opts o)
{
    int rc;
    const char *t = record_fn(yielder, n, o, &rc);
    assert_int_equal(rc, 0);
    return t;
}

/* n yielders with the given delays (n_delays of them). */
static const char *with_delays(int n, const uint64_t *delays, size_t ndelays)
{
    kb_spawn_opts o = {.schedule = KB_SCHED_DELAYS, .delays = delays, .ndelays = ndelays};
    return record_ok(n, o);
}

/* Round k's line of a recording ("round k r r r"), without its newline,
 * into a static buffer. */
static const char *round_line(const char *text, int k)
{
    static char line[256];
    char head[32];
    snprintf(head, sizeof head, "\nround %d ", k);
    const char *p = strstr(text, head);
    assert_non_null(p);
    p++;
    size_t n = strcspn(p, "\n");
    assert_true(n < sizeof line);
    memcpy(line, p, n);
    line[n] = '\0';
    return line;
}

/* ---- what a delay does ---------------------------------------------------- */

static void test_a_delay_moves_the_rank_behind_the_ranks_still_to_run_in_its_round(void **state)
{
    (void)state;
    /* docs/scheduling.md's drawing: 3 ranks, turn 1 (rank 0) and turn 5
     * (round 2's second turn, rank 1) delayed. */
    const uint64_t d[] = {1, 5};
    const char *text = with_delays(3, d, 2);
    assert_string_equal(round_line(text, 1), "round 1 1 2 0");
    assert_string_equal(round_line(text, 2), "round 2 0 2 1");
    assert_string_equal(round_line(text, 3), "round 3 0 1 2");
}

static void test_delaying_the_last_rank_of_a_round_changes_nothing(void **state)
{
    (void)state;
    const uint64_t d[] = {3, 6, 6, 9};
    const char *text = with_delays(3, d, 4);
    for (int k = 1; k <= ROUNDS; k++) {
        char want[32];
        snprintf(want, sizeof want, "round %d 0 1 2", k);
        assert_string_equal(round_line(text, k), want);
    }
}

static void test_two_delays_at_one_turn_move_two_ranks_behind(void **state)
{
    (void)state;
    const uint64_t d[] = {1, 1};
    assert_string_equal(round_line(with_delays(4, d, 2), 1), "round 1 2 3 0 1");
}

static void test_as_many_delays_as_ranks_left_to_run_bring_the_order_back(void **state)
{
    (void)state;
    const uint64_t four[] = {1, 1, 1, 1}, three[] = {2, 2, 2}, five[] = {1, 1, 1, 1, 1};
    assert_string_equal(round_line(with_delays(4, four, 4), 1), "round 1 0 1 2 3");
    assert_string_equal(round_line(with_delays(4, three, 3), 1), "round 1 0 1 2 3");
    assert_string_equal(round_line(with_delays(4, five, 5), 1), "round 1 1 2 3 0");
}

static void test_a_second_delay_in_a_round_applies_to_the_order_the_first_left(void **state)
{
    (void)state;
    /* turn 1: 0 moves behind 1 2 3, 1 runs; turn 2: of 2 3 0, 2 moves
     * behind 3 0, 3 runs; then 0, then 2. */
    const uint64_t d[] = {1, 2};
    assert_string_equal(round_line(with_delays(4, d, 2), 1), "round 1 1 3 0 2");
}

static void test_turns_are_counted_over_the_live_ranks_only(void **state)
{
    (void)state;
    /* staggered, 3 ranks: round 1 has turns 1-3 (ranks 0 1 2), round 2
     * turns 4-5 (ranks 1 2), round 3 turn 6 (rank 2). */
    const uint64_t d[] = {4};
    kb_spawn_opts o = {.schedule = KB_SCHED_DELAYS, .delays = d, .ndelays = 1};
    int rc;
    const char *text = record_fn(staggered, 3, o, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(round_line(text, 1), "round 1 0 1 2");
    assert_string_equal(round_line(text, 2), "round 2 2 1");
    assert_string_equal(round_line(text, 3), "round 3 2");
}

static void test_delays_past_the_end_of_the_spawn_are_never_reached(void **state)
{
    (void)state;
    const uint64_t d[] = {10, 1000};
    const char *text = with_delays(3, d, 2);
    assert_string_equal(round_line(text, 3), "round 3 0 1 2");
    assert_non_null(strstr(text, "\nend ok\n"));
}

/* The delays of the list k[0..2] for 4 ranks' round 1 (k[p] < 4 - p
 * delays at turn p + 1) into d: how many. */
static size_t canonical(const int k[3], uint64_t *d)
{
    size_t n = 0;
    for (int p = 0; p < 3; p++)
        for (int c = 0; c < k[p]; c++)
            d[n++] = (uint64_t)p + 1;
    return n;
}

static void
test_every_order_of_a_round_comes_from_exactly_one_list_with_fewer_delays_per_turn_than_ranks_left(
    void **state)
{
    (void)state;
    /* 4 ranks: 4 * 3 * 2 lists with k[p] < 4 - p give the 24 orders, each
     * once; by number of delays 1, 3, 5, 6, 5, 3, 1 of them (the product
     * (1)(1 + q)(1 + q + q^2)(1 + q + q^2 + q^3) of docs/scheduling.md). */
    char seen[24][256]; /* as long as a round_line */
    int nseen = 0, by_delays[7] = {0};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++) {
                const int k[3] = {a, b, c};
                uint64_t d[8];
                size_t n = canonical(k, d);
                const char *line = round_line(with_delays(4, d, n), 1);
                for (int i = 0; i < nseen; i++)
                    assert_string_not_equal(seen[i], line);
                snprintf(seen[nseen++], sizeof seen[0], "%s", line);
                by_delays[n]++;
            }
    assert_int_equal(nseen, 24);
    const int mahonian[7] = {1, 3, 5, 6, 5, 3, 1};
    assert_memory_equal(by_delays, mahonian, sizeof mahonian);
}

static void test_the_same_delays_give_the_same_trace(void **state)
{
    (void)state;
    const uint64_t d[] = {2, 4, 4, 8};
    char *first = strdup(with_delays(4, d, 4));
    for (int i = 0; i < 3; i++)
        assert_string_equal(with_delays(4, d, 4), first);
    free(first);
}

static void test_the_recording_names_the_delays(void **state)
{
    (void)state;
    const uint64_t d[] = {1, 5, 5};
    assert_non_null(strstr(with_delays(3, d, 3), "\nschedule delays 1 5 5\n"));
    assert_non_null(strstr(with_delays(3, NULL, 0), "\nschedule delays none\n"));
    uint64_t many[100];
    for (int i = 0; i < 100; i++)
        many[i] = 1000 + (uint64_t)i;
    const char *text = with_delays(3, many, 100);
    assert_non_null(strstr(text, " 1062 1063 ... (100 in all)\n")); /* the first 64, then the count */
}

static void test_the_callers_array_is_copied_when_the_spawn_starts(void **state)
{
    (void)state;
    uint64_t d[] = {1};
    kb_spawn_opts o = {.schedule = KB_SCHED_DELAYS, .delays = d, .ndelays = 1, .record_path = file};
    kb_ctx *ctx;
    kb_process_context *pc;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    remove(file);
    assert_int_equal(kb_start(ctx, yielder, NULL, 3, &o, &pc), 0);
    d[0] = 2;
    assert_int_equal(kb_join(pc, -1, NULL), 1);
    kb_process_context_free(pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    const char *text = kbt_slurp(file);
    assert_non_null(text);
    assert_string_equal(round_line(text, 1), "round 1 1 2 0");
}

static void test_bad_delays_are_EINVAL(void **state)
{
    (void)state;
    int rc;
    const uint64_t zero[] = {0, 3}, descending[] = {4, 3}, repeated[] = {3, 3};
    kb_spawn_opts o = {.schedule = KB_SCHED_DELAYS, .delays = NULL, .ndelays = 2};
    assert_null(record_fn(yielder, 3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.delays = zero;
    assert_null(record_fn(yielder, 3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.delays = descending;
    assert_null(record_fn(yielder, 3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.delays = repeated; /* two delays at turn 3: fine */
    assert_non_null(record_fn(yielder, 3, o, &rc));
    o = (kb_spawn_opts){.schedule = KB_SCHED_DELAYS}; /* none: round-robin */
    assert_non_null(record_fn(yielder, 3, o, &rc));
    o = (kb_spawn_opts){.schedule = (kb_schedule)(KB_SCHED_DELAYS + 1)}; /* past the last */
    assert_null(record_fn(yielder, 3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
}

/* ---- the environment ------------------------------------------------------- */

static void test_KB_SCHED_DELAYS_selects_the_schedule_the_option_gives(void **state)
{
    (void)state;
    const uint64_t d[] = {2, 4, 4, 8};
    char *coded = strdup(with_delays(4, d, 4));
    setenv("KB_SCHED_DELAYS", "2,4,4,8", 1);
    assert_string_equal(record_ok(4, (kb_spawn_opts){0}), coded);
    unsetenv("KB_SCHED_DELAYS");
    free(coded);
}

static void test_KB_SCHED_DELAYS_gives_the_k_th_spawn_the_k_th_list(void **state)
{
    (void)state;
    setenv("KB_SCHED_DELAYS", "1//2", 1);
    assert_string_equal(round_line(record_ok(3, (kb_spawn_opts){0}), 1), "round 1 1 2 0");
    assert_string_equal(round_line(record_ok(3, (kb_spawn_opts){0}), 1), "round 1 0 1 2");
    assert_string_equal(round_line(record_ok(3, (kb_spawn_opts){0}), 1), "round 1 0 2 1");
    /* past the last list: round-robin */
    assert_non_null(strstr(record_ok(3, (kb_spawn_opts){0}), "\nschedule delays none\nround 1 0 1 2\n"));
    /* a new value starts the count again */
    setenv("KB_SCHED_DELAYS", "1//2/", 1);
    assert_string_equal(round_line(record_ok(3, (kb_spawn_opts){0}), 1), "round 1 1 2 0");
    unsetenv("KB_SCHED_DELAYS");
}

/* Spawn 3 yielders with KB_SCHED_DELAYS=value, its stderr into err (cap
 * bytes); the recording's text. */
static const char *with_env_capturing_stderr(const char *value, char *err, size_t cap)
{
    setenv("KB_SCHED_DELAYS", value, 1);
    struct kbt_stderr cap_err;
    assert_int_equal(kbt_stderr_begin(&cap_err), 0);
    const char *text = record_ok(3, (kb_spawn_opts){0});
    kbt_stderr_end(&cap_err, err, cap);
    unsetenv("KB_SCHED_DELAYS");
    return text;
}

static void test_a_malformed_KB_SCHED_DELAYS_is_ignored_with_a_warning_that_says_why(void **state)
{
    (void)state;
    static const struct {
        const char *value, *why;
    } bad[] = {
        {"x", "'x' at character 1 is not part of a turn number"},
        {"-1", "'-' at character 1 is not part of a turn number"},
        {"+1", "'+' at character 1 is not part of a turn number"},
        {" 1", "' ' at character 1 is not part of a turn number"},
        {"1 ", "' ' at character 2 is not part of a turn number"},
        {"1.5", "'.' at character 2 is not part of a turn number"},
        {"1:2", "':' at character 2 is not part of a turn number"},
        {"0", "turn 0 at character 1: turns are numbered from 1"},
        {"2,0", "turn 0 at character 3: turns are numbered from 1"},
        {"3,2", "turn 2 after turn 3: a list must be in ascending order"},
        {"1/3,2", "turn 2 after turn 3: a list must be in ascending order"}, /* a later spawn's list too */
        {"1,,2", "an empty item at character 3"},
        {"1,", "an empty item at character 3"},
        {"1,/2", "an empty item at character 3"},
        {",1", "',' at character 1 is not part of a turn number"},
        {"99999999999999999999999", "the turn at character 1 is too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[1024], want[512];
        const char *text = with_env_capturing_stderr(bad[i].value, err, sizeof err);
        assert_non_null(strstr(text, "\nschedule round-robin\n"));
        snprintf(want, sizeof want, "kbthreads: ignoring KB_SCHED_DELAYS=%s (%s; want turn numbers from 1",
                 bad[i].value, bad[i].why);
        if (!strstr(err, want))
            fail_msg("KB_SCHED_DELAYS=%s: stderr \"%s\", want \"%s\"", bad[i].value, err, want);
    }
}

static void test_KB_SCHED_DELAYS_yields_to_the_other_schedule_variables(void **state)
{
    (void)state;
    setenv("KB_SCHED_SEED", "3", 1);
    char err[1024];
    const char *text = with_env_capturing_stderr("1", err, sizeof err);
    unsetenv("KB_SCHED_SEED");
    assert_non_null(strstr(text, "\nschedule seeded 3\n"));
    assert_non_null(strstr(err, "kbthreads: ignoring KB_SCHED_DELAYS=1 (KB_SCHED_SEED is set)"));
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(file, sizeof file, "%s/rec.sched", dir);
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
        cmocka_unit_test(test_a_delay_moves_the_rank_behind_the_ranks_still_to_run_in_its_round),
        cmocka_unit_test(test_delaying_the_last_rank_of_a_round_changes_nothing),
        cmocka_unit_test(test_two_delays_at_one_turn_move_two_ranks_behind),
        cmocka_unit_test(test_as_many_delays_as_ranks_left_to_run_bring_the_order_back),
        cmocka_unit_test(test_a_second_delay_in_a_round_applies_to_the_order_the_first_left),
        cmocka_unit_test(test_turns_are_counted_over_the_live_ranks_only),
        cmocka_unit_test(test_delays_past_the_end_of_the_spawn_are_never_reached),
        cmocka_unit_test(
            test_every_order_of_a_round_comes_from_exactly_one_list_with_fewer_delays_per_turn_than_ranks_left),
        cmocka_unit_test(test_the_same_delays_give_the_same_trace),
        cmocka_unit_test(test_the_recording_names_the_delays),
        cmocka_unit_test(test_the_callers_array_is_copied_when_the_spawn_starts),
        cmocka_unit_test(test_bad_delays_are_EINVAL),
        cmocka_unit_test(test_KB_SCHED_DELAYS_selects_the_schedule_the_option_gives),
        cmocka_unit_test(test_KB_SCHED_DELAYS_gives_the_k_th_spawn_the_k_th_list),
        cmocka_unit_test(test_a_malformed_KB_SCHED_DELAYS_is_ignored_with_a_warning_that_says_why),
        cmocka_unit_test(test_KB_SCHED_DELAYS_yields_to_the_other_schedule_variables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
