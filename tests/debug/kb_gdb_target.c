/* SPDX-License-Identifier: MIT */
/*
 * The program the gdb test (gdb_test.py) debugs. It stops three times in
 * kbt_gdb_stop(), where the test sets its breakpoint, with the ranks of a
 * live spawn in every state `kb ranks` knows:
 *
 *   stop 1, inside rank 4 (spawn A, 6 ranks, round 1):
 *     rank 0 waiting on handle 7, rank 1 in barrier, rank 2 finished,
 *     rank 3 ready (it queued wait 9 and collective 11 first), rank 4 running
 *     (holds the baton), rank 5 not started;
 *   stop 2, on the driver inside the engine's wait for handle 7 (the drain
 *     after round 1; 7 has been popped, 9 and 11 are still queued):
 *     the driver holds the baton, ranks 0..5 are suspended or finished;
 *   stop 3, inside rank 1's cleanup handler while the driver cancels the
 *     ranks of spawn B (4 ranks, UNWIND) after rank 3 raised code 5:
 *     rank 0 cancelled, rank 1 running (being cancelled), rank 2 waiting on
 *     handle 21, rank 3 failed (code 5: boom).
 *
 * Meanwhile a kb_start()ed process context on a second ctx (2 ranks, one
 * round run by kb_join) stays live, idle on the driver side, until the end.
 *
 * Run on its own it checks every result and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kbthreads.h"

#define KBT_TARGET "kb_gdb_target"
#include "debug_target.h"

/* The ctx both spawns use; `kb queues kbt_gdb_ctx` names it explicitly. */
kb_ctx *kbt_gdb_ctx;
/* What collective 11 carries as its meta. */
int kbt_gdb_meta = 42;

void kbt_gdb_stop(int stop);

/* The breakpoint. The asm keeps the calls from being optimised away. */
__attribute__((noinline)) void kbt_gdb_stop(int stop)
{
    __asm__ volatile("" : : "r"(stop) : "memory");
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
        return 0;
    case 3:
        if (kb_collective_submit(ctx, 11, 3, &kbt_gdb_meta) != 0 || kb_enqueue_wait(ctx, 9) != 0)
            return 1;
        return kb_yield();
    case 4:
        wait_for_names(kb_world_size());
        kbt_gdb_stop(1);
        return kb_yield();
    default:
        return kb_yield();
    }
}

static int engine_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)self;
    (void)meta;
    if (h == 7 && origin == KB_WAIT_QUEUED)
        kbt_gdb_stop(2);
    return 0;
}

static void stop_in_cleanup(void *arg)
{
    (void)arg;
    kbt_gdb_stop(3);
}

static void nothing(void *arg)
{
    (void)arg;
}

static int spawn_b_rank(int rank, void *arg)
{
    (void)arg;
    int rc = 0;
    switch (rank) {
    case 0:
        pthread_cleanup_push(nothing, NULL);
        rc = kb_yield();
        pthread_cleanup_pop(0);
        break;
    case 1:
        pthread_cleanup_push(stop_in_cleanup, NULL);
        rc = kb_yield();
        pthread_cleanup_pop(0);
        break;
    case 2:
        rc = kb_wait(kb_current_ctx(), 21);
        break;
    default:
        kb_raise(5, "boom");
    }
    return rc;
}

int main(void)
{
    kb_engine engine = {.wait = engine_wait};
    CHECK(kb_ctx_create(&engine, &kbt_gdb_ctx) == 0);

    kb_ctx *ctx2;
    kb_process_context *pc;
    CHECK(kb_ctx_create(NULL, &ctx2) == 0);
    CHECK(kb_start(ctx2, pc_rank, NULL, 2, NULL, &pc) == 0);
    CHECK(kb_join(pc, 0, NULL) == 0); /* one round: both ranks suspended in kb_yield */

    kb_spawn_error *err = NULL;
    CHECK(kb_spawn(kbt_gdb_ctx, spawn_a_rank, NULL, 6, NULL, &err) == 0);
    CHECK(err == NULL);

    kb_spawn_opts opts = {.cancel_mode = KB_CANCEL_UNWIND};
    CHECK(kb_spawn(kbt_gdb_ctx, spawn_b_rank, NULL, 4, &opts, &err) == KB_ESPAWN);
    CHECK(kb_spawn_error_count(err) == 1);
    CHECK(kb_spawn_error_get(err, 0)->rank == 3);
    CHECK(kb_spawn_error_get(err, 0)->code == 5);
    kb_spawn_error_free(err);

    CHECK(kb_join(pc, -1, NULL) == 1);
    kb_process_context_free(pc);
    CHECK(kb_ctx_destroy(ctx2) == 0);
    CHECK(kb_ctx_destroy(kbt_gdb_ctx) == 0);
    printf("kb_gdb_target: ok\n");
    return 0;
}
