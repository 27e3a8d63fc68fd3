/* SPDX-License-Identifier: MIT */
/*
 * Programs for kbthreads-explore --strategy delay (tests/explore/
 * test_explore_delay.py). Every rank takes one turn per step: step s is
 * round s + 1.
 *
 *   delay_target bug     3 ranks, 20 steps (60 turns). At step 3 rank 0
 *                        publishes config version 2 and rank 1 takes a
 *                        snapshot of the config; at step 16 rank 0 starts a
 *                        migration, rank 2 then drops support for version 1
 *                        and rank 1 checks its snapshot. The snapshot is
 *                        stale when rank 1 ran before rank 0 at step 3, and
 *                        the check fails (exit 1) when it comes after rank 2
 *                        dropped version 1, which rank 2 does only once rank
 *                        0 started: the orders 1 before 0 at step 3 and
 *                        0, 2, 1 at step 16. Each needs a delay in its
 *                        round: the bug needs two, 13 rounds apart.
 *   delay_target ok      the same, fixed: the check upgrades a stale snapshot
 *   delay_target count N R   N ranks, R rounds, every rank live in each (no
 *                        early exit); always exits 0
 *   delay_target exits   3 ranks whose rounds depend on the order: rank 0
 *                        runs 3 rounds when it is first in round 1, else 1;
 *                        ranks 1 and 2 run 2. 20 schedules in all
 *   delay_target coded   3 ranks, 2 rounds, in a seeded schedule its code
 *                        chooses (kb_spawn_opts): KB_SCHED_DELAYS is ignored
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbthreads.h"

#define STEPS 20

static int fixed;
static int config = 1, snapshot, migrating, v1_dropped, check_failed;
static int first_in_round_1 = -1;

static int bug_main(int rank, void *arg)
{
    (void)arg;
    for (int step = 0; step < STEPS; step++) {
        if (step == 3 && rank == 0)
            config = 2;
        if (step == 3 && rank == 1)
            snapshot = config;
        if (step == 16 && rank == 0)
            migrating = 1;
        if (step == 16 && rank == 2 && migrating)
            v1_dropped = 1;
        if (step == 16 && rank == 1) {
            if (snapshot == 1 && fixed)
                snapshot = config;
            if (snapshot == 1 && v1_dropped)
                check_failed = 1;
        }
        if (step + 1 < STEPS)
            kb_yield();
    }
    return 0;
}

static long count_rounds;
static int count_main(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (long i = 1; i < count_rounds; i++)
        kb_yield();
    return 0;
}

static int exits_main(int rank, void *arg)
{
    (void)arg;
    if (first_in_round_1 < 0)
        first_in_round_1 = rank;
    int rounds = rank == 0 ? (first_in_round_1 == 0 ? 3 : 1) : 2;
    for (int i = 1; i < rounds; i++)
        kb_yield();
    return 0;
}

static int spawn(kb_rank_fn fn, int nprocs, const kb_spawn_opts *opts)
{
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 2;
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, fn, NULL, nprocs, opts, &err);
    if (rc != 0)
        fprintf(stderr, "delay_target: spawn failed: %s %s\n", kb_strerror(rc), kb_spawn_error_message(err));
    kb_spawn_error_free(err);
    kb_ctx_destroy(ctx);
    return rc == 0 ? 0 : 2;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: delay_target bug|ok|exits|coded | count NPROCS ROUNDS (1-64 ranks, at least 1 round)\n");
    return 64;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "count") == 0) {
        int n = atoi(argv[2]);
        count_rounds = atol(argv[3]);
        if (n < 1 || n > 64 || count_rounds < 1)
            return usage();
        return spawn(count_main, n, NULL);
    }
    if (argc == 2 && strcmp(argv[1], "exits") == 0)
        return spawn(exits_main, 3, NULL);
    if (argc == 2 && strcmp(argv[1], "coded") == 0) {
        kb_spawn_opts o = {.schedule = KB_SCHED_SEEDED, .seed = 1};
        count_rounds = 2;
        return spawn(count_main, 3, &o);
    }
    if (argc != 2 || (strcmp(argv[1], "bug") != 0 && strcmp(argv[1], "ok") != 0))
        return usage();
    fixed = strcmp(argv[1], "ok") == 0;
    int rc = spawn(bug_main, 3, NULL);
    if (rc != 0)
        return rc;
    printf("snapshot %d, check %s\n", snapshot, check_failed ? "failed" : "passed");
    if (check_failed) {
        fprintf(stderr, "delay_target: rank 1 checked a stale snapshot after version 1 was dropped\n");
        return 1;
    }
    return 0;
}
