/* SPDX-License-Identifier: MIT */
/*
 * The executable model: the rules of SEMANTICS.md and the documented C API
 * (include/kbthreads.h, docs/design.md, docs/scheduling.md) written as
 * plainly as possible, single-threaded, with no baton. A rank is a small
 * interpreter over its operation list that stops where the library's rank
 * would suspend and is resumed by the model's round loop.
 *
 * It shares nothing with the library but the public constants, and nothing
 * with rel_real.c but the program and the trace line formats.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbthreads.h"
#include "rel_run.h"
#include "trace.h"

#define QCAP 4096

enum { ST_NEW, ST_STARTED, ST_FINISHED };
enum { SU_NONE, SU_YIELD, SU_WAIT, SU_BARRIER };
/* Where a rank stands with the barrier: not in it; arrived, the barrier
 * closed; the barrier opened in this round (it stays: no rank leaves before
 * the drain that ends the round); a round has begun since it opened (it
 * leaves at its turn). */
enum { BW_NONE, BW_CLOSED, BW_OPENED, BW_FREE };
/* What opened a barrier. */
enum { BO_ARRIVAL, BO_FINISH };
/* How a rank's stretch on the baton ended. */
enum { GO_SUSPENDED, GO_FINISHED };

struct mcoll {
    uint64_t h;
    int sip;
    const char *meta;
};

struct mrank {
    int state;
    int cancelled;
    int unwinding;
    int recorded;
    int susp; /* where it is suspended (for the max_rounds report) */
    uint64_t susp_h;
    int pc;    /* the operation it is in */
    int stage; /* 0: not begun; else where inside the operation it stopped */
    int bwait; /* BW_*: its place in the barrier */
};

struct merr {
    int rank, code;
    char msg[64];
};

struct model {
    const struct rp_prog *p;
    const struct rp_phase *ph;
    int phase;
    const struct rp_clock *clock;
    enum rm_mutant mutant;
    /* the ctx */
    uint64_t waits[QCAP];
    int wh, wn; /* FIFO: head index, length */
    struct mcoll colls[QCAP];
    int ch, cn;
    uint64_t done[QCAP];
    int ndone;
    int fail_left[RP_NPOOL];
    int pc_exists;
    /* the program's collective state */
    int arrived[RP_NTAGS], issued[RP_NTAGS], next_sip;
    /* the run (spawn or process context) */
    int run_active; /* the library's ctx->run: counts engine waits and collectives */
    int finished;   /* a process context whose run ended */
    int result;     /* its result */
    int nprocs, cancel_mode;
    struct mrank rk[RP_MAX_RANKS];
    int nlive;
    int order[RP_MAX_RANKS];
    uint64_t rng;
    int barrier_arrived;
    int barrier_cause;  /* BO_*: what opened the last barrier */
    int barrier_passed; /* a waiter of the last opened barrier passed it */
    struct merr errors[RP_MAX_RANKS];
    int nerrors;
    int fail_code, drain_code, drain_origin;
    uint64_t drain_h;
    struct {
        int rank, where;
        uint64_t h;
    } live[RP_MAX_RANKS];
    int nlive_snap;
    /* statistics */
    uint64_t rounds, turns, handoffs, drains, ews, ncolls;
    int join_last; /* this round is a timed kb_join's last: its boundary goes to the driver */
    uint64_t rank_turns[RP_MAX_RANKS];
};

static unsigned long long hv(uint64_t h)
{
    return (unsigned long long)h;
}

static void die(const char *what)
{
    fprintf(stderr, "rel_model: %s\n", what);
    abort();
}

/* ---- the ctx: queues and the completed set -------------------------------- */

static int is_done(const struct model *M, uint64_t h)
{
    for (int i = 0; i < M->ndone; i++)
        if (M->done[i] == h)
            return 1;
    return 0;
}

static void mark_done(struct model *M, uint64_t h)
{
    if (is_done(M, h))
        return;
    if (M->ndone == QCAP)
        die("completed set full");
    M->done[M->ndone++] = h;
}

static void push_wait(struct model *M, uint64_t h)
{
    if (M->wn == QCAP)
        die("wait queue full");
    M->waits[(M->wh + M->wn++) % QCAP] = h;
}

static int pop_wait(struct model *M, uint64_t *h)
{
    if (M->wn == 0)
        return 0;
    *h = M->waits[M->wh];
    M->wh = (M->wh + 1) % QCAP;
    M->wn--;
    return 1;
}

static void push_coll(struct model *M, uint64_t h, int sip, const char *meta)
{
    if (M->cn == QCAP)
        die("collective queue full");
    struct mcoll *c = &M->colls[(M->ch + M->cn++) % QCAP];
    c->h = h;
    c->sip = sip;
    c->meta = meta;
    if (M->run_active)
        M->ncolls++;
}

static int pop_coll(struct model *M, struct mcoll *c)
{
    if (M->cn == 0)
        return 0;
    *c = M->colls[M->ch];
    M->ch = (M->ch + 1) % QCAP;
    M->cn--;
    return 1;
}

static void queues_text(const struct model *M, char *pw, size_t pwcap, char *pc, size_t pccap)
{
    size_t len = (size_t)snprintf(pw, pwcap, "[");
    for (int i = 0; i < M->wn && i < 256 && len < pwcap; i++)
        len +=
            (size_t)snprintf(pw + len, pwcap - len, "%s%llu", i ? "," : "", hv(M->waits[(M->wh + i) % QCAP]));
    if (M->wn > 256 && len < pwcap)
        len += (size_t)snprintf(pw + len, pwcap - len, ",...%d", M->wn);
    if (len < pwcap)
        snprintf(pw + len, pwcap - len, "]");
    len = (size_t)snprintf(pc, pccap, "[");
    for (int i = 0; i < M->cn && i < 256 && len < pccap; i++) {
        const struct mcoll *c = &M->colls[(M->ch + i) % QCAP];
        len +=
            (size_t)snprintf(pc + len, pccap - len, "%s%llu/%d/%s", i ? "," : "", hv(c->h), c->sip, c->meta);
    }
    if (M->cn > 256 && len < pccap)
        len += (size_t)snprintf(pc + len, pccap - len, ",...%d", M->cn);
    if (len < pccap)
        snprintf(pc + len, pccap - len, "]");
}

static void post_line(const struct model *M)
{
    char pw[4096], pc[8192], done[2048];
    queues_text(M, pw, sizeof pw, pc, sizeof pc);
    size_t len = (size_t)snprintf(done, sizeof done, "[");
    int first = 1;
    for (int i = 0; i < RP_NPOOL; i++)
        if (is_done(M, rp_pool_handle(i))) {
            len += (size_t)snprintf(done + len, sizeof done - len, "%s%llu", first ? "" : ",",
                                    hv(rp_pool_handle(i)));
            first = 0;
        }
    for (int ph = 0; ph < M->p->nphases; ph++)
        for (int t = 0; t < RP_NTAGS; t++)
            if (is_done(M, rp_coll_handle(ph, t))) {
                len += (size_t)snprintf(done + len, sizeof done - len, "%s%llu", first ? "" : ",",
                                        hv(rp_coll_handle(ph, t)));
                first = 0;
            }
    snprintf(done + len, sizeof done - len, "]");
    tr_add("post pw=%s pc=%s done=%s", pw, pc, done);
}

static void stats_line(const struct model *M)
{
    char rt[256];
    size_t len = 0;
    rt[0] = '\0';
    for (int i = 0; i < M->nprocs && len < sizeof rt; i++)
        len += (size_t)snprintf(rt + len, sizeof rt - len, "%s%llu", i ? "," : "",
                                (unsigned long long)M->rank_turns[i]);
    tr_add(RT_STATS, (unsigned long long)M->rounds, (unsigned long long)M->turns,
           (unsigned long long)M->handoffs, (unsigned long long)M->drains, (unsigned long long)M->ews,
           (unsigned long long)M->ncolls, rt);
}

/* ---- the engine ---------------------------------------------------------------- */

static int driver_wait(struct model *M, uint64_t h, const char *meta, int origin);

/* The engine's wait hook: the program's knobs. */
static int engine_wait(struct model *M, uint64_t h, const char *meta, int origin)
{
    if (M->run_active)
        M->ews++;
    tr_add("ew %llu o=%d m=%s", hv(h), origin, meta ? meta : "-");
    int tag = rp_coll_tag(h);
    if (tag >= 0 && M->p->coll_fail[tag]) {
        tr_add("ew fail %d", M->p->coll_fail[tag]);
        return M->p->coll_fail[tag];
    }
    int i = rp_pool_index(h);
    if (i < 0)
        return 0;
    const struct rp_knob *k = &M->p->knobs[i];
    uint64_t t = rp_pool_handle(k->target);
    int rc;
    switch (k->kind) {
    case KN_FAIL:
        if (M->fail_left[i] == 0)
            return 0;
        if (M->fail_left[i] > 0)
            M->fail_left[i]--;
        tr_add("ew fail %d", k->code);
        return k->code;
    case KN_ENQ:
        push_wait(M, t);
        tr_add("ew enq %llu = 0", hv(t));
        return 0;
    case KN_SUBMIT:
        push_coll(M, t, 90 + k->target, "k");
        tr_add("ew submit %llu = 0", hv(t));
        return 0;
    case KN_DONE:
        mark_done(M, t);
        tr_add("ew done %llu = 0", hv(t));
        return 0;
    case KN_DWAIT:
        rc = driver_wait(M, t, "n", KB_WAIT_DRIVER);
        tr_add("ew dwait %llu = %d", hv(t), rc);
        return rc;
    default:
        return 0;
    }
}

/* A driver-side wait: completed is 0 at once; else the engine's wait, and
 * the handle is completed only if it answered 0. */
static int driver_wait(struct model *M, uint64_t h, const char *meta, int origin)
{
    if (is_done(M, h))
        return 0;
    int rc = engine_wait(M, h, meta, origin);
    if (rc == 0)
        mark_done(M, h);
    return rc;
}

static void abort_hook(struct model *M)
{
    char pw[4096], pc[8192];
    queues_text(M, pw, sizeof pw, pc, sizeof pc);
    tr_add("abort pw=%s pc=%s", pw, pc);
    if (M->p->abort_done >= 0) {
        uint64_t h = rp_pool_handle(M->p->abort_done);
        mark_done(M, h);
        tr_add("abort done %llu = 0", hv(h));
    }
}

/* ---- the drain ---------------------------------------------------------------- */

/* Rule 3. 0, or the failing engine code (drain_h/drain_origin set). */
static int drain(struct model *M)
{
    while (M->wn > 0 || M->cn > 0) {
        uint64_t h;
        struct mcoll c;
        if (M->mutant == RM_DRAIN_COLL_FIRST) {
            while (pop_coll(M, &c)) {
                int rc = driver_wait(M, c.h, c.meta, KB_WAIT_COLLECTIVE);
                if (rc != 0) {
                    M->drain_h = c.h;
                    M->drain_origin = KB_WAIT_COLLECTIVE;
                    return rc;
                }
            }
        }
        /* (a) pending worker waits, FIFO; a completed handle is skipped. */
        while (pop_wait(M, &h)) {
            if (is_done(M, h))
                continue;
            int rc = engine_wait(M, h, NULL, KB_WAIT_QUEUED);
            if (rc != 0) {
                M->drain_h = h;
                M->drain_origin = KB_WAIT_QUEUED;
                return rc;
            }
            mark_done(M, h);
        }
        /* (b) pending collectives, FIFO, each through a driver-side wait. */
        while (pop_coll(M, &c)) {
            int rc = driver_wait(M, c.h, c.meta, KB_WAIT_COLLECTIVE);
            if (rc != 0) {
                M->drain_h = c.h;
                M->drain_origin = KB_WAIT_COLLECTIVE;
                return rc;
            }
        }
    }
    return 0;
}

/* ---- failures ------------------------------------------------------------------ */

/* The first failure of a rank is recorded, when it happens. */
static void record(struct model *M, int r, int code, const char *msg)
{
    struct mrank *k = &M->rk[r];
    if (k->recorded)
        return;
    k->recorded = 1;
    struct merr *e = &M->errors[M->nerrors++];
    e->rank = r;
    e->code = code;
    snprintf(e->msg, sizeof e->msg, "%s", msg);
}

static int model_fail(struct model *M, int r, int code, const char *msg)
{
    if (code == 0)
        return KB_EINVAL;
    record(M, r, code, msg);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static const char *where_text(int where)
{
    switch (where) {
    case KB_AT_START:
        return "not started";
    case KB_AT_WAIT:
        return "waiting on handle";
    case KB_AT_BARRIER:
        return "in kb_barrier";
    default:
        return "in kb_yield";
    }
}

/* The report of a failed run, as the documented formats spell it. */
static void report_lines(struct model *M)
{
    char msg[2048];
    size_t len = 0;
    if (M->fail_code == KB_ESPAWN) {
        int ranks[RP_MAX_RANKS];
        for (int i = 0; i < M->nerrors; i++)
            ranks[i] = M->errors[i].rank;
        qsort(ranks, (size_t)M->nerrors, sizeof ranks[0], cmp_int);
        len += (size_t)snprintf(msg + len, sizeof msg - len, "spawn failed on ranks [");
        for (int i = 0; i < M->nerrors; i++)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%d", i ? ", " : "", ranks[i]);
        len += (size_t)snprintf(msg + len, sizeof msg - len, "]");
        if (M->drain_code)
            len += (size_t)snprintf(
                msg + len, sizeof msg - len, ": drain failed: engine wait for handle %llu (%s) returned %d",
                hv(M->drain_h),
                M->drain_origin == KB_WAIT_COLLECTIVE ? "pending collective" : "pending worker wait",
                M->drain_code);
    } else {
        len += (size_t)snprintf(
            msg + len, sizeof msg - len,
            "spawn stopped after %llu rounds (max_rounds); live ranks:", (unsigned long long)M->rounds);
        for (int i = 0; i < M->nlive_snap; i++) {
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s rank %d %s", i ? "," : "",
                                    M->live[i].rank, where_text(M->live[i].where));
            if (M->live[i].where == KB_AT_WAIT)
                len += (size_t)snprintf(msg + len, sizeof msg - len, " %llu", hv(M->live[i].h));
        }
        if (M->nlive_snap == 0)
            len += (size_t)snprintf(msg + len, sizeof msg - len, " none");
    }
    if (M->nerrors > 0)
        snprintf(msg + len, sizeof msg - len, "%srank %d raised code %d: %s",
                 M->drain_code || M->fail_code != KB_ESPAWN ? "; " : ": ", M->errors[0].rank,
                 M->errors[0].code, M->errors[0].msg);
    tr_add(RT_REPORT, M->fail_code, (size_t)M->nerrors, M->drain_code, hv(M->drain_code ? M->drain_h : 0),
           (size_t)M->nlive_snap);
    for (int i = 0; i < M->nerrors; i++)
        tr_add(RT_ENTRY, M->errors[i].rank, M->errors[i].code, M->errors[i].msg);
    for (int i = 0; i < M->nlive_snap; i++)
        tr_add(RT_LIVE, M->live[i].rank, M->live[i].where, hv(M->live[i].h));
    tr_add(RT_MSG, msg);
}

/* ---- ranks ------------------------------------------------------------------------ */

/* The baton goes to rank r (or the driver, -1). */
static void handoff(struct model *M, int to)
{
    M->handoffs++;
    if (to >= 0) {
        M->turns++;
        M->rank_turns[to]++;
    }
}

/* What the barriers did, for rm_barrier_tally. */
static struct rm_barrier_tally tally;

/* The barrier opens when every not-finished rank has arrived: each of them
 * is now in an opened barrier (cause: BO_*). */
static void barrier_check(struct model *M, int cause)
{
    if (M->barrier_arrived == 0 || M->barrier_arrived < M->nlive)
        return;
    M->barrier_arrived = 0;
    M->barrier_cause = cause;
    M->barrier_passed = 0;
    for (int r = 0; r < M->nprocs; r++)
        if (M->rk[r].bwait == BW_CLOSED)
            M->rk[r].bwait = BW_OPENED;
}

/* A new round begins: the ranks in a barrier that opened before it may leave. */
static void barrier_new_round(struct model *M)
{
    for (int r = 0; r < M->nprocs; r++)
        if (M->rk[r].bwait == BW_OPENED)
            M->rk[r].bwait = BW_FREE;
}

void rm_barrier_tally(struct rm_barrier_tally *out)
{
    *out = tally;
}

/* A cancelled (RETURN mode) or unwinding rank never suspends. */
static int cannot_suspend(const struct mrank *k)
{
    return k->cancelled || k->unwinding;
}

/* The rank's function has ended. */
static int finish(struct model *M, int r)
{
    struct mrank *k = &M->rk[r];
    k->state = ST_FINISHED;
    M->nlive--;
    barrier_check(M, BO_FINISH);
    return GO_FINISHED;
}

static void cleanup_action(struct model *M, int r)
{
    const struct rp_rank *pr = &M->ph->ranks[r];
    uint64_t h = rp_pool_handle(pr->cleanup_h);
    char msg[64];
    switch (pr->cleanup) {
    case CL_FAIL:
        snprintf(msg, sizeof msg, "r%d cleanup", r);
        tr_add("cleanup %d fail = %d", r, model_fail(M, r, pr->cancel_code, msg));
        break;
    case CL_SUSPEND: /* unwinding: every suspension answers at once */
        tr_add("cleanup %d suspend = %d %d %d", r, KB_ECANCELED, KB_ECANCELED, KB_ECANCELED);
        break;
    case CL_ENQ:
        push_wait(M, h);
        tr_add("cleanup %d enq %llu = 0", r, hv(h));
        break;
    case CL_DONE:
        mark_done(M, h);
        tr_add("cleanup %d done %llu = 0", r, hv(h));
        break;
    default:
        break;
    }
}

/* The rank's thread unwinds: its cleanup handler runs, then it has ended. */
static int unwind(struct model *M, int r)
{
    struct mrank *k = &M->rk[r];
    k->unwinding = 1;
    tr_add("cleanup %d c=%d", r, k->cancelled);
    cleanup_action(M, r);
    return finish(M, r);
}

/* The rank's function returned ret. */
static int returned(struct model *M, int r, int ret)
{
    struct mrank *k = &M->rk[r];
    tr_add("end %d = %d", r, ret);
    if (ret != 0 && !(ret == KB_ECANCELED && k->cancelled)) {
        char msg[64];
        snprintf(msg, sizeof msg, "rank function returned %d", ret);
        record(M, r, ret, msg);
    }
    return finish(M, r);
}

/* Operation results inside the interpreter. */
enum { OP_DONE, OP_SUSPEND, OP_RAISE, OP_RETURN, OP_EXIT };

/* Suspend rank r at a suspension point of kind susp; stage is where the
 * operation goes on when the rank is resumed. */
static int suspend(struct mrank *k, int susp, uint64_t h, int stage)
{
    k->susp = susp;
    k->susp_h = h;
    k->stage = stage;
    return OP_SUSPEND;
}

/* The wait of rank r on h (stage s: begin; s + 1: resumed). */
static int op_wait(struct model *M, struct mrank *k, uint64_t h, int s, int *rc)
{
    if (k->stage == s) {
        if (cannot_suspend(k)) {
            *rc = KB_ECANCELED;
            return OP_DONE;
        }
        if (is_done(M, h) && M->mutant != RM_WAIT_FAST_SWITCHES) {
            *rc = 0; /* rule 4: no switch */
            return OP_DONE;
        }
        if (!is_done(M, h))
            push_wait(M, h);
        return suspend(k, SU_WAIT, h, s + 1);
    }
    /* resumed */
    if (k->cancelled) {
        *rc = KB_ECANCELED;
        return OP_DONE;
    }
    if (!is_done(M, h))
        return suspend(k, SU_WAIT, h, s + 1);
    *rc = 0;
    return OP_DONE;
}

/* A yield (stage s: begin; s + 1: resumed). */
static int op_yield(struct mrank *k, int s, int *rc)
{
    if (k->stage == s) {
        if (cannot_suspend(k)) {
            *rc = KB_ECANCELED;
            return OP_DONE;
        }
        return suspend(k, SU_YIELD, 0, s + 1);
    }
    *rc = k->cancelled ? KB_ECANCELED : 0;
    return OP_DONE;
}

static int op_barrier(struct model *M, struct mrank *k, int *rc)
{
    if (k->stage == 0) {
        if (cannot_suspend(k)) {
            *rc = KB_ECANCELED;
            return OP_DONE;
        }
        k->bwait = BW_CLOSED;
        M->barrier_arrived++;
        barrier_check(M, BO_ARRIVAL);
        if (M->mutant == RM_BARRIER_NO_YIELD && k->bwait == BW_OPENED) {
            k->bwait = BW_NONE;
            *rc = 0;
            return OP_DONE;
        }
        return suspend(k, SU_BARRIER, 0, 1);
    }
    if (k->cancelled) {
        k->bwait = BW_NONE;
        *rc = KB_ECANCELED;
        return OP_DONE;
    }
    int seeded = M->ph->seeded != 0;
    if (k->bwait == BW_OPENED && M->mutant != RM_BARRIER_SAME_ROUND) {
        tally.held[seeded]++; /* its turn comes after the opening, in the same round */
        return suspend(k, SU_BARRIER, 0, 1);
    }
    if (k->bwait == BW_CLOSED)
        return suspend(k, SU_BARRIER, 0, 1);
    if (!M->barrier_passed) {
        M->barrier_passed = 1;
        if (M->barrier_cause == BO_ARRIVAL)
            tally.opened_by_arrival[seeded]++;
        else
            tally.opened_by_finish[seeded]++;
    }
    k->bwait = BW_NONE;
    *rc = 0;
    return OP_DONE;
}

/* The all-reduce (see rel_real.c): stages 0 arrive, 1-2 wait for the issue,
 * 3-4 kb_wait on the handle, 5-6 poll it. */
static int op_coll(struct model *M, int r, int i, const struct rp_op *op, int *rc)
{
    struct mrank *k = &M->rk[r];
    int tag = op->tag;
    uint64_t ch = rp_coll_handle(M->phase, tag);
    for (;;) {
        switch (k->stage) {
        case 0:
            M->arrived[tag]++;
            tr_add("%d.%d arrive %d/%d", r, i, M->arrived[tag], op->code);
            if (M->arrived[tag] == op->code) {
                int sip = M->next_sip++;
                push_coll(M, ch, sip, rp_tag_meta[tag]);
                tr_add("%d.%d issue %llu sip=%d = 0", r, i, hv(ch), sip);
                M->issued[tag] = 1;
                k->stage = op->poll ? 5 : 3;
            } else {
                k->stage = 1;
            }
            break;
        case 1: /* yield until issued */
            if (M->issued[tag]) {
                k->stage = op->poll ? 5 : 3;
                break;
            }
            if (op_yield(k, 1, rc) == OP_SUSPEND)
                return OP_SUSPEND;
            return OP_DONE; /* KB_ECANCELED at once */
        case 2:
            op_yield(k, 1, rc);
            if (*rc != 0)
                return OP_DONE;
            k->stage = 1;
            break;
        case 3:
        case 4:
            return op_wait(M, k, ch, 3, rc);
        case 5: /* poll */
            if (is_done(M, ch)) {
                *rc = 0;
                return OP_DONE;
            }
            if (op_yield(k, 5, rc) == OP_SUSPEND)
                return OP_SUSPEND;
            return OP_DONE;
        case 6:
            op_yield(k, 5, rc);
            if (*rc != 0)
                return OP_DONE;
            k->stage = 5;
            break;
        default:
            die("bad collective stage");
        }
    }
}

/* Run operation i of rank r from its current stage. */
static int run_op(struct model *M, int r, int i, const struct rp_op *op, int *rc)
{
    struct mrank *k = &M->rk[r];
    uint64_t h = rp_pool_handle(op->h);
    char msg[64];
    *rc = 0;
    switch (op->kind) {
    case RP_YIELD:
        return op_yield(k, 0, rc);
    case RP_WAIT:
        return op_wait(M, k, h, 0, rc);
    case RP_ENQ:
        push_wait(M, h);
        return OP_DONE;
    case RP_DONE:
        mark_done(M, h);
        return OP_DONE;
    case RP_SUBMIT:
        push_coll(M, h, M->next_sip++, "s");
        return OP_DONE;
    case RP_ISDONE:
        *rc = is_done(M, h);
        return OP_DONE;
    case RP_COLL:
        return op_coll(M, r, i, op, rc);
    case RP_BARRIER:
        return op_barrier(M, k, rc);
    case RP_FAIL:
        snprintf(msg, sizeof msg, "r%d.%d fail", r, i);
        *rc = model_fail(M, r, op->code, msg);
        return OP_DONE;
    case RP_RAISE:
        return OP_RAISE;
    case RP_RETURN:
        return OP_RETURN;
    case RP_BADWAIT:
        *rc = KB_EINVAL; /* the reserved handle 0 */
        return OP_DONE;
    case RP_EXIT:
        return OP_EXIT;
    default:
        return OP_DONE;
    }
}

/* Rank r holds the baton: run it until it suspends or its function ends. */
static int go(struct model *M, int r)
{
    struct mrank *k = &M->rk[r];
    const struct rp_rank *pr = &M->ph->ranks[r];
    if (k->state == ST_NEW) {
        k->state = ST_STARTED; /* rule 1: lazy start, at its first turn */
        k->pc = 0;
        k->stage = 0;
        tr_add("start %d", r);
    } else if (k->cancelled && M->cancel_mode == KB_CANCEL_UNWIND) {
        return unwind(M, r); /* resumed to be cancelled: it unwinds from its suspension point */
    }
    k->susp = SU_NONE;
    for (; k->pc < pr->nops; k->pc++, k->stage = 0) {
        const struct rp_op *op = &pr->ops[k->pc];
        char buf[64], msg[64];
        if (k->stage == 0)
            tr_add("%d.%d %s", r, k->pc, rp_op_text(op, buf, sizeof buf));
        int rc;
        switch (run_op(M, r, k->pc, op, &rc)) {
        case OP_SUSPEND:
            return GO_SUSPENDED;
        case OP_RAISE:
            snprintf(msg, sizeof msg, "r%d.%d raise", r, k->pc);
            record(M, r, op->code != 0 ? op->code : KB_EINVAL, msg);
            return unwind(M, r);
        case OP_RETURN:
            return returned(M, r, op->code);
        case OP_EXIT: {
            /* A rank thread that calls pthread_exit fails with KB_EEXITED,
             * recorded when the unwind reaches the library: after its own
             * cleanup handler, so a kb_fail there is its first failure
             * (design.md). */
            struct mrank *mk = &M->rk[r];
            mk->unwinding = 1;
            tr_add("cleanup %d c=%d", r, mk->cancelled);
            cleanup_action(M, r);
            record(M, r, KB_EEXITED, "rank thread exited without returning (pthread_exit)");
            return finish(M, r);
        }
        default:
            break;
        }
        tr_add("%d.%d = %d", r, k->pc, rc);
        if (rc != KB_ECANCELED)
            continue;
        switch (pr->on_cancel) {
        case OC_RETURN:
            return returned(M, r, KB_ECANCELED);
        case OC_ZERO:
            return returned(M, r, 0);
        case OC_CODE:
            return returned(M, r, pr->cancel_code);
        case OC_FAIL:
            snprintf(msg, sizeof msg, "r%d cancelled", r);
            tr_add("%d fail = %d", r, model_fail(M, r, pr->cancel_code, msg));
            return returned(M, r, KB_ECANCELED);
        default:
            break;
        }
    }
    return returned(M, r, pr->end_code);
}

/* ---- the driver: rounds, failure, cancellation -------------------------------------- */

static void cancel_one(struct model *M, int r)
{
    struct mrank *k = &M->rk[r];
    k->cancelled = 1;
    if (k->state == ST_NEW) {
        k->state = ST_FINISHED; /* never runs at all */
        M->nlive--;
        return;
    }
    handoff(M, r);
    if (go(M, r) != GO_FINISHED)
        die("a cancelled rank suspended");
    handoff(M, -1);
}

/* Rule 5: cancel every not-finished rank in rank order, then the engine's
 * abort (queues still full), then clear both queues. */
static void cancel_all(struct model *M)
{
    if (M->mutant == RM_CANCEL_REVERSE) {
        for (int r = M->nprocs - 1; r >= 0; r--)
            if (M->rk[r].state != ST_FINISHED)
                cancel_one(M, r);
    } else {
        for (int r = 0; r < M->nprocs; r++)
            if (M->rk[r].state != ST_FINISHED)
                cancel_one(M, r);
    }
    if (M->mutant == RM_ABORT_AFTER_CLEAR) {
        M->wn = M->cn = 0;
        abort_hook(M);
    } else {
        abort_hook(M);
        M->wn = M->cn = 0;
    }
}

static int stop(struct model *M, int code)
{
    if (code != KB_ESPAWN) {
        for (int r = 0; r < M->nprocs; r++) {
            const struct mrank *k = &M->rk[r];
            if (k->state == ST_FINISHED)
                continue;
            int where = k->state == ST_NEW      ? KB_AT_START
                        : k->susp == SU_WAIT    ? KB_AT_WAIT
                        : k->susp == SU_BARRIER ? KB_AT_BARRIER
                                                : KB_AT_YIELD;
            M->live[M->nlive_snap].rank = r;
            M->live[M->nlive_snap].where = where;
            M->live[M->nlive_snap].h = where == KB_AT_WAIT ? k->susp_h : 0;
            M->nlive_snap++;
        }
    }
    M->fail_code = code;
    cancel_all(M);
    return code;
}

/* splitmix64, the generator documented for KB_SCHED_SEEDED. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One round and its drain (rule 2). 1: every rank has finished; 0: ranks
 * remain; else the run stopped with that code. */
static int round_(struct model *M)
{
    if (M->nlive == 0)
        return 1;
    if (M->ph->max_rounds && M->rounds >= M->ph->max_rounds)
        return stop(M, KB_ETIMEDOUT);
    int n = 0;
    for (int r = 0; r < M->nprocs; r++)
        if (M->rk[r].state != ST_FINISHED)
            M->order[n++] = r;
    if (M->ph->seeded) {
        for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
            int j = (int)(splitmix64(&M->rng) % (uint64_t)(i + 1));
            int t = M->order[i];
            M->order[i] = M->order[j];
            M->order[j] = t;
        }
    }
    M->rounds++;
    barrier_new_round(M);
    for (int p = 0; p < n; p++) {
        int r = M->order[p];
        handoff(M, r);
        if (go(M, r) == GO_FINISHED && M->rk[r].recorded) {
            /* rule 5: the rest of the round and the drain are skipped */
            handoff(M, -1);
            return stop(M, KB_ESPAWN);
        }
    }
    /* The last rank of the round hands the baton to the driver only when
     * the driver has work: a drain with something to do, the end of the
     * spawn, a round limit reached, or a timed kb_join whose deadline
     * passed (the call's last round); else it runs the empty drain and
     * starts the next round itself (design.md). */
    if (M->join_last || M->nlive == 0 || M->wn > 0 || M->cn > 0 ||
        (M->ph->max_rounds && M->rounds >= M->ph->max_rounds))
        handoff(M, -1);
    if (M->mutant == RM_NO_FINAL_DRAIN && M->nlive == 0)
        return 1;
    M->drains++;
    int rc = drain(M);
    if (rc != 0) {
        M->drain_code = rc; /* rule 7 */
        return stop(M, KB_ESPAWN);
    }
    return M->nlive == 0 ? 1 : 0;
}

static void new_run(struct model *M, const struct rp_phase *ph)
{
    M->nprocs = ph->nprocs;
    M->cancel_mode = ph->cancel_mode;
    memset(M->rk, 0, sizeof M->rk);
    M->nlive = ph->nprocs;
    M->rng = ph->seed;
    M->barrier_arrived = 0;
    M->barrier_passed = 1; /* no barrier opened yet */
    M->nerrors = 0;
    M->fail_code = M->drain_code = M->drain_origin = 0;
    M->drain_h = 0;
    M->nlive_snap = 0;
    M->rounds = M->turns = M->handoffs = M->drains = M->ews = M->ncolls = 0;
    memset(M->rank_turns, 0, sizeof M->rank_turns);
    M->finished = 0;
    M->result = 0;
    /* rule 1: every rank exists and is bound before any runs */
    for (int r = 0; r < ph->nprocs; r++)
        tr_add("bind %d", r);
    M->run_active = 1;
}

static void driver_op(struct model *M, const struct rp_dop *d)
{
    uint64_t h = rp_pool_handle(d->h);
    int rc = 0;
    switch (d->kind) {
    case RD_ENQ:
        push_wait(M, h);
        break;
    case RD_DONE:
        mark_done(M, h);
        break;
    case RD_SUBMIT:
        push_coll(M, h, 80 + d->h, "d");
        break;
    case RD_WAIT:
        rc = driver_wait(M, h, "w", KB_WAIT_DRIVER);
        break;
    case RD_ISDONE:
        rc = is_done(M, h);
        break;
    default:
        rc = M->pc_exists ? KB_EBUSY : 0;
        break;
    }
    tr_add("d %s %llu = %d", rp_dop_name(d->kind), hv(h), rc);
}

static void run_phase(struct model *M, int phase)
{
    const struct rp_phase *ph = &M->p->phases[phase];
    M->ph = ph;
    M->phase = phase;
    memset(M->arrived, 0, sizeof M->arrived);
    memset(M->issued, 0, sizeof M->issued);
    M->next_sip = 0;
    tr_add(RT_PHASE, phase, ph->kind == RP_START ? "start" : "spawn", ph->nprocs, ph->cancel_mode, ph->seeded,
           ph->max_rounds);
    for (int i = 0; i < ph->npre; i++)
        driver_op(M, &ph->pre[i]);
    new_run(M, ph);
    if (ph->kind == RP_SPAWN) {
        int rc;
        M->join_last = 0;
        while ((rc = round_(M)) == 0)
            ;
        rc = rc == 1 ? 0 : rc;
        M->run_active = 0;
        tr_add("spawn = %d", rc);
        if (rc != 0)
            report_lines(M);
        stats_line(M);
        post_line(M);
        return;
    }
    tr_add("start = 0");
    M->pc_exists = 1;
    int calls = 0;
    for (int j = 0; j < ph->njoins + 2; j++) {
        long timeout;
        if (j < ph->njoins)
            timeout = ph->joins[j].timeout_ms;
        else if (j == ph->njoins && !M->finished && !ph->free_early)
            timeout = -1;
        else if (j == ph->njoins + 1 && M->finished && ph->join_again)
            timeout = -1;
        else
            continue;
        int rc, cached = M->finished;
        if (cached) {
            rc = M->result; /* the same result again, no report */
        } else {
            /* at least one round per call; then until the timeout (which
             * the library's clock decides for positive timeouts) */
            long budget = timeout < 0                             ? -1
                          : timeout == 0                          ? 1
                          : M->clock && calls < RP_MAX_JOIN_CALLS ? M->clock->rounds[phase][calls]
                                                                  : -1;
            long ran = 0;
            for (;;) {
                M->join_last = budget >= 0 && ran + 1 >= budget;
                rc = round_(M);
                if (rc != 0)
                    break;
                if (++ran >= budget && budget >= 0)
                    break;
            }
            if (rc != 0) {
                M->finished = 1;
                M->result = rc;
                M->run_active = 0;
            }
        }
        calls++;
        tr_add("join %d t=%ld = %d", j, timeout, rc);
        if (rc != 0 && rc != 1) {
            if (cached)
                tr_add("report none");
            else
                report_lines(M);
        }
        stats_line(M);
        post_line(M);
        if (j < ph->njoins)
            for (int i = 0; i < ph->joins[j].ndops; i++)
                driver_op(M, &ph->joins[j].dops[i]);
    }
    tr_add("free");
    if (!M->finished && M->nlive > 0)
        cancel_all(M);
    M->run_active = 0;
    M->pc_exists = 0;
    stats_line(M);
    post_line(M);
}

void rm_run(const struct rp_prog *p, const struct rp_clock *clock, enum rm_mutant mutant)
{
    struct model *M = calloc(1, sizeof *M);
    if (!M)
        die("out of memory");
    M->p = p;
    M->clock = clock;
    M->mutant = mutant;
    memset(&tally, 0, sizeof tally);
    for (int i = 0; i < RP_NPOOL; i++)
        M->fail_left[i] = p->knobs[i].kind == KN_FAIL ? p->knobs[i].times : 0;
    tr_reset();
    for (int i = 0; i < p->nphases; i++)
        run_phase(M, i);
    tr_add("destroy = 0");
    free(M);
}
