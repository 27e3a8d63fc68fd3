/* SPDX-License-Identifier: MIT */
/*
 * Seeded orders (kb_spawn_opts.schedule = KB_SCHED_SEEDED): each round
 * visits the live ranks in a permutation drawn from the seed; the same seed
 * gives the same trace, other seeds other traces; round robin is untouched;
 * drains and cancellation order do not change; KB_SCHED_SEED turns it on.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "trace.h"

#define NR    6
#define STEPS 4

/* Each rank records its turns; the shared counter makes the result depend
 * on the order (the last rank to run in a round owns the round). */
static int last_in_round[STEPS + 1];

static int order_sensitive(int rank, void *arg)
{
    (void)arg;
    for (int s = 0; s <= STEPS; s++) {
        tr_add("turn %d", rank);
        last_in_round[s] = rank;
        if (s < STEPS && kb_yield() != 0)
            return 1;
    }
    return 0;
}

static char *run_with(kb_schedule schedule, uint64_t seed)
{
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    kb_spawn_opts o = {.schedule = schedule, .seed = seed};
    assert_int_equal(kb_spawn(ctx, order_sensitive, NULL, NR, &o, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    return strdup(tr_text());
}

/* Every round (NR consecutive turn lines) holds every rank once. */
static void assert_each_round_is_a_permutation(const char *text)
{
    const char *p = text;
    for (int round = 0; round <= STEPS; round++) {
        int seen[NR] = {0};
        for (int i = 0; i < NR; i++) {
            int r;
            assert_int_equal(sscanf(p, "turn %d", &r), 1);
            assert_true(r >= 0 && r < NR);
            seen[r]++;
            p = strchr(p, '\n') + 1;
        }
        for (int r = 0; r < NR; r++)
            assert_int_equal(seen[r], 1);
    }
    assert_string_equal(p, "");
}

static void test_round_robin_is_rank_order_every_round(void **state)
{
    (void)state;
    char *t = run_with(KB_SCHED_ROUND_ROBIN, 0);
    char want[512] = "";
    for (int round = 0; round <= STEPS; round++)
        for (int r = 0; r < NR; r++)
            sprintf(want + strlen(want), "turn %d\n", r);
    assert_string_equal(t, want);
    free(t);
}

static void test_a_seed_gives_a_permutation_of_the_live_ranks_each_round(void **state)
{
    (void)state;
    char *t = run_with(KB_SCHED_SEEDED, 42);
    assert_each_round_is_a_permutation(t);
    free(t);
}

static void test_the_same_seed_gives_the_same_trace(void **state)
{
    (void)state;
    char *a = run_with(KB_SCHED_SEEDED, 7);
    int last_a = last_in_round[0];
    for (int i = 0; i < 5; i++) {
        char *b = run_with(KB_SCHED_SEEDED, 7);
        assert_string_equal(a, b);
        assert_int_equal(last_in_round[0], last_a);
        free(b);
    }
    free(a);
}

static void test_different_seeds_give_different_results(void **state)
{
    (void)state;
    char *a = run_with(KB_SCHED_SEEDED, 1);
    int last_a[STEPS + 1];
    memcpy(last_a, last_in_round, sizeof last_a);
    char *b = run_with(KB_SCHED_SEEDED, 2);
    assert_string_not_equal(a, b);
    assert_memory_not_equal(last_a, last_in_round, sizeof last_a);
    char *rr = run_with(KB_SCHED_ROUND_ROBIN, 0);
    assert_string_not_equal(a, rr);
    free(a);
    free(b);
    free(rr);
}

static void test_KB_SCHED_SEED_selects_the_seeded_schedule(void **state)
{
    (void)state;
    char *want = run_with(KB_SCHED_SEEDED, 99);
    setenv("KB_SCHED_SEED", "99", 1);
    char *got = run_with(KB_SCHED_ROUND_ROBIN, 0);
    unsetenv("KB_SCHED_SEED");
    assert_string_equal(got, want);
    free(want);
    free(got);
}

static void test_an_unknown_schedule_is_EINVAL(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_opts o = {.schedule = (kb_schedule)5};
    assert_int_equal(kb_spawn(ctx, order_sensitive, NULL, 2, &o, NULL), KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* Rank 3 fails in its second turn; every other rank is cancelled. */
static void cleanup_note(void *arg)
{
    tr_add("cleanup %d", (int)(intptr_t)arg);
}

static int failing_in_round_two(int rank, void *arg)
{
    (void)arg;
    int rc = 0;
    pthread_cleanup_push(cleanup_note, (void *)(intptr_t)rank);
    if (kb_yield() == 0 && rank == 3)
        kb_raise(9, "boom");
    rc = kb_yield();
    pthread_cleanup_pop(0);
    return rc;
}

static void test_cancellation_stays_in_rank_order_under_a_seed(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    kb_spawn_opts o = {.schedule = KB_SCHED_SEEDED, .seed = 3};
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, failing_in_round_two, NULL, NR, &o, &err), KB_ESPAWN);
    /* Rank 3's own cleanup first; then the others in rank order, whatever
     * order the seed gave the round. */
    assert_string_equal(tr_text(), "cleanup 3\ncleanup 0\ncleanup 1\ncleanup 2\ncleanup 4\ncleanup 5\n");
    kb_spawn_error_free(err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_a_seed_keeps_one_drain_per_round(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_stats st = {0};
    kb_spawn_opts o = {.schedule = KB_SCHED_SEEDED, .seed = 11, .stats = &st};
    tr_reset();
    assert_int_equal(kb_spawn(ctx, order_sensitive, NULL, NR, &o, NULL), 0);
    assert_int_equal(st.rounds, STEPS + 1);
    assert_int_equal(st.drains, STEPS + 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_robin_is_rank_order_every_round),
        cmocka_unit_test(test_a_seed_gives_a_permutation_of_the_live_ranks_each_round),
        cmocka_unit_test(test_the_same_seed_gives_the_same_trace),
        cmocka_unit_test(test_different_seeds_give_different_results),
        cmocka_unit_test(test_KB_SCHED_SEED_selects_the_seeded_schedule),
        cmocka_unit_test(test_an_unknown_schedule_is_EINVAL),
        cmocka_unit_test(test_cancellation_stays_in_rank_order_under_a_seed),
        cmocka_unit_test(test_a_seed_keeps_one_drain_per_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
