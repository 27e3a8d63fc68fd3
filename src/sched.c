/*
 * The scheduler loop, driver side: rounds, the drain after each round, and
 * the failure path (cancel every live sibling in rank order, abort the
 * engine, clear both queues). Also the baton handoff and the round's order,
 * which ranks use to find the next holder.
 *
 * A round: the driver builds the round's order (the live ranks in rank
 * order, a strategy's permutation of them (order.c), or the recorded order
 * of a replay)
 * and hands the baton to its first rank; each rank, when it suspends or
 * finishes, hands it straight to the next rank of the order. The last one
 * hands it back to the driver when the round's drain has work (or the
 * spawn ends, or a limit or replay needs checking); otherwise it does the
 * round boundary itself (an empty drain, the next round's order) and hands
 * the baton straight to the next round's first rank. So a turn costs one
 * handoff and a round with nothing to drain none more. A failing rank
 * hands the baton to the driver at once, which skips the rest of the round
 * and the drain.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloc.h"
#include "order.h"
#include "run.h"
#include "schedule.h"
#include "timeline.h"

void kb_handoff(struct kb_run *run, int to)
{
    /* A ck_pr store: the watchdog reads the holder without the baton. */
    ck_pr_store_int(&run->holder, to);
    run->handoffs++;
    if (to != KB_DRIVER) {
        run->turns++;
        if (run->rank_turns)
            run->rank_turns[to]++;
    }
    if (run->stall_ms)
        kb_watch_stamp(run);
    kb_slot_post(to == KB_DRIVER ? &run->ctx->driver_slot : &run->ranks[to].w->slot);
}

/* The CPU rank runs on under the run's affinity option, -1 for none. */
int kb_wanted_cpu(const struct kb_run *run, int rank)
{
    if (run->affinity == KB_AFFINITY_ONE_CPU)
        return run->cpu;
    if (run->affinity == KB_AFFINITY_SPREAD)
        return run->cpus[rank % run->ncpus];
    return -1;
}

/* With nudges: the slot of the rank that most likely holds the baton
 * after next, if it is worth waking now: it is live and, when ranks are
 * pinned (KB_AFFINITY_SPREAD), sits on another CPU than next, where it can
 * watch its slot while next runs. Unpinned, it wakes while the holder's
 * and next's CPUs are both busy, so the kernel puts it on one of them and
 * its wake-up pays no idle CPU's exit from halt; it watches yielding. (A
 * rank not started yet watches in its worker's wait, worker.c.) At the end
 * of a round that is this round's first rank: the next round's first in
 * round-robin order, a guess in the others (a wrong guess costs a wasted
 * watch, never the order). self: the holder (KB_DRIVER for the driver).
 * Holder only, after next was chosen and before it is posted. */
struct kb_slot *kb_ahead_of(const struct kb_run *run, int self, int next)
{
    if (!run->rank_wait.watch || next == KB_DRIVER || run->norder < 2)
        return NULL;
    int after = run->pos + 1 < run->norder ? run->order[run->pos + 1] : run->order[0];
    if (after == next || after == self)
        return NULL;
    const struct kb_rank *ra = &run->ranks[after];
    if (ra->state == KB_RS_FINISHED || !ra->w)
        return NULL;
    if (run->affinity == KB_AFFINITY_SPREAD && kb_wanted_cpu(run, after) == kb_wanted_cpu(run, next))
        return NULL;
    return &ra->w->slot;
}

void kb_rank_retire(struct kb_run *run, struct kb_rank *rk)
{
    rk->state = KB_RS_FINISHED;
    run->nlive--;
}

int kb_next_in_round(struct kb_run *run)
{
    if (run->pos + 1 < run->norder)
        return run->order[++run->pos];
    return KB_DRIVER;
}

void kb_barrier_check(struct kb_run *run)
{
    if (run->barrier_arrived > 0 && run->barrier_arrived >= run->nlive) {
        run->barrier_gen++;
        run->barrier_arrived = 0;
        run->barrier_open_round = run->rounds;
    }
}

int kb_time_passed(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

const struct timespec *kb_join_deadline(const struct kb_run *run)
{
    return run->join_timed && !ck_pr_load_int(&run->join_due) ? &run->join_deadline : NULL;
}

void kb_join_expire(struct kb_run *run)
{
    if (kb_join_deadline(run) && kb_time_passed(&run->join_deadline))
        ck_pr_store_int(&run->join_due, 1);
}

/* Driver: take the baton back. In a timed kb_join the ranks run round
 * boundaries themselves as in kb_spawn; the driver sleeps no longer than
 * the join's deadline, then raises join_due, so that the rank ending the
 * current round hands the baton back (kb_round_boundary), and waits on.
 * No clock is read on the ranks' side. */
static void driver_wait(struct kb_run *run)
{
    struct kb_slot *slot = &run->ctx->driver_slot;
    if (run->stall_ms) {
        kb_watch_wait(run); /* minds the join's deadline too */
        return;
    }
    const struct timespec *deadline = kb_join_deadline(run);
    if (deadline) {
        if (kb_slot_wait_yield_until(slot, run->park_look_ns, deadline) == 0)
            return;
        kb_join_expire(run);
    }
    struct kb_wait_budget park = {.look_ns = run->park_look_ns}; /* never nudged */
    kb_slot_wait_budget(slot, &park);
}

void kb_wait_nudges(struct kb_run *run)
{
    for (int i = 0; run->rank_wait.watch && i < run->nprocs; i++) {
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
    kb_wait_nudges(run);
    kb_worker_end(run->ctx, rk->w);
    rk->w = NULL;
}

static void cancel_rank(struct kb_run *run, struct kb_rank *rk)
{
    rk->cancelled = 1;
    kb_tl_instant(run, rk->index, KB_TL_CANCEL, 0, 0);
    if (rk->state == KB_RS_NEW) {
        /* Never started: finished without ever calling fn. Its worker
         * keeps waiting and goes back to the pool at teardown. */
        kb_rank_retire(run, rk);
        return;
    }
    /* Started, so suspended at a suspension point: resume it there; it
     * unwinds (UNWIND) or sees KB_ECANCELED (RETURN), runs its cleanup and
     * hands the baton back when its function has ended. */
    run->stop = KB_STOP_NONE;
    run->norder = 0; /* a cancelled rank's turn ends at the driver */
    run->pos = 0;
    kb_handoff(run, rk->index);
    driver_wait(run);
    join_if_exited(run, rk);
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

/* The spawn stops with code (KB_ESPAWN, KB_ETIMEDOUT or KB_EDIVERGED):
 * remember where the live ranks were, then the failure path. */
static int stop_run(struct kb_run *run, int code)
{
    if (code != KB_ESPAWN) {
        run->live = kb_calloc((size_t)(run->nlive > 0 ? run->nlive : 1), sizeof *run->live);
        for (int i = 0; run->live && i < run->nprocs; i++) {
            struct kb_rank *rk = &run->ranks[i];
            if (rk->state == KB_RS_FINISHED)
                continue;
            kb_live_rank *l = &run->live[run->nlive_snapshot++];
            l->rank = i;
            l->where = rk->state == KB_RS_NEW        ? KB_AT_START
                       : rk->susp == KB_SUSP_WAIT    ? KB_AT_WAIT
                       : rk->susp == KB_SUSP_BARRIER ? KB_AT_BARRIER
                                                     : KB_AT_YIELD;
            l->handle = l->where == KB_AT_WAIT ? rk->susp_handle : 0;
        }
    }
    run->fail_code = code;
    if (run->record && code != KB_ESPAWN)
        kb_record_end(run->record, "%s", code == KB_ETIMEDOUT ? "timeout" : "diverged");
    kb_tl_instant(run, KB_DRIVER, KB_TL_STOP, 0, code);
    kb_sched_cancel_all(run, 1);
    return code;
}

/* The live ranks in rank order, as "[0, 2, 3]" into buf. */
static void live_list(const struct kb_run *run, const int *ranks, int n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? ", " : "", ranks[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    (void)run;
}

/* A replay that checks the program against it (not a partial schedule). */
static int replay_strict(const struct kb_run *run)
{
    return run->replay && !kb_replay_partial(run->replay);
}

/* Build this round's order. 0, or KB_EDIVERGED (run->stop_detail set). */
static int build_order(struct kb_run *run)
{
    run->norder = 0;
    for (int i = 0; i < run->nprocs; i++)
        if (run->ranks[i].state != KB_RS_FINISHED)
            run->order[run->norder++] = i;
    uint64_t round = run->rounds + 1;
    if (run->replay && kb_replay_partial(run->replay)) {
        const int *want;
        int nwant;
        if (kb_replay_round(run->replay, round, &want, &nwant))
            kb_order_partial(run, want, nwant);
    } else if (run->replay) {
        const int *want;
        int nwant;
        if (!kb_replay_round(run->replay, round, &want, &nwant)) {
            run->diverged_turn = run->turns + 1;
            char live[256];
            live_list(run, run->order, run->norder, live, sizeof live);
            run->stop_detail = kb_format("replay diverged at turn %llu (round %llu): the recording ends "
                                         "after round %llu, ranks %s are still live",
                                         (unsigned long long)run->diverged_turn, (unsigned long long)round,
                                         (unsigned long long)(round - 1), live);
            return KB_EDIVERGED;
        }
        if (!kb_replay_same_ranks(want, nwant, run->order, run->norder)) {
            run->diverged_turn = run->turns + 1;
            char live[256], rec[256];
            live_list(run, run->order, run->norder, live, sizeof live);
            int *sorted = kb_replay_sorted(want, nwant);
            live_list(run, sorted ? sorted : want, nwant, rec, sizeof rec);
            free(sorted);
            run->stop_detail =
                kb_format("replay diverged at turn %llu (round %llu): the recording has ranks "
                          "%s live, the program %s",
                          (unsigned long long)run->diverged_turn, (unsigned long long)round, rec, live);
            return KB_EDIVERGED;
        }
        for (int i = 0; i < nwant; i++)
            run->order[i] = want[i];
    } else if (run->schedule == KB_SCHED_SEEDED) {
        kb_order_seeded(run); /* the same seed, the same orders */
    } else if (run->schedule == KB_SCHED_PCT) {
        kb_order_pct(run, round);
    } else if (run->schedule == KB_SCHED_EXHAUSTIVE) {
        kb_order_exhaustive(run, round);
    }
    return 0;
}

/* Start the round whose order is built: count and record it. Holder only. */
static void begin_round(struct kb_run *run)
{
    run->rounds++;
    if (run->record) {
        kb_record_round(run->record, run->rounds, run->order, run->norder);
        kb_record_flush(run->record); /* on disk before any of its turns */
    }
    run->round_t0 = run->tl ? kb_now_ns() : 0;
    run->stop = KB_STOP_NONE;
    run->pos = 0;
}

static void end_round(struct kb_run *run)
{
    if (run->tl)
        kb_tl_slice(run, KB_DRIVER, KB_TL_ROUND, run->round_t0, kb_now_ns(), 0, (int64_t)run->rounds);
}

int kb_round_boundary(struct kb_run *run)
{
    /* Anything for the driver: a drain with work (the engine's hooks run
     * on the driver), the end of the spawn, a round limit, a strict
     * replay to check, or a timed kb_join whose deadline passed (join_due: one load
     * of a word the driver writes at most once per join). */
    if (ck_pr_load_int(&run->join_due) || replay_strict(run) || run->nlive == 0 ||
        kb_queue_len(&run->ctx->waits) > 0 || kb_queue_len(&run->ctx->colls) > 0 ||
        (run->max_rounds && run->rounds >= run->max_rounds))
        return KB_DRIVER;
    end_round(run);
    /* The round's drain, which has nothing to do: still exactly one per
     * round, in the statistics, the record and the timeline. */
    run->drains++;
    if (run->tl) {
        uint64_t now = kb_now_ns();
        kb_tl_slice(run, KB_DRIVER, KB_TL_DRAIN, now, now, 0, (int64_t)run->rounds);
    }
    if (run->record)
        kb_record_drain(run->record, run->rounds, 0);
    build_order(run); /* cannot diverge: no strict replay here */
    begin_round(run);
    return run->order[0];
}

int kb_sched_round(struct kb_run *run)
{
    if (run->nlive == 0) {
        if (replay_strict(run) && kb_replay_rounds(run->replay) > run->rounds) {
            run->diverged_turn = run->turns + 1;
            run->stop_detail =
                kb_format("replay diverged at turn %llu (round %llu): every rank finished after "
                          "round %llu, the recording has %llu rounds",
                          (unsigned long long)run->diverged_turn, (unsigned long long)(run->rounds + 1),
                          (unsigned long long)run->rounds, (unsigned long long)kb_replay_rounds(run->replay));
            return stop_run(run, KB_EDIVERGED);
        }
        return 1;
    }
    if (run->max_rounds && run->rounds >= run->max_rounds) {
        run->stop_detail =
            kb_format("spawn stopped after %llu rounds (max_rounds)", (unsigned long long)run->rounds);
        return stop_run(run, KB_ETIMEDOUT);
    }
    if (build_order(run) != 0)
        return stop_run(run, KB_EDIVERGED);
    begin_round(run);
    struct kb_slot *ahead = kb_ahead_of(run, KB_DRIVER, run->order[0]);
    kb_handoff(run, run->order[0]);
    if (ahead)
        kb_slot_nudge(ahead); /* safe after the post: only the driver frees workers */
    /* Ranks now pass the baton among themselves, through as many rounds
     * as need no drain work (kb_round_boundary), until one hands it back. */
    driver_wait(run);
    end_round(run);
    if (run->stop == KB_STOP_FAILED) {
        join_if_exited(run, &run->ranks[run->failed_rank]);
        if (run->record)
            kb_record_end(run->record, "failed rank %d", run->failed_rank);
        return stop_run(run, KB_ESPAWN);
    }
    uint64_t waits0 = run->engine_waits;
    uint64_t t0 = run->tl ? kb_now_ns() : 0;
    int rc = kb_drain(run->ctx, &run->drain_handle, &run->drain_origin);
    run->drains++;
    if (run->tl)
        kb_tl_slice(run, KB_DRIVER, KB_TL_DRAIN, t0, kb_now_ns(), 0, (int64_t)run->rounds);
    if (run->record)
        kb_record_drain(run->record, run->rounds, run->engine_waits - waits0);
    if (rc != 0) {
        run->drain_code = rc;
        kb_tl_instant(run, KB_DRIVER, KB_TL_DRAIN_FAIL, run->drain_handle, rc);
        if (run->record)
            kb_record_end(run->record, "failed drain");
        return stop_run(run, KB_ESPAWN);
    }
    if (run->nlive == 0) {
        if (replay_strict(run) && kb_replay_rounds(run->replay) > run->rounds)
            return kb_sched_round(run); /* reports the divergence */
        if (run->record)
            kb_record_end(run->record, "ok");
        return 1;
    }
    return 0;
}

/* ---- turn accounting ---------------------------------------------------- */

uint64_t kb_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void kb_turn_begin(struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    if (!run->observe)
        return;
    rk->turn_start_ns = kb_now_ns();
    if (run->rank_cpu_ns)
        rk->turn_cpu_ns = thread_cpu_ns();
}

void kb_turn_end(struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    if (!run->observe)
        return;
    if (run->rank_cpu_ns)
        run->rank_cpu_ns[rk->index] += thread_cpu_ns() - rk->turn_cpu_ns;
    if (run->tl)
        kb_tl_slice(run, rk->index, KB_TL_TURN, rk->turn_start_ns, kb_now_ns(), 0, (int64_t)run->rounds);
}

void kb_stats_fill(const struct kb_run *run, kb_spawn_stats *st)
{
    st->rounds = run->rounds;
    st->turns = run->turns;
    st->handoffs = run->handoffs;
    st->drains = run->drains;
    st->engine_waits = run->engine_waits;
    st->collectives = run->collectives;
    st->wall_ns = kb_now_ns() - run->start_ns;
    for (size_t i = 0; i < st->rank_cap && i < (size_t)run->nprocs; i++) {
        if (st->rank_turns)
            st->rank_turns[i] = run->rank_turns ? run->rank_turns[i] : 0;
        if (st->rank_cpu_ns)
            st->rank_cpu_ns[i] = run->rank_cpu_ns ? run->rank_cpu_ns[i] : 0;
    }
}
