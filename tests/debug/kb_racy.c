/* SPDX-License-Identifier: MIT */
/*
 * Race-detector precision, racy half: a deliberate data race that
 * ThreadSanitizer, Helgrind and DRD must report (the tests expect it).
 *
 * The ranks of a spawn update kb_racy_victim, a plain int, on every turn;
 * the baton orders those updates. A foreign pthread, created before the
 * spawn and never synchronised with the ranks, updates the same int in the
 * middle of the spawn: outside the baton. The annotations must not hide it
 * (they carry only the protocol's edges, not a blanket "ignore"), so every
 * tool reports a race on kb_racy_victim, and on nothing else.
 *
 * The foreign update happens while the ranks run (it sleeps 20 ms first,
 * the spawn lasts longer), but detection does not depend on timing: no
 * happens-before edge links the foreign thread to the ranks until it is
 * joined after the spawn.
 *
 * Exits 0 whatever the race did to the value (the tools decide the test).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "kbthreads.h"

/* The victim: a global, so every tool names it in its report. */
int kb_racy_victim;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *foreign(void *arg)
{
    (void)arg;
    sleep_ms(20);
    kb_racy_victim += 1000; /* no baton, no lock: the race */
    return NULL;
}

static int rank_fn(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (int i = 0; i < 20; i++) {
        kb_racy_victim++; /* ordered with the other ranks by the baton */
        sleep_ms(1);
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

int main(void)
{
    /* race_check.py matches every report against this address. */
    printf("kb_racy: victim at %p\n", (void *)&kb_racy_victim);
    fflush(stdout);
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, foreign, NULL) != 0)
        return 1;
    int rc = kb_spawn(ctx, rank_fn, NULL, 4, NULL, NULL);
    pthread_join(t, NULL);
    kb_ctx_destroy(ctx);
    printf("kb_racy: spawn returned %d, kb_racy_victim = %d\n", rc, kb_racy_victim);
    return rc == 0 ? 0 : 1;
}
