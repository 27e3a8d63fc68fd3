/* SPDX-License-Identifier: MIT */
/*
 * Running a program of rel_prog.h on the library. Rank functions and engine
 * hooks append trace lines; they hold the baton when they do, so the trace
 * needs no lock.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kbthreads.h"
#include "rel_run.h"
#include "trace.h"

struct rr {
    const struct rp_prog *p;
    const struct rp_phase *ph;
    int phase;
    kb_ctx *ctx;
    const struct rr_hooks *hooks;
    int fail_left[RP_NPOOL];
    /* the program's own collective state (touched by the baton holder) */
    int arrived[RP_NTAGS];
    int issued[RP_NTAGS];
    int next_sip;
};

static unsigned long long hv(kb_handle h)
{
    return (unsigned long long)h;
}

/* ---- trace helpers ------------------------------------------------------- */

static void add_waits(char *buf, size_t cap, const kb_ctx *ctx)
{
    kb_handle hs[256];
    size_t n = kb_pending_waits(ctx, hs, 256);
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < n && i < 256 && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu", i ? "," : "", hv(hs[i]));
    if (n > 256 && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, ",...%zu", n);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

static void add_colls(char *buf, size_t cap, const kb_ctx *ctx)
{
    kb_collective cs[256];
    size_t n = kb_pending_collectives(ctx, cs, 256);
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < n && i < 256 && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu/%d/%s", i ? "," : "", hv(cs[i].handle),
                                cs[i].sip_id, cs[i].meta ? (const char *)cs[i].meta : "-");
    if (n > 256 && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, ",...%zu", n);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

static void post_line(struct rr *R)
{
    char pw[4096], pc[8192], done[2048];
    add_waits(pw, sizeof pw, R->ctx);
    add_colls(pc, sizeof pc, R->ctx);
    size_t len = (size_t)snprintf(done, sizeof done, "[");
    int first = 1;
    for (int i = 0; i < RP_NPOOL; i++)
        if (kb_is_completed(R->ctx, rp_pool_handle(i)) == 1) {
            len += (size_t)snprintf(done + len, sizeof done - len, "%s%llu", first ? "" : ",",
                                    hv(rp_pool_handle(i)));
            first = 0;
        }
    for (int ph = 0; ph < R->p->nphases; ph++)
        for (int t = 0; t < RP_NTAGS; t++)
            if (kb_is_completed(R->ctx, rp_coll_handle(ph, t)) == 1) {
                len += (size_t)snprintf(done + len, sizeof done - len, "%s%llu", first ? "" : ",",
                                        hv(rp_coll_handle(ph, t)));
                first = 0;
            }
    snprintf(done + len, sizeof done - len, "]");
    tr_add("post pw=%s pc=%s done=%s", pw, pc, done);
}

static void stats_line(const kb_spawn_stats *st, int nprocs)
{
    char rt[256];
    size_t len = 0;
    rt[0] = '\0';
    for (int i = 0; i < nprocs && len < sizeof rt; i++)
        len += (size_t)snprintf(rt + len, sizeof rt - len, "%s%llu", i ? "," : "",
                                (unsigned long long)st->rank_turns[i]);
    tr_add(RT_STATS, (unsigned long long)st->rounds, (unsigned long long)st->turns,
           (unsigned long long)st->handoffs, (unsigned long long)st->drains,
           (unsigned long long)st->engine_waits, (unsigned long long)st->collectives, rt);
}

static void report_lines(int rc, const kb_spawn_error *e)
{
    if (rc != KB_ESPAWN && rc != KB_ETIMEDOUT && rc != KB_EDIVERGED)
        return;
    if (!e) {
        tr_add("report none");
        return;
    }
    size_t n = kb_spawn_error_count(e);
    size_t nl = kb_spawn_error_live_count(e);
    tr_add(RT_REPORT, kb_spawn_error_code(e), n, kb_spawn_error_drain_code(e),
           hv(kb_spawn_error_drain_handle(e)), nl);
    for (size_t i = 0; i < n; i++) {
        const kb_rank_error *re = kb_spawn_error_get(e, i);
        tr_add(RT_ENTRY, re->rank, re->code, re->message);
    }
    for (size_t i = 0; i < nl; i++) {
        const kb_live_rank *l = kb_spawn_error_live_get(e, i);
        tr_add(RT_LIVE, l->rank, (int)l->where, hv(l->handle));
    }
    tr_add(RT_MSG, kb_spawn_error_message(e));
}

/* ---- the engine ----------------------------------------------------------- */

static int hook_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    struct rr *R = self;
    tr_add("ew %llu o=%d m=%s", hv(h), (int)origin, meta ? (const char *)meta : "-");
    int tag = rp_coll_tag(h);
    if (tag >= 0 && R->p->coll_fail[tag]) {
        tr_add("ew fail %d", R->p->coll_fail[tag]);
        return R->p->coll_fail[tag];
    }
    int i = rp_pool_index(h);
    if (i < 0)
        return 0;
    const struct rp_knob *k = &R->p->knobs[i];
    kb_handle t = rp_pool_handle(k->target);
    int rc = 0;
    switch (k->kind) {
    case KN_FAIL:
        if (R->fail_left[i] == 0)
            return 0;
        if (R->fail_left[i] > 0)
            R->fail_left[i]--;
        tr_add("ew fail %d", k->code);
        return k->code;
    case KN_ENQ:
        rc = kb_enqueue_wait(R->ctx, t);
        tr_add("ew enq %llu = %d", hv(t), rc);
        return rc;
    case KN_SUBMIT:
        rc = kb_collective_submit(R->ctx, t, 90 + k->target, "k");
        tr_add("ew submit %llu = %d", hv(t), rc);
        return rc;
    case KN_DONE:
        rc = kb_complete(R->ctx, t);
        tr_add("ew done %llu = %d", hv(t), rc);
        return rc;
    case KN_DWAIT:
        rc = kb_wait_meta(R->ctx, t, "n");
        tr_add("ew dwait %llu = %d", hv(t), rc);
        return rc;
    default:
        return 0;
    }
}

static void hook_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)self;
    (void)ctx;
    tr_add("bind %d", rank);
}

static void hook_abort(void *self, kb_ctx *ctx)
{
    struct rr *R = self;
    char pw[4096], pc[8192];
    add_waits(pw, sizeof pw, ctx);
    add_colls(pc, sizeof pc, ctx);
    tr_add("abort pw=%s pc=%s", pw, pc);
    if (R->p->abort_done >= 0) {
        kb_handle h = rp_pool_handle(R->p->abort_done);
        tr_add("abort done %llu = %d", hv(h), kb_complete(ctx, h));
    }
}

/* ---- ranks ----------------------------------------------------------------- */

struct frame {
    struct rr *R;
    int rank;
    int ret;
};

static void cleanup_action(struct rr *R, int rank, const struct rp_rank *pr)
{
    kb_handle h = rp_pool_handle(pr->cleanup_h);
    int a, b, c;
    switch (pr->cleanup) {
    case CL_FAIL:
        tr_add("cleanup %d fail = %d", rank, kb_fail(pr->cancel_code, "r%d cleanup", rank));
        break;
    case CL_SUSPEND:
        a = kb_yield();
        b = kb_wait(R->ctx, h);
        c = kb_barrier();
        tr_add("cleanup %d suspend = %d %d %d", rank, a, b, c);
        break;
    case CL_ENQ:
        tr_add("cleanup %d enq %llu = %d", rank, hv(h), kb_enqueue_wait(R->ctx, h));
        break;
    case CL_DONE:
        tr_add("cleanup %d done %llu = %d", rank, hv(h), kb_complete(R->ctx, h));
        break;
    default:
        break;
    }
}

static void rank_cleanup(void *arg)
{
    struct frame *fr = arg;
    tr_add("cleanup %d c=%d", fr->rank, kb_cancelled());
    cleanup_action(fr->R, fr->rank, &fr->R->ph->ranks[fr->rank]);
}

/* The all-reduce: the first `world` arrivals of tag; the last one submits
 * the collective, earlier ones yield until it has; then every one waits on
 * it (kb_wait) or polls it (kb_yield until completed). */
static int coll(struct rr *R, int rank, int i, const struct rp_op *op)
{
    int tag = op->tag, rc;
    kb_handle ch = rp_coll_handle(R->phase, tag);
    R->arrived[tag]++;
    tr_add("%d.%d arrive %d/%d", rank, i, R->arrived[tag], op->code);
    if (R->arrived[tag] == op->code) {
        int sip = R->next_sip++;
        rc = kb_collective_submit(R->ctx, ch, sip, (void *)(uintptr_t)rp_tag_meta[tag]);
        tr_add("%d.%d issue %llu sip=%d = %d", rank, i, hv(ch), sip, rc);
        if (rc != 0)
            return rc;
        R->issued[tag] = 1;
    } else {
        while (!R->issued[tag])
            if ((rc = kb_yield()) != 0)
                return rc;
    }
    if (!op->poll)
        return kb_wait(R->ctx, ch);
    for (;;) {
        int c = kb_is_completed(R->ctx, ch);
        if (c == 1)
            return 0;
        if (c < 0)
            return c;
        if ((rc = kb_yield()) != 0)
            return rc;
    }
}

static int do_op(struct rr *R, int rank, int i, const struct rp_op *op)
{
    kb_handle h = rp_pool_handle(op->h);
    switch (op->kind) {
    case RP_YIELD:
        return kb_yield();
    case RP_WAIT:
        return kb_wait(R->ctx, h);
    case RP_ENQ:
        return kb_enqueue_wait(R->ctx, h);
    case RP_DONE:
        return kb_complete(R->ctx, h);
    case RP_SUBMIT:
        return kb_collective_submit(R->ctx, h, R->next_sip++, "s");
    case RP_ISDONE:
        return kb_is_completed(R->ctx, h);
    case RP_COLL:
        return coll(R, rank, i, op);
    case RP_BARRIER:
        return kb_barrier();
    case RP_FAIL:
        return kb_fail(op->code, "r%d.%d fail", rank, i);
    case RP_RAISE:
        kb_raise(op->code, "r%d.%d raise", rank, i);
    case RP_BADWAIT:
        return kb_wait(R->ctx, KB_HANDLE_RESERVED_LOW);
    case RP_EXIT:
        pthread_exit(NULL);
    default:
        return 0;
    }
}

static int run_ops(struct rr *R, int rank)
{
    const struct rp_rank *pr = &R->ph->ranks[rank];
    for (int i = 0; i < pr->nops; i++) {
        const struct rp_op *op = &pr->ops[i];
        char buf[64];
        tr_add("%d.%d %s", rank, i, rp_op_text(op, buf, sizeof buf));
        if (op->kind == RP_RETURN)
            return op->code;
        int rc = do_op(R, rank, i, op);
        tr_add("%d.%d = %d", rank, i, rc);
        if (rc != KB_ECANCELED)
            continue;
        switch (pr->on_cancel) {
        case OC_RETURN:
            return KB_ECANCELED;
        case OC_ZERO:
            return 0;
        case OC_CODE:
            return pr->cancel_code;
        case OC_FAIL:
            tr_add("%d fail = %d", rank, kb_fail(pr->cancel_code, "r%d cancelled", rank));
            return KB_ECANCELED;
        default:
            break;
        }
    }
    return pr->end_code;
}

static int rank_fn(int rank, void *arg)
{
    struct frame fr = {arg, rank, 0};
    if (fr.R->hooks && fr.R->hooks->rank_start)
        fr.R->hooks->rank_start(rank);
    tr_add("start %d", rank);
    pthread_cleanup_push(rank_cleanup, &fr);
    fr.ret = run_ops(fr.R, rank);
    pthread_cleanup_pop(0);
    tr_add("end %d = %d", rank, fr.ret);
    return fr.ret;
}

static int never_runs(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    return 99;
}

/* ---- the driver ------------------------------------------------------------- */

static void driver_op(struct rr *R, const struct rp_dop *d)
{
    kb_handle h = rp_pool_handle(d->h);
    int rc;
    switch (d->kind) {
    case RD_ENQ:
        rc = kb_enqueue_wait(R->ctx, h);
        break;
    case RD_DONE:
        rc = kb_complete(R->ctx, h);
        break;
    case RD_SUBMIT:
        rc = kb_collective_submit(R->ctx, h, 80 + d->h, "d");
        break;
    case RD_WAIT:
        rc = kb_wait_meta(R->ctx, h, "w");
        break;
    case RD_ISDONE:
        rc = kb_is_completed(R->ctx, h);
        break;
    default:
        rc = kb_spawn(R->ctx, never_runs, NULL, 1, NULL, NULL);
        break;
    }
    tr_add("d %s %llu = %d", rp_dop_name(d->kind), hv(h), rc);
}

static void enter(struct rr *R)
{
    if (R->hooks && R->hooks->driver_enter)
        R->hooks->driver_enter();
}

static void run_phase(struct rr *R, int phase, struct rp_clock *clock)
{
    const struct rp_phase *ph = &R->p->phases[phase];
    R->ph = ph;
    R->phase = phase;
    memset(R->arrived, 0, sizeof R->arrived);
    memset(R->issued, 0, sizeof R->issued);
    R->next_sip = 0;
    tr_add(RT_PHASE, phase, ph->kind == RP_START ? "start" : "spawn", ph->nprocs, ph->cancel_mode, ph->seeded,
           ph->max_rounds);
    for (int i = 0; i < ph->npre; i++)
        driver_op(R, &ph->pre[i]);

    uint64_t turns[RP_MAX_RANKS] = {0}, cpu[RP_MAX_RANKS] = {0};
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    st.rank_turns = turns;
    st.rank_cpu_ns = cpu;
    st.rank_cap = RP_MAX_RANKS;
    /* Affinity changes where ranks run, never what they do: about half the
     * phases run with KB_AFFINITY_SPREAD (pinning and nudges) and must match
     * the model all the same (in a library that has affinity: without it
     * the option is KB_ENOTSUP, test_build_options). */
    int spread = (ph->nprocs + phase) % 2 && (kb_features() & KB_FEATURE_AFFINITY);
    kb_spawn_opts o = {.cancel_mode = (kb_cancel_mode)ph->cancel_mode,
                       .affinity = spread ? KB_AFFINITY_SPREAD : 0,
                       .schedule = ph->seeded ? KB_SCHED_SEEDED : KB_SCHED_ROUND_ROBIN,
                       .seed = ph->seed,
                       .max_rounds = ph->max_rounds,
                       .stats = &st};
    kb_spawn_error *err = NULL;
    if (ph->kind == RP_SPAWN) {
        enter(R);
        int rc = kb_spawn(R->ctx, rank_fn, R, ph->nprocs, &o, &err);
        tr_add("spawn = %d", rc);
        report_lines(rc, err);
        kb_spawn_error_free(err);
        stats_line(&st, ph->nprocs);
        post_line(R);
        return;
    }
    kb_process_context *pc = NULL;
    enter(R);
    int rc = kb_start(R->ctx, rank_fn, R, ph->nprocs, &o, &pc);
    tr_add("start = %d", rc);
    if (rc != 0)
        return;
    int finished = 0, calls = 0;
    uint64_t rounds0 = 0;
    for (int j = 0; j < ph->njoins + 2; j++) {
        long timeout;
        if (j < ph->njoins)
            timeout = ph->joins[j].timeout_ms;
        else if (j == ph->njoins && !finished && !ph->free_early)
            timeout = -1; /* to the end */
        else if (j == ph->njoins + 1 && finished && ph->join_again)
            timeout = -1; /* the cached result */
        else
            continue;
        enter(R);
        rc = kb_join(pc, timeout, &err);
        tr_add("join %d t=%ld = %d", j, timeout, rc);
        report_lines(rc, err);
        kb_spawn_error_free(err);
        err = NULL;
        if (clock && calls < RP_MAX_JOIN_CALLS)
            clock->rounds[phase][calls] = rc == 0 ? (long)(st.rounds - rounds0) : -1;
        calls++;
        rounds0 = st.rounds;
        stats_line(&st, ph->nprocs);
        post_line(R);
        if (rc != 0)
            finished = 1;
        if (j < ph->njoins)
            for (int i = 0; i < ph->joins[j].ndops; i++)
                driver_op(R, &ph->joins[j].dops[i]);
    }
    tr_add("free");
    kb_process_context_free(pc);
    stats_line(&st, ph->nprocs);
    post_line(R);
}

int rr_run(const struct rp_prog *p, struct rp_clock *clock, const struct rr_hooks *hooks)
{
    struct rr R;
    memset(&R, 0, sizeof R);
    R.p = p;
    R.hooks = hooks;
    for (int i = 0; i < RP_NPOOL; i++)
        R.fail_left[i] = p->knobs[i].kind == KN_FAIL ? p->knobs[i].times : 0;
    if (clock)
        memset(clock, 0, sizeof *clock);
    tr_reset();
    kb_engine eng = {.self = &R, .wait = hook_wait, .bind = hook_bind, .abort = hook_abort};
    int rc = kb_ctx_create(&eng, &R.ctx);
    if (rc != 0) {
        tr_add("kb_ctx_create = %d", rc);
        return -1;
    }
    if (hooks && hooks->ctx_live)
        hooks->ctx_live(R.ctx);
    for (int i = 0; i < p->nphases; i++)
        run_phase(&R, i, clock);
    if (hooks && hooks->ctx_live)
        hooks->ctx_live(NULL);
    rc = kb_ctx_destroy(R.ctx);
    tr_add("destroy = %d", rc);
    return rc == 0 ? 0 : -1;
}
