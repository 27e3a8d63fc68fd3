/* SPDX-License-Identifier: MIT */
/*
 * Statistics (kb_spawn_opts.stats, kb_process_context_stats): rounds,
 * turns, handoffs, drains, engine waits, collectives, per-rank turns and
 * CPU time on the baton, wall time, for programs whose counts are known.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "kbthreads.h"

/* Rank r yields r + 1 times; rank 0 also submits a collective and waits on
 * it; rank 2 burns about 20 ms of CPU in its first turn. */
static int known(int rank, void *arg)
{
    (void)arg;
    kb_ctx *ctx = kb_current_ctx();
    if (rank == 0 && (kb_collective_submit(ctx, 5, 0, NULL) != 0 || kb_wait(ctx, 5) != 0))
        return 1;
    if (rank == 2) {
        struct timespec t0, t;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        do
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
    }
    for (int i = 0; i < rank + 1; i++)
        kb_yield();
    return 0;
}

static void test_stats_count_a_known_program(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    uint64_t turns[3], cpu[3];
    kb_spawn_stats st = {.rank_turns = turns, .rank_cpu_ns = cpu, .rank_cap = 3};
    kb_spawn_opts o = {.stats = &st};
    assert_int_equal(kb_spawn(ctx, known, NULL, 3, &o, NULL), 0);
    /* Rank 0: waits (round 1), yields (2), returns (3): 3 turns. Rank 1:
     * yields twice, returns in round 3: 3 turns. Rank 2: 3 yields, returns
     * in round 4: 4 turns. */
    assert_int_equal(turns[0], 3);
    assert_int_equal(turns[1], 3);
    assert_int_equal(turns[2], 4);
    assert_int_equal(st.rounds, 4);
    assert_int_equal(st.drains, 4);
    assert_int_equal(st.turns, 10);
    /* Every turn, plus one back to the driver for each round whose drain has
     * work (round 1: handle 5 and the collective) and for the last: 10 + 2.
     * Rounds 2 and 3 have nothing to drain: their last rank starts the next
     * round itself. */
    assert_int_equal(st.handoffs, 12);
    assert_int_equal(st.collectives, 1);
    assert_int_equal(st.engine_waits, 1); /* handle 5, once (queued); the collective takes the fast path */
    assert_true(cpu[2] >= 15000000u);     /* its 20 ms of CPU (some slack for clock granularity) */
    assert_true(cpu[0] < cpu[2] && cpu[1] < cpu[2]);
    assert_true(st.wall_ns >= cpu[2]);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_stats_without_per_rank_arrays_fill_the_totals(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_stats st = {0};
    kb_spawn_opts o = {.stats = &st};
    assert_int_equal(kb_spawn(ctx, known, NULL, 3, &o, NULL), 0);
    assert_int_equal(st.turns, 10);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_process_context_stats_grow_with_each_join(void **state)
{
    (void)state;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_process_context *pc;
    kb_spawn_stats st = {0};
    assert_int_equal(kb_start(ctx, known, NULL, 3, NULL, &pc), 0);
    assert_int_equal(kb_process_context_stats(pc, &st), 0);
    assert_int_equal(st.rounds, 0);
    assert_int_equal(kb_join(pc, 0, NULL), 0); /* one round */
    assert_int_equal(kb_process_context_stats(pc, &st), 0);
    assert_int_equal(st.rounds, 1);
    assert_int_equal(st.turns, 3);
    assert_int_equal(kb_join(pc, -1, NULL), 1);
    assert_int_equal(kb_process_context_stats(pc, &st), 0);
    assert_int_equal(st.rounds, 4);
    assert_int_equal(st.turns, 10);
    assert_int_equal(kb_process_context_stats(NULL, &st), KB_EINVAL);
    assert_int_equal(kb_process_context_stats(pc, NULL), KB_EINVAL);
    kb_process_context_free(pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_count_a_known_program),
        cmocka_unit_test(test_stats_without_per_rank_arrays_fill_the_totals),
        cmocka_unit_test(test_process_context_stats_grow_with_each_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
