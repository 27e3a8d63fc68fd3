/*
 * The scheduler loop, driver side: rounds, the drain after each round, and
 * the failure path (cancel every live sibling in rank order, abort the
 * engine, clear both queues). Also the baton handoff and the live list that
 * ranks use to find the next rank of the round.
 *
 * A round: the driver hands the baton to the first live rank; each rank,
 * when it suspends or finishes, hands it straight to the next live rank
 * (rank order), and the last one hands it back to the driver (one handoff
 * per turn, plus one back to the driver per round). A failing rank hands it
 * to the driver at once, which skips the rest of the round and the drain.
 */
#include <ck_pr.h>
#include <pthread.h>

#include "run.h"

void kb_handoff(struct kb_run *run, int to)
{
    /* A ck_pr store: the watchdog reads the holder without the baton. */
    ck_pr_store_int(&run->holder, to);
    if (run->stall_ms)
        kb_watch_stamp(run);
    kb_slot_post(to == KB_DRIVER ? &run->driver_slot : &run->ranks[to].w->slot);
}

void kb_live_remove(struct kb_run *run, struct kb_rank *rk)
{
    if (rk->prev >= 0)
        run->ranks[rk->prev].next = rk->next;
    else
        run->live_head = rk->next;
    if (rk->next >= 0)
        run->ranks[rk->next].prev = rk->prev;
    rk->prev = rk->next = -1;
    run->nlive--;
}

void kb_barrier_check(struct kb_run *run)
{
    if (run->barrier_arrived > 0 && run->barrier_arrived >= run->nlive) {
        run->barrier_gen++;
        run->barrier_arrived = 0;
    }
}

/* Driver: take the baton back. */
static void driver_wait(struct kb_run *run)
{
    if (run->stall_ms)
        kb_watch_wait(run);
    else
        kb_slot_wait(&run->driver_slot);
}

/* Driver: a rank thread that unwound is joined before anything else runs,
 * so its thread exit (TLS destructors included) overlaps no other code. */
static void join_if_exited(struct kb_rank *rk)
{
    if (rk->w && rk->w->exited) {
        kb_worker_end(rk->w);
        rk->w = NULL;
    }
}

static void cancel_rank(struct kb_run *run, struct kb_rank *rk)
{
    rk->cancelled = 1;
    if (rk->state == KB_RS_NEW) {
        /* Never started: finished without ever calling fn. Its worker
         * keeps waiting and goes back to the pool at teardown. */
        kb_live_remove(run, rk);
        rk->state = KB_RS_FINISHED;
        return;
    }
    /* Started, so suspended at a suspension point: resume it there; it
     * unwinds (UNWIND) or sees KB_ECANCELED (RETURN), runs its cleanup and
     * hands the baton back when its function has ended. */
    run->stop = KB_STOP_NONE;
    kb_handoff(run, rk->index);
    driver_wait(run);
    join_if_exited(rk);
}

void kb_sched_cancel_all(struct kb_run *run, int abort_engine)
{
    for (int i = 0; i < run->nprocs; i++) {
        struct kb_rank *rk = &run->ranks[i];
        if (rk->state != KB_RS_FINISHED)
            cancel_rank(run, rk);
    }
    if (abort_engine)
        kb_engine_abort(run->ctx); /* sees the queues still full */
    kb_queue_clear(&run->ctx->waits);
    kb_queue_clear(&run->ctx->colls);
    run->failed = 1;
}

int kb_sched_round(struct kb_run *run)
{
    if (run->nlive == 0)
        return 1;
    run->stop = KB_STOP_NONE;
    kb_handoff(run, run->live_head);
    driver_wait(run);
    if (run->stop == KB_STOP_FAILED) {
        join_if_exited(&run->ranks[run->failed_rank]);
        kb_sched_cancel_all(run, 1);
        return KB_ESPAWN;
    }
    int rc = kb_drain(run->ctx, &run->drain_handle, &run->drain_origin);
    if (rc != 0) {
        run->drain_code = rc;
        kb_sched_cancel_all(run, 1);
        return KB_ESPAWN;
    }
    return run->nlive == 0 ? 1 : 0;
}
