/* SPDX-License-Identifier: MIT */
/*
 * The seeded pseudo-random determinism program, shared by
 * tests/test_determinism.c (in-process runs) and tests/support/det_helper.c
 * (separate processes). Header-only (static functions) so each program that
 * includes it gets its own copy; it writes its events with tr_add().
 *
 * One run: a fresh ctx, then three spawns of 48 ranks x 40 steps on it:
 *   spawn 0: no failure (UNWIND mode)
 *   spawn 1: one rank fails (kb_raise or a nonzero return) at a seeded step
 *            (UNWIND mode: siblings unwind through cleanup handlers)
 *   spawn 2: one rank fails (kb_fail or a nonzero return) at a seeded step
 *            (RETURN mode: siblings see KB_ECANCELED)
 * Per rank per step, a seeded choice of: yield; wait on a fresh handle; wait
 * on an already-completed handle; a private collective (submit + wait); a
 * collective shared by every rank choosing it at that step; enqueue + yield;
 * completing the next rank's next fresh handle; a barrier. Every 8th step is
 * a barrier for everyone. The engine logs every wait (origin, meta) and now
 * and then queues more work from inside the drain; abort logs both queues.
 * Nothing printed depends on addresses or timing.
 */
#ifndef KB_DET_PROGRAM_H
#define KB_DET_PROGRAM_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kbthreads.h"
#include "trace.h"

#define DET_NPROCS 48
#define DET_STEPS  40
#define DET_SPAWNS 3

struct det_run {
    uint64_t seed;
    kb_ctx *ctx;
    int spawn_no;
    int fail_rank, fail_step, fail_how; /* fail_how: 0 kb_raise, 1 return code, 2 kb_fail */
    kb_handle last_fresh[DET_NPROCS];
    int metas[DET_NPROCS];
};

static uint64_t det_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static unsigned det_rand(const struct det_run *r, int rank, int step, int salt)
{
    uint64_t x = det_mix(r->seed);
    x = det_mix(x ^ (uint64_t)(r->spawn_no + 1));
    x = det_mix(x ^ ((uint64_t)(unsigned)rank << 20) ^ ((uint64_t)(unsigned)step << 8) ^
                (uint64_t)(unsigned)salt);
    return (unsigned)(x >> 33);
}

/* Handle kinds: 1 fresh wait, 2 private collective, 3 shared collective,
 * 4 enqueued, 5 engine-made, 9 completed before the spawn. */
static kb_handle det_h(const struct det_run *r, int kind, int rank, int step)
{
    return ((kb_handle)kind << 40) | ((kb_handle)(r->spawn_no + 1) << 32) |
           ((kb_handle)(unsigned)rank << 16) | (kb_handle)(unsigned)(step + 1);
}

static int det_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    struct det_run *r = self;
    int m = meta ? (int)((int *)meta - r->metas) : -1;
    tr_add("E %llx o=%d m=%d", (unsigned long long)h, (int)origin, m);
    /* A drain that creates new work: some private collectives queue an
     * engine-made wait, which the drain must also complete. */
    if ((h >> 40) == 2 && (h & 3) == 1) {
        kb_handle extra = (((kb_handle)5) << 40) | (h & 0xffffffffffull);
        tr_add("E +%llx rc=%d", (unsigned long long)extra, kb_enqueue_wait(r->ctx, extra));
    }
    return 0;
}

static void det_bind(void *self, kb_ctx *ctx, int rank)
{
    struct det_run *r = self;
    tr_add("B %d same_ctx=%d", rank, ctx == r->ctx);
}

static void det_abort(void *self, kb_ctx *ctx)
{
    (void)self;
    kb_handle w[256];
    kb_collective c[256];
    size_t nw = kb_pending_waits(ctx, w, 256);
    size_t nc = kb_pending_collectives(ctx, c, 256);
    tr_add("A pw=%zu pc=%zu", nw, nc);
    for (size_t i = 0; i < nw && i < 256; i++)
        tr_add("A w %llx", (unsigned long long)w[i]);
    for (size_t i = 0; i < nc && i < 256; i++)
        tr_add("A c %llx sip=%d", (unsigned long long)c[i].handle, c[i].sip_id);
}

static void det_cleanup(void *arg)
{
    int rank = (int)(intptr_t)arg;
    tr_add("%d cleanup cancelled=%d", rank, kb_cancelled());
}

static int det_body(struct det_run *r, int rank)
{
    kb_ctx *ctx = r->ctx;
    for (int s = 0; s < DET_STEPS; s++) {
        if (rank == r->fail_rank && s == r->fail_step) {
            if (r->fail_how == 0) {
                tr_add("%d %d raise", rank, s);
                kb_raise(11, "rank %d raised at step %d", rank, s);
            } else if (r->fail_how == 1) {
                tr_add("%d %d return 12", rank, s);
                return 12;
            } else {
                tr_add("%d %d kb_fail rc=%d", rank, s,
                       kb_fail(13, "rank %d failed softly at step %d", rank, s));
            }
        }
        unsigned a = det_rand(r, rank, s, 0) % 10;
        int rc = 0;
        kb_handle h;
        switch (a) {
        case 0:
        case 1:
            rc = kb_yield();
            tr_add("%d %d yield rc=%d", rank, s, rc);
            break;
        case 2:
        case 3:
            h = det_h(r, 1, rank, s);
            tr_add("%d %d wait_fresh %llx pre=%d", rank, s, (unsigned long long)h, kb_is_completed(ctx, h));
            rc = kb_wait(ctx, h);
            tr_add("%d %d wait_fresh_done rc=%d post=%d", rank, s, rc, kb_is_completed(ctx, h));
            if (rc == 0)
                r->last_fresh[rank] = h;
            break;
        case 4:
            h = r->last_fresh[rank] ? r->last_fresh[rank] : det_h(r, 9, rank, 0);
            tr_add("%d %d wait_done %llx pre=%d", rank, s, (unsigned long long)h, kb_is_completed(ctx, h));
            rc = kb_wait(ctx, h);
            tr_add("%d %d wait_done_ret rc=%d", rank, s, rc);
            break;
        case 5:
            h = det_h(r, 2, rank, s);
            rc = kb_collective_submit(ctx, h, rank, &r->metas[rank]);
            tr_add("%d %d coll %llx submit=%d", rank, s, (unsigned long long)h, rc);
            if (rc == 0)
                rc = kb_wait(ctx, h);
            tr_add("%d %d coll_done rc=%d", rank, s, rc);
            break;
        case 6:
            h = det_h(r, 3, 0, s);
            rc = kb_collective_submit(ctx, h, rank, NULL);
            tr_add("%d %d shared_coll %llx submit=%d pre=%d", rank, s, (unsigned long long)h, rc,
                   kb_is_completed(ctx, h));
            if (rc == 0)
                rc = kb_wait(ctx, h);
            tr_add("%d %d shared_coll_done rc=%d", rank, s, rc);
            break;
        case 7:
            h = det_h(r, 4, rank, s);
            rc = kb_enqueue_wait(ctx, h);
            tr_add("%d %d enqueue %llx rc=%d", rank, s, (unsigned long long)h, rc);
            rc = kb_yield();
            tr_add("%d %d enqueue_yield rc=%d completed=%d", rank, s, rc, kb_is_completed(ctx, h));
            break;
        case 8:
            h = det_h(r, 1, (rank + 1) % DET_NPROCS, s + 1);
            rc = kb_complete(ctx, h);
            tr_add("%d %d complete %llx rc=%d", rank, s, (unsigned long long)h, rc);
            break;
        default:
            rc = kb_barrier();
            tr_add("%d %d barrier rc=%d", rank, s, rc);
            break;
        }
        if (rc == KB_ECANCELED) {
            tr_add("%d %d cancelled=%d", rank, s, kb_cancelled());
            return rc;
        }
        if (s % 8 == 7) {
            rc = kb_barrier();
            tr_add("%d %d global_barrier rc=%d", rank, s, rc);
            if (rc == KB_ECANCELED)
                return rc;
        }
    }
    tr_add("%d end", rank);
    return 0;
}

static int det_rank(int rank, void *arg)
{
    struct det_run *r = arg;
    int rc;
    if (kb_rank() != rank || kb_world_size() != DET_NPROCS || kb_current_ctx() != r->ctx)
        tr_add("%d identity wrong", rank);
    tr_add("%d start", rank);
    pthread_cleanup_push(det_cleanup, (void *)(intptr_t)rank);
    rc = det_body(r, rank);
    pthread_cleanup_pop(0);
    return rc;
}

static void det_report(struct det_run *r, int rc, kb_spawn_error *err)
{
    tr_add("S%d rc=%d n=%zu drain=%d handle=%llx", r->spawn_no, rc, kb_spawn_error_count(err),
           kb_spawn_error_drain_code(err), (unsigned long long)kb_spawn_error_drain_handle(err));
    for (size_t i = 0; i < kb_spawn_error_count(err); i++) {
        const kb_rank_error *e = kb_spawn_error_get(err, i);
        tr_add("S%d error rank=%d code=%d msg=%s", r->spawn_no, e->rank, e->code, e->message);
    }
    tr_add("S%d message=%s", r->spawn_no, kb_spawn_error_message(err));
    tr_add("S%d pending waits=%zu colls=%zu", r->spawn_no, kb_pending_waits(r->ctx, NULL, 0),
           kb_pending_collectives(r->ctx, NULL, 0));
    int completed = 0;
    for (int rank = 0; rank < DET_NPROCS; rank++)
        for (int s = 0; s < DET_STEPS; s++)
            completed += kb_is_completed(r->ctx, det_h(r, 1, rank, s)) == 1;
    tr_add("S%d fresh_completed=%d", r->spawn_no, completed);
}

/* Run the whole program for seed; the trace is left in tr_text(). Returns
 * tr_hash(). */
static uint64_t det_run_program(uint64_t seed)
{
    static struct det_run r;
    tr_reset();
    memset(&r, 0, sizeof r);
    r.seed = seed;
    kb_engine eng = {.self = &r, .wait = det_wait, .bind = det_bind, .abort = det_abort};
    if (kb_ctx_create(&eng, &r.ctx) != 0) {
        tr_add("kb_ctx_create failed");
        return tr_hash();
    }
    for (int sp = 0; sp < DET_SPAWNS; sp++) {
        r.spawn_no = sp;
        memset(r.last_fresh, 0, sizeof r.last_fresh);
        r.fail_rank = sp == 0 ? -1 : (int)(det_rand(&r, -1, -1, 1) % DET_NPROCS);
        r.fail_step = 12 + (int)(det_rand(&r, -1, -1, 2) % (DET_STEPS - 12));
        r.fail_how = sp == 1 ? (int)(det_rand(&r, -1, -1, 3) % 2) : 1 + (int)(det_rand(&r, -1, -1, 3) % 2);
        for (int rank = 0; rank < DET_NPROCS; rank++)
            kb_complete(r.ctx, det_h(&r, 9, rank, 0));
        tr_add("S%d begin fail_rank=%d fail_step=%d fail_how=%d", sp, r.fail_rank, r.fail_step, r.fail_how);
        kb_spawn_opts o = {.stack_size = 0, .cancel_mode = sp == 2 ? KB_CANCEL_RETURN : KB_CANCEL_UNWIND};
        kb_spawn_error *err = NULL;
        int rc = kb_spawn(r.ctx, det_rank, &r, DET_NPROCS, &o, &err);
        det_report(&r, rc, err);
        kb_spawn_error_free(err);
    }
    tr_add("destroy rc=%d", kb_ctx_destroy(r.ctx));
    return tr_hash();
}

#endif
