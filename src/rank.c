/* SPDX-License-Identifier: MIT */
/*
 * The rank side: a rank thread's life, and the calls rank functions make
 * (kb_yield, kb_wait inside a rank, kb_barrier, kb_raise, kb_fail, ...).
 *
 * Everything here runs on a rank thread that holds the baton, except the
 * waits on its own slot and the nudge right after a post (kb__pass_baton),
 * which touches only the nudged slot's word and this worker's nudging
 * mark. A rank gives the baton away only in rank_suspend() and
 * rank_finish(), through kb__pass_baton (round_loop.c), or, when it failed
 * or was being cancelled, straight to the driver.
 */
#include "rank.h"

#include <ck_pr.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "crash.h"
#include "round_loop.h"
#include "run.h"
#include "system.h"
#include "timeline.h"

/* The rank this thread runs; NULL on every other thread, and on a rank
 * thread once its rank has finished. */
static _Thread_local struct kb_rank *tls_self;

struct kb_rank *kb__self(void)
{
    return tls_self;
}

/* Suspend: hand the baton on and wait for this rank's next turn. Returns
 * 0, or KB_ECANCELED if the driver cancelled the rank in RETURN mode; in
 * UNWIND mode a cancelled rank unwinds from here and never returns. */
static int rank_suspend(struct kb_rank *rk, int susp, kb_handle h)
{
    kb__ctx_running(rk->run->ctx, -1);
    rk->susp = susp;
    rk->susp_handle = h;
    kb__pass_baton(rk, 1);
    kb__turn_begin(rk);
    rk->susp = KB_SUSP_NONE;
    kb__ctx_running(rk->run->ctx, rk->index);
    if (!rk->cancelled)
        return 0;
    if (rk->run->cancel_mode == KB_CANCEL_UNWIND) {
        rk->unwinding = 1;
        pthread_exit(NULL);
    }
    return KB_ECANCELED;
}

/* The rank's function has ended (returned or unwound): retire it and
 * hand the baton on for the last time. */
static void rank_finish(struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    kb__ctx_running(run->ctx, -1);
    kb__rank_retire(run, rk);
    kb__barrier_check(run); /* the ranks still waiting may be all that is left */
    tls_self = NULL;        /* no kb_ call of this thread may act as the rank now */
    if (rk->cancelled) {
        kb__turn_end(rk);
        kb__handoff(run, KB_DRIVER);
    } else if (rk->failed) {
        kb__turn_end(rk);
        run->stop = KB_STOP_FAILED;
        run->failed_rank = rk->index;
        kb__handoff(run, KB_DRIVER);
    } else {
        kb__pass_baton(rk, 0);
    }
}

/* Outermost cleanup handler of every rank: runs last when the thread
 * unwinds (kb_raise, cancellation in UNWIND mode, or the rank function
 * calling pthread_exit itself), after the user's handlers. That is also the
 * first moment the library can know of a pthread_exit it did not start:
 * the rank's own handlers have run by then (see kb_yield in the header). The thread then
 * ends; the driver joins it before it goes on, so nothing of this thread
 * overlaps the next holder. */
static void rank_unwound(void *arg)
{
    struct kb_rank *rk = arg;
    if (rk->state == KB_RS_FINISHED)
        return; /* a second pthread_exit inside the unwind (undefined by POSIX): finished already */
    if (!rk->unwinding) {
        /* Not ours: the rank function called pthread_exit. */
        rk->unwinding = 1;
        kb__failure_add_text(rk, KB_EEXITED, "rank thread exited without returning (pthread_exit)");
    }
    rk->w->exited = 1;
    rank_finish(rk);
}

void kb__rank_run(struct kb_worker *w, struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    rk->tid = kb__sys_tid();
    int cpu = kb__wanted_cpu(run, rk->index);
    if (w->pinned_cpu != cpu)
        kb__worker_pin(w, cpu);
    if (run->opt.crash_report)
        kb__crash_altstack(w);
    tls_self = rk;
    rk->state = KB_RS_STARTED;
    kb__turn_begin(rk);
    kb__ctx_running(run->ctx, rk->index);

    int rc;
    pthread_cleanup_push(rank_unwound, rk);
    rc = run->fn(rk->index, run->arg);
    pthread_cleanup_pop(0);
    if (rk->unwinding) {
        /* The rank left an unwind (kb_raise or cancellation) with longjmp
         * and returned: it must not look like a clean finish. */
        kb__failure_add_text(rk, KB_EEXITED, "rank escaped its unwind (longjmp) and returned");
    } else if (rc != 0 && !(rc == KB_ECANCELED && rk->cancelled)) {
        kb__failure_add_text(rk, rc, NULL);
    }
    rank_finish(rk);
}

/* ---- calls made by rank functions ---------------------------------------- */

int kb_rank(void)
{
    return tls_self ? tls_self->index : -1;
}

int kb_world_size(void)
{
    return tls_self ? tls_self->run->nprocs : 0;
}

kb_ctx *kb_current_ctx(void)
{
    return tls_self ? tls_self->run->ctx : NULL;
}

int kb_cancelled(void)
{
    return tls_self ? tls_self->cancelled : 0;
}

/* Once cancelled (RETURN mode) or while unwinding, suspension points answer
 * KB_ECANCELED at once and never switch. */
static int cannot_suspend(const struct kb_rank *rk)
{
    return rk->cancelled || rk->unwinding;
}

int kb_yield(void)
{
    struct kb_rank *rk = tls_self;
    if (!rk)
        return KB_EPERM;
    if (cannot_suspend(rk))
        return KB_ECANCELED;
    return rank_suspend(rk, KB_SUSP_YIELD, 0);
}

int kb__rank_wait(struct kb_rank *rk, kb_handle h)
{
    if (cannot_suspend(rk))
        return KB_ECANCELED;
    kb_ctx *ctx = rk->run->ctx;
    if (kb__completed_has(&ctx->done, h)) {
        kb__tl_instant(rk->run, rk->index, KB_TL_WAIT_FAST, h, 0);
        return 0; /* fast path: keep the baton */
    }
    int rc = kb__queue_push(&ctx->waits, &h);
    if (rc != 0)
        return rc;
    kb__tl_instant(rk->run, rk->index, KB_TL_WAIT, h, 0);
    do {
        rc = rank_suspend(rk, KB_SUSP_WAIT, h);
        if (rc != 0)
            return rc;
    } while (!kb__completed_has(&ctx->done, h));
    return 0;
}

int kb_barrier(void)
{
    struct kb_rank *rk = tls_self;
    if (!rk)
        return KB_EPERM;
    if (cannot_suspend(rk))
        return KB_ECANCELED;
    struct kb_run *run = rk->run;
    unsigned gen = run->barrier.gen;
    kb__tl_instant(run, rk->index, KB_TL_BARRIER, 0, 0);
    run->barrier.arrived++;
    kb__barrier_check(run);
    /* Every arrival yields at least once, the last one too. The rank
     * leaves only in a round after the one in which its barrier opened, so
     * after that round's drain, and at its turn there: the waiters start
     * the code after the barrier in that round's order. A waiter whose turn
     * comes later in the opening round suspends once more. While this rank
     * waits the next generation cannot open (this rank has not arrived
     * there), so barrier.open_round is its own barrier's. */
    do {
        int rc = rank_suspend(rk, KB_SUSP_BARRIER, 0);
        if (rc != 0)
            return rc;
    } while (run->barrier.gen == gen || run->counters.rounds == run->barrier.open_round);
    return 0;
}

void kb_raise(int code, const char *fmt, ...)
{
    struct kb_rank *rk = tls_self;
    if (!rk) {
        fprintf(stderr, "kbthreads: kb_raise() called outside a rank; aborting\n");
        abort();
    }
    if (rk->unwinding) {
        fprintf(stderr, "kbthreads: kb_raise() called by rank %d while it is already unwinding; aborting\n",
                rk->index);
        abort();
    }
    va_list ap;
    va_start(ap, fmt);
    kb__failure_addv(rk, code != 0 ? code : KB_EINVAL, fmt, ap);
    va_end(ap);
    rk->unwinding = 1;
    pthread_exit(NULL);
}

int kb_fail(int code, const char *fmt, ...)
{
    if (code == 0)
        return KB_EINVAL;
    struct kb_rank *rk = tls_self;
    if (!rk)
        return KB_EPERM;
    va_list ap;
    va_start(ap, fmt);
    kb__failure_addv(rk, code, fmt, ap);
    va_end(ap);
    return 0;
}
