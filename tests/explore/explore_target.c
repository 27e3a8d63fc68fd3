/* SPDX-License-Identifier: MIT */
/*
 * A program with planted rank-order bugs, for kbthreads-explore's tests and
 * `make explore-demo`. Round-robin order never shows them; other orders do.
 *
 *   explore_target bug [Y] 4 ranks sum their values after Y yields (3); the
 *                          code assumes rank 3 arrives last and lets it
 *                          publish the sum: wrong when it does not (exit 1)
 *   explore_target ok      the same, fixed: the last to arrive publishes
 *   explore_target hang    rank 2 spins on kb_yield forever when it is the
 *                          first of its round to reach step 1 (a livelock)
 *   explore_target crash   rank 1 dereferences NULL (SIGSEGV) when it is
 *                          the first of its round to reach step 2
 *   explore_target late    like "ok", but the sum comes out wrong when
 *                          ranks 3 and 0 are the first two to reach step 0
 *                          (1 order in 12: a failure that takes some runs)
 *   explore_target sleep   sleeps 20 ms, then as "ok" (kbthreads-explore
 *                          --jobs wall time: tests/explore/jobs_walltime.py)
 *   explore_target long R  64 ranks yield R - 1 times: R rounds (a long
 *                          recording to replay); always exits 0
 *   explore_target spawn3  three spawns (3, 2 and 4 ranks); only the third
 *                          has the bug of "bug"
 *   explore_target output  prints the order in which ranks reach step 1;
 *                          always exits 0
 *   explore_target fail    fails in every order (exit 3)
 *
 * With $EXPLORE_PIDFILE set it appends its pid there (tests check that
 * nothing is left running).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kbthreads.h"

static const char *mode;
static int sum, arrived, published, fixed, poisoned, yields = 3;
static char arrivals[64];

/* Arrive at step `step`: how many ranks of this round arrived before. */
static int arrive_counts[8];
static int arrive(int step)
{
    return arrive_counts[step]++;
}

static long long long_rounds;
static int long_main(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (long long i = 1; i < long_rounds; i++)
        kb_yield();
    return 0;
}

static int rank_main(int rank, void *arg)
{
    (void)arg;
    for (int step = 0; step < yields; step++) {
        int before = arrive(step);
        if (strcmp(mode, "late") == 0 && step == 0 && before < 2 && rank == (before ? 0 : 3))
            poisoned += 1; /* 2 when rank 3 came first and rank 0 second */
        if (strcmp(mode, "hang") == 0 && step == 1 && rank == 2 && before == 0)
            for (;;)
                kb_yield();
        if (strcmp(mode, "crash") == 0 && step == 2 && rank == 1 && before == 0)
            *(volatile int *)(uintptr_t)0 = 1;
        if (step == 1) {
            size_t n = strlen(arrivals);
            snprintf(arrivals + n, sizeof arrivals - n, "%s%d", n ? " " : "", rank);
        }
        kb_yield();
    }
    sum += 10 * (rank + 1);
    arrived++;
    if (fixed ? arrived == kb_world_size() : rank == kb_world_size() - 1)
        published = poisoned == 2 ? sum - 1 : sum;
    return 0;
}

/* One spawn of nprocs ranks: 0 when the published sum is right. */
static int run(kb_ctx *ctx, int nprocs, int is_fixed)
{
    sum = arrived = published = poisoned = 0;
    fixed = is_fixed;
    memset(arrive_counts, 0, sizeof arrive_counts);
    arrivals[0] = '\0';
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, rank_main, NULL, nprocs, NULL, &err);
    if (rc != 0) {
        fprintf(stderr, "explore_target: spawn failed: %s %s\n", kb_strerror(rc),
                kb_spawn_error_message(err));
        kb_spawn_error_free(err);
        return 2;
    }
    int want = 10 * nprocs * (nprocs + 1) / 2;
    printf("%d ranks: sum %d (want %d)\n", nprocs, published, want);
    if (published != want) {
        fprintf(stderr, "explore_target: wrong result %d, want %d\n", published, want);
        return 1;
    }
    return 0;
}

/* explore_target long R: one spawn of 64 ranks over R rounds. */
static int run_long(const char *rounds)
{
    long_rounds = atoll(rounds);
    if (long_rounds < 1) {
        fprintf(stderr, "usage: explore_target long ROUNDS (at least 1)\n");
        return 64;
    }
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 2;
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, long_main, NULL, 64, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "explore_target: spawn failed: %s %s\n", kb_strerror(rc),
                kb_spawn_error_message(err));
    kb_spawn_error_free(err);
    kb_ctx_destroy(ctx);
    printf("64 ranks, %lld rounds: %s\n", long_rounds, rc == 0 ? "ok" : kb_strerror(rc));
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "long") == 0)
        return run_long(argv[2]);
    if (argc < 2 || argc > 3 || (argc == 3 && (yields = atoi(argv[2])) < 0) || yields > 7) {
        fprintf(stderr, "usage: explore_target bug|ok|late|sleep|hang|crash|spawn3|output|fail [YIELDS 0-7] "
                        "| long ROUNDS\n");
        return 64;
    }
    mode = argv[1];
    const char *pidfile = getenv("EXPLORE_PIDFILE");
    if (pidfile) {
        FILE *f = fopen(pidfile, "a");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
    }
    if (strcmp(mode, "fail") == 0)
        return 3;
    if (strcmp(mode, "sleep") == 0)
        usleep(20000);
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 2;
    int rc;
    if (strcmp(mode, "spawn3") == 0) {
        rc = run(ctx, 3, 1);
        if (rc == 0)
            rc = run(ctx, 2, 1);
        if (rc == 0)
            rc = run(ctx, 4, 0);
    } else {
        rc = run(ctx, 4, strcmp(mode, "bug") != 0);
        if (strcmp(mode, "output") == 0)
            printf("step 1 arrivals: %s\n", arrivals);
    }
    kb_ctx_destroy(ctx);
    return rc;
}
