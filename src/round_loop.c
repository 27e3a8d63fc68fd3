/* SPDX-License-Identifier: MIT */
/*
 * The round loop (round_loop.h), driver side: rounds, the drain after each
 * round (round_drain.c), and the failure path (cancel every live sibling in
 * rank order, abort the engine, clear both queues). Also the baton handoff
 * and the round's order, which ranks use to find the next holder.
 *
 * A round: the driver builds the round's order (the live ranks in rank
 * order, a strategy's permutation of them (strategy.c), or the recorded
 * order of a replay, checked by replay_check.c) and hands the baton to its
 * first rank; each rank, when it suspends or finishes, hands it straight
 * to the next rank of the order. The last one hands it back to the driver
 * when the round's drain has work (or the spawn ends, or a limit or replay
 * needs checking); otherwise it does the round boundary itself (an empty
 * drain, the next round's order) and hands the baton straight to the next
 * round's first rank. So a turn costs one handoff and a round with nothing
 * to drain none more. A failing rank hands the baton to the driver at
 * once, which skips the rest of the round and the drain.
 */
#include "round_loop.h"

#include <ck_pr.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "alloc.h"
#include "baton.h"
#include "clock.h"
#include "ctx.h"
#include "queue.h"
#include "replay_check.h"
#include "round_drain.h"
#include "run.h"
#include "schedule_file.h"
#include "strategy.h"
#include "strbuf.h"
#include "timeline.h"
#include "wait_policy.h"
#include "watchdog.h"
#include "worker.h"

void kb__handoff(struct kb_run *run, int to)
{
    /* A ck_pr store: the watchdog reads the holder without the baton. */
    ck_pr_store_int(&run->holder, to);
    /* Until the rank posted starts or resumes its code: kb_running_rank. */
    kb__ctx_running(run->ctx, to == KB_DRIVER ? KB_RUNNING_DRIVER : -1);
    run->counters.handoffs++;
    if (to != KB_DRIVER) {
        run->counters.turns++;
        if (run->counters.rank_turns)
            run->counters.rank_turns[to]++;
    }
    if (run->opt.stall_ms)
        kb__watch_stamp(run);
    kb__slot_post(to == KB_DRIVER ? &run->ctx->driver_slot : &run->ranks[to].w->slot);
}

/* The CPU rank runs on under the run's affinity option, -1 for none. */
int kb__wanted_cpu(const struct kb_run *run, int rank)
{
    if (run->opt.affinity == KB_AFFINITY_ONE_CPU)
        return run->opt.cpu;
    if (run->opt.affinity == KB_AFFINITY_SPREAD)
        return run->opt.cpus[rank % run->opt.ncpus];
    return -1;
}

/* With nudges (nudging: the holder's copy of how to wait has a watch): the
 * slot of the rank that most likely holds the baton after next, if it is
 * worth waking now: it is live and, when ranks are
 * pinned (KB_AFFINITY_SPREAD), sits on another CPU than next, where it can
 * watch its slot while next runs. Unpinned, it wakes while the holder's
 * and next's CPUs are both busy, so the kernel puts it on one of them and
 * its wake-up pays no idle CPU's exit from halt; it watches yielding. (A
 * rank not started yet watches in its worker's wait, worker.c.) At the end
 * of a round that is this round's first rank: the next round's first in
 * round-robin order, a guess in the others (a wrong guess costs a wasted
 * watch, never the order). self: the holder (KB_DRIVER for the driver).
 * Holder only, after next was chosen and before it is posted; a slot
 * returned raises run->nudged (kb__wait_nudges then looks at the marks). */
static struct kb_slot *nudge_target(struct kb_run *run, int nudging, int self, int next)
{
    if (!nudging || next == KB_DRIVER || run->norder < 2)
        return NULL;
    int after = run->pos + 1 < run->norder ? run->order[run->pos + 1] : run->order[0];
    if (after == next || after == self)
        return NULL;
    const struct kb_rank *ra = &run->ranks[after];
    if (ra->state == KB_RS_FINISHED || !ra->w)
        return NULL;
    if (run->opt.affinity == KB_AFFINITY_SPREAD && kb__wanted_cpu(run, after) == kb__wanted_cpu(run, next))
        return NULL;
    run->nudged = 1;
    return &ra->w->slot;
}

void kb__rank_retire(struct kb_run *run, struct kb_rank *rk)
{
    rk->state = KB_RS_FINISHED;
    run->nlive--;
}

static int next_in_round(struct kb_run *run)
{
    if (run->pos + 1 < run->norder)
        return run->order[++run->pos];
    return KB_DRIVER;
}

void kb__barrier_check(struct kb_run *run)
{
    if (run->barrier.arrived > 0 && run->barrier.arrived >= run->nlive) {
        run->barrier.gen++;
        run->barrier.arrived = 0;
        run->barrier.open_round = run->counters.rounds;
    }
}

const struct timespec *kb__join_deadline(const struct kb_run *run)
{
    return run->join.timed && !ck_pr_load_int(&run->join.due) ? &run->join.deadline : NULL;
}

void kb__join_expire(struct kb_run *run)
{
    if (kb__join_deadline(run) && kb__time_passed(&run->join.deadline))
        ck_pr_store_int(&run->join.due, 1);
}

/* Driver: take the baton back. In a timed kb_join the ranks run round
 * boundaries themselves as in kb_spawn; the driver sleeps no longer than
 * the join's deadline, then raises join.due, so that the rank ending the
 * current round hands the baton back (round_boundary), and waits on.
 * No clock is read on the ranks' side. */
static void driver_wait(struct kb_run *run)
{
    struct kb_slot *slot = &run->ctx->driver_slot;
    if (run->opt.stall_ms) {
        kb__watch_wait(run); /* minds the join's deadline too */
        return;
    }
    const struct timespec *deadline = kb__join_deadline(run);
    if (deadline) {
        if (kb__slot_wait_yield_until(slot, kb__wait_park_ns(run->wait), deadline) == 0)
            return;
        kb__join_expire(run);
    }
    struct kb_wait_budget park = {.look_ns = kb__wait_park_ns(run->wait)}; /* never nudged */
    kb__slot_wait_budget(slot, &park);
}

void kb__wait_nudges(struct kb_run *run)
{
    for (int i = 0; run->nudged && i < run->nprocs; i++) {
        struct kb_worker *w = run->ranks[i].w;
        while (w && ck_pr_load_int(&w->nudging))
            sched_yield();
    }
    ck_pr_fence_acquire();
}

/* Driver: a rank thread that unwound is joined before anything else runs,
 * so its thread exit (TLS destructors included) overlaps no other code.
 * With nudges, a rank that handed the baton on may still be about to nudge
 * this worker's slot: wait for that first. */
static void join_if_exited(struct kb_run *run, struct kb_rank *rk)
{
    if (!rk->w || !rk->w->exited)
        return;
    kb__wait_nudges(run);
    kb__worker_end(run->ctx, rk->w);
    rk->w = NULL;
}

static void cancel_rank(struct kb_run *run, struct kb_rank *rk)
{
    rk->cancelled = 1;
    kb__tl_instant(run, rk->index, KB_TL_CANCEL, 0, 0);
    if (rk->state == KB_RS_NEW) {
        /* Never started: finished without ever calling fn. Its worker
         * keeps waiting and goes back to the pool at teardown. */
        kb__rank_retire(run, rk);
        return;
    }
    /* Started, so suspended at a suspension point: resume it there; it
     * unwinds (UNWIND) or sees KB_ECANCELED (RETURN), runs its cleanup and
     * hands the baton back when its function has ended. */
    run->stop = KB_STOP_NONE;
    run->norder = 0; /* a cancelled rank's turn ends at the driver */
    run->pos = 0;
    kb__handoff(run, rk->index);
    driver_wait(run);
    join_if_exited(run, rk);
}

void kb__sched_cancel_all(struct kb_run *run)
{
    for (int i = 0; i < run->nprocs; i++) {
        struct kb_rank *rk = &run->ranks[i];
        if (rk->state != KB_RS_FINISHED)
            cancel_rank(run, rk);
    }
    kb__engine_abort(run->ctx); /* sees the queues still full */
    kb__queue_clear(&run->ctx->waits);
    kb__queue_clear(&run->ctx->colls);
    run->failure.failed = 1;
}

/* The spawn stops with code (KB_ESPAWN, KB_ETIMEDOUT, KB_EDIVERGED or
 * KB_ENOMEM): remember where the live ranks were, then the failure path. */
static int stop_run(struct kb_run *run, int code)
{
    if (code != KB_ESPAWN) {
        run->failure.live = kb__calloc((size_t)(run->nlive > 0 ? run->nlive : 1), sizeof *run->failure.live);
        for (int i = 0; run->failure.live && i < run->nprocs; i++) {
            struct kb_rank *rk = &run->ranks[i];
            if (rk->state == KB_RS_FINISHED)
                continue;
            kb_live_rank *l = &run->failure.live[run->failure.nlive++];
            l->rank = i;
            l->where = rk->state == KB_RS_NEW        ? KB_AT_START
                       : rk->susp == KB_SUSP_WAIT    ? KB_AT_WAIT
                       : rk->susp == KB_SUSP_BARRIER ? KB_AT_BARRIER
                                                     : KB_AT_YIELD;
            l->handle = l->where == KB_AT_WAIT ? rk->susp_handle : 0;
        }
    }
    run->failure.code = code;
    if (run->files.record && code != KB_ESPAWN)
        kb__record_end(run->files.record, "%s",
                       code == KB_ETIMEDOUT ? "timeout"
                       : code == KB_ENOMEM  ? "out of memory"
                                            : "diverged");
    kb__tl_instant(run, KB_DRIVER, KB_TL_STOP, 0, code);
    kb__sched_cancel_all(run);
    return code;
}

/* Build this round's order. 0, or what kb__replay_order answers for a
 * strict replay (KB_EDIVERGED, KB_ENOMEM; run->failure.detail set). */
static int build_order(struct kb_run *run)
{
    run->norder = 0;
    for (int i = 0; i < run->nprocs; i++)
        if (run->ranks[i].state != KB_RS_FINISHED)
            run->order[run->norder++] = i;
    uint64_t round = run->counters.rounds + 1;
    if (run->files.replay && kb__replay_partial(run->files.replay)) {
        const int *want;
        int nwant;
        if (kb__replay_round(run->files.replay, round, &want, &nwant))
            kb__order_partial(run, want, nwant);
    } else if (run->files.replay) {
        return kb__replay_order(run, round);
    } else if (run->strategy.kind == KB_SCHED_SEEDED) {
        kb__order_seeded(run); /* the same seed, the same orders */
    } else if (run->strategy.kind == KB_SCHED_PCT) {
        kb__order_pct(run, round);
    } else if (run->strategy.kind == KB_SCHED_EXHAUSTIVE) {
        kb__order_exhaustive(run, round);
    } else if (run->strategy.kind == KB_SCHED_DELAYS) {
        kb__order_delays(run);
    }
    return 0;
}

/* Start the round whose order is built: count and record it. Holder only
 * (driver: 1 when it is the driver). */
static void begin_round(struct kb_run *run, int driver)
{
    run->counters.rounds++;
    if (run->files.record) {
        kb__record_round(run->files.record, run->counters.rounds, run->order, run->norder);
        kb__record_flush(run->files.record); /* on disk before any of its turns */
    }
    run->round_t0 = run->files.tl ? kb__now_ns() : 0;
    run->stop = KB_STOP_NONE;
    run->pos = 0;
    kb__wait_round(run->wait, run->counters.handoffs, driver);
}

static void end_round(struct kb_run *run)
{
    if (run->files.tl)
        kb__tl_slice(run, KB_DRIVER, KB_TL_ROUND, run->round_t0, kb__now_ns(), 0,
                     (int64_t)run->counters.rounds);
}

/* At the end of a round, on the rank that ends it: when the driver has
 * nothing to do (nothing to drain, ranks still live, no limit or replay to
 * check, no timed kb_join whose deadline passed), run the round boundary
 * here (the empty drain, the next round's order) and return the next
 * round's first rank; else KB_DRIVER. */
static int round_boundary(struct kb_run *run)
{
    /* Anything for the driver: a drain with work (the engine's hooks run
     * on the driver), the end of the spawn, a round limit, a strict replay
     * to check, or a timed kb_join whose deadline passed (join.due: one
     * load of a word the driver writes at most once per join). */
    if (ck_pr_load_int(&run->join.due) || kb__replay_strict(run) || run->nlive == 0 ||
        kb__queue_len(&run->ctx->waits) > 0 || kb__queue_len(&run->ctx->colls) > 0 ||
        (run->opt.max_rounds && run->counters.rounds >= run->opt.max_rounds))
        return KB_DRIVER;
    end_round(run);
    /* The round's drain, which has nothing to do: still exactly one per
     * round, in the statistics, the record and the timeline. */
    run->counters.drains++;
    if (run->files.tl) {
        uint64_t now = kb__now_ns();
        kb__tl_slice(run, KB_DRIVER, KB_TL_DRAIN, now, now, 0, (int64_t)run->counters.rounds);
    }
    if (run->files.record)
        kb__record_drain(run->files.record, run->counters.rounds, 0);
    build_order(run); /* cannot diverge: no strict replay here */
    begin_round(run, 0);
    return run->order[0];
}

void kb__pass_baton(struct kb_rank *rk, int suspend)
{
    struct kb_run *run = rk->run;
    struct kb_worker *w = rk->w; /* the rank record may go once the baton does */
    kb__turn_end(rk);
    int next = next_in_round(run);
    if (next == KB_DRIVER)
        next = round_boundary(run); /* the next round's first rank, if no driver work */
    /* How to wait, copied with the baton held, after the boundary this
     * rank may have run (the policy changes its choice only there). */
    struct kb_wait_budget wait = {0};
    if (suspend)
        kb__wait_next_turn(run->wait, rk->index, &wait);
    int nudging = suspend ? wait.watch != 0 : kb__wait_nudging(run->wait);
    struct kb_slot *ahead = nudge_target(run, nudging, rk->index, next);
    if (ahead)
        ck_pr_store_int(&w->nudging, 1); /* published by the post below */
    kb__handoff(run, next);              /* may be this rank itself: a round of one */
    /* The baton is gone: from here only our worker, our copy of how to
     * wait and our slot. The nudge comes after the post so that it costs
     * the next holder nothing; until our nudging mark drops, the driver
     * frees no worker (kb__wait_nudges), so the nudged slot stays. */
    if (ahead) {
        kb__slot_nudge(ahead);
        ck_pr_fence_release();
        ck_pr_store_int(&w->nudging, 0);
    }
    if (suspend)
        kb__slot_wait_budget(&w->slot, &wait);
}

/* No rank is live: 1, or KB_EDIVERGED when a strict replay has rounds
 * the program did not run. */
static int all_finished(struct kb_run *run)
{
    int rc = kb__replay_check_end(run);
    return rc == 0 ? 1 : stop_run(run, rc);
}

/* The drain after the ranks' part of a round: 0, or KB_ESPAWN when an
 * engine wait failed (the run stopped). */
static int drain_round(struct kb_run *run)
{
    uint64_t waits0 = run->counters.engine_waits;
    uint64_t t0 = run->files.tl ? kb__now_ns() : 0;
    int rc = kb__drain(run->ctx, &run->failure.drain_handle, &run->failure.drain_origin);
    run->counters.drains++;
    if (run->files.tl)
        kb__tl_slice(run, KB_DRIVER, KB_TL_DRAIN, t0, kb__now_ns(), 0, (int64_t)run->counters.rounds);
    if (run->files.record)
        kb__record_drain(run->files.record, run->counters.rounds, run->counters.engine_waits - waits0);
    if (rc == 0)
        return 0;
    run->failure.drain_code = rc;
    kb__tl_instant(run, KB_DRIVER, KB_TL_DRAIN_FAIL, run->failure.drain_handle, rc);
    if (run->files.record)
        kb__record_end(run->files.record, "failed drain");
    return stop_run(run, KB_ESPAWN);
}

int kb__sched_round(struct kb_run *run)
{
    if (run->nlive == 0)
        return all_finished(run);
    if (run->opt.max_rounds && run->counters.rounds >= run->opt.max_rounds) {
        run->failure.detail = kb__format("spawn stopped after %llu rounds (max_rounds)",
                                         (unsigned long long)run->counters.rounds);
        return stop_run(run, KB_ETIMEDOUT);
    }
    int rc = build_order(run);
    if (rc != 0)
        return stop_run(run, rc);
    begin_round(run, 1);
    struct kb_slot *ahead = nudge_target(run, kb__wait_nudging(run->wait), KB_DRIVER, run->order[0]);
    kb__handoff(run, run->order[0]);
    if (ahead)
        kb__slot_nudge(ahead); /* safe after the post: only the driver frees workers */
    /* Ranks now pass the baton among themselves, through as many rounds
     * as need no drain work (round_boundary), until one hands it back. */
    driver_wait(run);
    end_round(run);
    if (run->stop == KB_STOP_FAILED) {
        join_if_exited(run, &run->ranks[run->failed_rank]);
        if (run->files.record)
            kb__record_end(run->files.record, "failed rank %d", run->failed_rank);
        return stop_run(run, KB_ESPAWN);
    }
    rc = drain_round(run);
    if (rc != 0 || run->nlive > 0)
        return rc;
    rc = all_finished(run);
    if (rc == 1 && run->files.record)
        kb__record_end(run->files.record, "ok");
    return rc;
}
