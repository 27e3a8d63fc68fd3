/* SPDX-License-Identifier: MIT */
/*
 * The program the kbthreads-dump test (dump_test.py) reads. It stops at a
 * known point and stays there, running, until told to go on:
 *
 *   spawn A (4 ranks, round 1): rank 0 waiting on handle 7, rank 1 in
 *   barrier, rank 2 ready (in kb_yield), rank 3 running: it holds the baton
 *   and reads commands from stdin;
 *   a kb_start()ed process context on a second ctx (2 ranks, one round run
 *   by kb_join, both ready), idle on the driver side between joins.
 *
 * When every rank thread is named, rank 3 prints "ready" and reads one
 * command per line: "spawn" makes another thread run a one-rank spawn on a
 * third ctx (the registry of live runs changes) and answers "spawned";
 * "go" (or end of input) lets everything finish. It exits 0 after checking
 * every result.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kbthreads.h"

#define KBT_TARGET "kb_dump_target"
#include "debug_target.h"

/* The helper thread's requests: a spawn on its own ctx per request. */
static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t helper_cond = PTHREAD_COND_INITIALIZER;
static int helper_requests, helper_done, helper_quit, helper_failed;

static int one_yield(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    return kb_yield();
}

static void *helper_main(void *arg)
{
    kb_ctx *ctx = arg;
    pthread_mutex_lock(&helper_lock);
    for (;;) {
        while (helper_requests == helper_done && !helper_quit)
            pthread_cond_wait(&helper_cond, &helper_lock);
        if (helper_requests == helper_done)
            break;
        pthread_mutex_unlock(&helper_lock);
        int rc = kb_spawn(ctx, one_yield, NULL, 1, NULL, NULL);
        pthread_mutex_lock(&helper_lock);
        helper_failed |= rc != 0;
        helper_done++;
        pthread_cond_broadcast(&helper_cond);
    }
    pthread_mutex_unlock(&helper_lock);
    return NULL;
}

static void helper_spawn_and_wait(void)
{
    pthread_mutex_lock(&helper_lock);
    int want = ++helper_requests;
    pthread_cond_broadcast(&helper_cond);
    while (helper_done < want)
        pthread_cond_wait(&helper_cond, &helper_lock);
    pthread_mutex_unlock(&helper_lock);
}

/* Rank 3, holding the baton: wait for the names (a thread names itself
 * when it first runs), say so, then obey the commands. */
static void hold_the_baton(int nthreads)
{
    wait_for_names(nthreads);
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) && strcmp(line, "go\n") != 0) {
        if (strcmp(line, "spawn\n") == 0) {
            helper_spawn_and_wait();
            printf("spawned\n");
            fflush(stdout);
        }
    }
}

static int spawn_a_rank(int rank, void *arg)
{
    (void)arg;
    kb_ctx *ctx = kb_current_ctx();
    switch (rank) {
    case 0:
        return kb_wait(ctx, 7);
    case 1:
        return kb_barrier();
    case 2:
        return kb_yield();
    default:
        hold_the_baton(4 + 2);
        return 0;
    }
}

int main(void)
{
    kb_ctx *ctx, *ctx2, *ctx3;
    kb_process_context *pc;
    pthread_t helper;
    CHECK(kb_ctx_create(NULL, &ctx) == 0);
    CHECK(kb_ctx_create(NULL, &ctx2) == 0);
    CHECK(kb_ctx_create(NULL, &ctx3) == 0);
    CHECK(pthread_create(&helper, NULL, helper_main, ctx3) == 0);
    CHECK(kb_start(ctx2, pc_rank, NULL, 2, NULL, &pc) == 0);
    CHECK(kb_join(pc, 0, NULL) == 0); /* one round: both ranks suspended in kb_yield */

    CHECK(kb_spawn(ctx, spawn_a_rank, NULL, 4, NULL, NULL) == 0);

    pthread_mutex_lock(&helper_lock);
    helper_quit = 1;
    pthread_cond_broadcast(&helper_cond);
    pthread_mutex_unlock(&helper_lock);
    CHECK(pthread_join(helper, NULL) == 0);
    CHECK(!helper_failed);
    CHECK(kb_join(pc, -1, NULL) == 1);
    kb_process_context_free(pc);
    CHECK(kb_ctx_destroy(ctx3) == 0);
    CHECK(kb_ctx_destroy(ctx2) == 0);
    CHECK(kb_ctx_destroy(ctx) == 0);
    printf("kb_dump_target: ok\n");
    return 0;
}
