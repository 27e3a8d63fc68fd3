/* SPDX-License-Identifier: MIT */
/* The program generator of the differential tests (see rel_prog.h). */
#include "rel_prog.h"

#include <string.h>

#include "kbthreads.h"

const char *const rp_tag_meta[RP_NTAGS] = {"c0", "c1", "c2"};

void rp_src_seed(struct rp_src *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->state = seed;
}

void rp_src_bytes(struct rp_src *s, const uint8_t *bytes, size_t len)
{
    memset(s, 0, sizeof *s);
    s->bytes = bytes;
    s->len = len;
    s->from_bytes = 1;
    /* once the bytes run out, a stream seeded from them goes on: a short
     * input still makes a full-size program */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ bytes[i]) * 0x100000001b3ull;
    s->state = h;
}

static uint64_t src_next64(struct rp_src *s)
{
    uint64_t z = (s->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint32_t rp_pick(struct rp_src *s, uint32_t bound)
{
    if (bound <= 1)
        return 0;
    if (!s->from_bytes || s->pos >= s->len)
        return (uint32_t)(src_next64(s) % bound);
    uint32_t v = 0;
    int nbytes = bound > 256 ? 4 : 1;
    for (int i = 0; i < nbytes; i++)
        v = (v << 8) | (s->pos < s->len ? s->bytes[s->pos++] : 0);
    return v % bound;
}

static uint64_t pick64(struct rp_src *s)
{
    uint64_t hi = rp_pick(s, 1u << 16), lo = rp_pick(s, 1u << 16);
    return (hi << 16) | lo;
}

/* pct percent of the time. */
static int chance(struct rp_src *s, uint32_t pct)
{
    return rp_pick(s, 100) < pct;
}

static struct rp_op plain_op(struct rp_src *s)
{
    /* Weights of the operations that neither fail nor synchronise. */
    static const uint8_t kinds[] = {RP_YIELD, RP_YIELD,  RP_YIELD,  RP_YIELD,  RP_WAIT, RP_WAIT,
                                    RP_WAIT,  RP_WAIT,   RP_WAIT,   RP_ENQ,    RP_ENQ,  RP_DONE,
                                    RP_DONE,  RP_SUBMIT, RP_ISDONE, RP_BADWAIT};
    struct rp_op op;
    memset(&op, 0, sizeof op);
    op.kind = kinds[rp_pick(s, sizeof kinds)];
    op.h = (uint8_t)rp_pick(s, RP_NPOOL);
    return op;
}

static struct rp_op sync_op(struct rp_src *s, int nprocs, int tag)
{
    struct rp_op op;
    memset(&op, 0, sizeof op);
    if (tag < 0 || chance(s, 40)) {
        op.kind = RP_BARRIER;
        return op;
    }
    op.kind = RP_COLL;
    op.tag = (uint8_t)tag;
    op.code = chance(s, 85) ? nprocs : 1 + (int)rp_pick(s, (uint32_t)nprocs);
    return op;
}

static struct rp_op failing_op(struct rp_src *s, int rank)
{
    struct rp_op op;
    memset(&op, 0, sizeof op);
    uint32_t c = rp_pick(s, 11);
    if (c == 10 && !s->no_exit) {
        op.kind = RP_EXIT;
        return op;
    }
    switch (c % 5) {
    case 0:
    case 1:
        op.kind = RP_RAISE;
        op.code = 5 + rank;
        break;
    case 2:
        op.kind = RP_RETURN;
        op.code = chance(s, 25) ? KB_ECANCELED : 3 + rank;
        break;
    case 3:
        op.kind = RP_RETURN;
        op.code = 0; /* an early, clean return */
        break;
    default:
        op.kind = RP_FAIL;
        op.code = 11 + rank;
        break;
    }
    return op;
}

static void insert_op(struct rp_rank *r, int at, struct rp_op op)
{
    if (r->nops >= RP_MAX_OPS)
        return;
    if (at > r->nops)
        at = r->nops;
    memmove(&r->ops[at + 1], &r->ops[at], (size_t)(r->nops - at) * sizeof r->ops[0]);
    r->ops[at] = op;
    r->nops++;
}

/* The rank yields where the others wait at a barrier. */
static void skip_barriers(struct rp_rank *r)
{
    for (int i = 0; i < r->nops; i++)
        if (r->ops[i].kind == RP_BARRIER)
            r->ops[i].kind = RP_YIELD;
}

static struct rp_dop gen_dop(struct rp_src *s, int allow_busy)
{
    struct rp_dop d;
    d.kind = (uint8_t)rp_pick(s, allow_busy ? RD_N : RD_BUSY);
    d.h = (uint8_t)rp_pick(s, RP_NPOOL);
    return d;
}

static void gen_phase(struct rp_phase *ph, struct rp_src *s)
{
    ph->kind = chance(s, 35) ? RP_START : RP_SPAWN;
    ph->nprocs = chance(s, 3) ? 0 : 1 + (int)rp_pick(s, RP_MAX_RANKS);
    ph->cancel_mode = (int)rp_pick(s, 2) ? KB_CANCEL_RETURN : KB_CANCEL_UNWIND;
    ph->seeded = chance(s, 20);
    ph->seed = ph->seeded ? pick64(s) : 0;
    ph->max_rounds = chance(s, 25) ? 1 + rp_pick(s, 6) : 48;
    ph->npre = (int)rp_pick(s, RP_MAX_DOPS + 1);
    for (int i = 0; i < ph->npre; i++)
        ph->pre[i] = gen_dop(s, 0);

    /* Synchronisation points every rank passes in the same order (most
     * phases), or scattered at random. */
    int aligned = chance(s, 65);
    int nsync = (int)rp_pick(s, 4);
    struct rp_op sync[3];
    for (int i = 0; i < nsync && i < 3; i++)
        sync[i] = sync_op(s, ph->nprocs > 0 ? ph->nprocs : 1, i);
    for (int r = 0; r < ph->nprocs; r++) {
        struct rp_rank *rk = &ph->ranks[r];
        int left = (int)rp_pick(s, 8);
        for (int i = 0; i <= nsync && i <= 3; i++) {
            int k = aligned && i < nsync ? (int)rp_pick(s, (uint32_t)left + 1) : left;
            for (int j = 0; j < k; j++)
                rk->ops[rk->nops++] = plain_op(s);
            left -= k;
            if (i == nsync)
                break;
            struct rp_op op = aligned ? sync[i] : sync_op(s, ph->nprocs, (int)rp_pick(s, RP_NTAGS));
            if (op.kind == RP_COLL)
                op.poll = (uint8_t)rp_pick(s, 2);
            if (aligned)
                rk->ops[rk->nops++] = op;
            else
                insert_op(rk, (int)rp_pick(s, (uint32_t)rk->nops + 1), op);
        }
        rk->end_code = chance(s, 5) ? 7 : 0;
        rk->on_cancel = (uint8_t)rp_pick(s, OC_N);
        rk->cleanup = (uint8_t)rp_pick(s, CL_N);
        rk->cleanup_h = (uint8_t)rp_pick(s, RP_NPOOL);
        rk->cancel_code = 21 + r;
    }
    /* In some phases with aligned barriers one rank leaves them out: the
     * others' barrier then opens when that rank finishes. */
    if (aligned && ph->nprocs > 1 && chance(s, 40))
        skip_barriers(&ph->ranks[rp_pick(s, (uint32_t)ph->nprocs)]);
    /* Failures: in about half of the phases, one or two ranks fail. */
    if (ph->nprocs > 0 && chance(s, 50)) {
        int nfail = chance(s, 25) ? 2 : 1;
        for (int k = 0; k < nfail; k++) {
            int r = (int)rp_pick(s, (uint32_t)ph->nprocs);
            struct rp_rank *rk = &ph->ranks[r];
            struct rp_op op = failing_op(s, r);
            insert_op(rk, (int)rp_pick(s, (uint32_t)rk->nops + 1), op);
            /* During a rank's own pthread_exit its cleanup handlers run
             * before the unwind reaches the library, which therefore cannot
             * answer their suspension points with KB_ECANCELED: such
             * handlers must not suspend (docs/design.md). */
            if (op.kind == RP_EXIT && rk->cleanup == CL_SUSPEND)
                rk->cleanup = CL_ENQ;
        }
    }
    if (ph->kind == RP_START) {
        ph->njoins = 1 + (int)rp_pick(s, RP_MAX_JOINS);
        for (int j = 0; j < ph->njoins; j++) {
            struct rp_join *jn = &ph->joins[j];
            uint32_t t = rp_pick(s, 10);
            jn->timeout_ms = t < 5 ? 0 : t < 7 ? -1 : t < 9 ? 1 : 1000000;
            jn->ndops = (int)rp_pick(s, RP_MAX_DOPS + 1);
            for (int i = 0; i < jn->ndops; i++)
                jn->dops[i] = gen_dop(s, 1);
        }
        ph->free_early = chance(s, 30);
        ph->join_again = chance(s, 30);
    }
}

void rp_generate(struct rp_prog *p, struct rp_src *s)
{
    memset(p, 0, sizeof *p);
    uint32_t n = rp_pick(s, 10);
    p->nphases = n < 5 ? 1 : n < 8 ? 2 : 3;
    for (int i = 0; i < RP_NPOOL; i++) {
        struct rp_knob *k = &p->knobs[i];
        uint32_t c = rp_pick(s, 20);
        int has_target = i + 1 < RP_NPOOL;
        k->target = has_target ? (uint8_t)(i + 1 + (int)rp_pick(s, (uint32_t)(RP_NPOOL - 1 - i))) : 0;
        if (c < 13) {
            k->kind = KN_NONE;
        } else if (c < 15 || !has_target) {
            k->kind = c < 15 ? KN_FAIL : KN_NONE;
            k->code = 40 + i;
            k->times = chance(s, 50) ? 1 : -1;
        } else {
            k->kind = (uint8_t)(KN_ENQ + (c - 15) % 4); /* ENQ, SUBMIT, DONE, DWAIT */
        }
    }
    for (int t = 0; t < RP_NTAGS; t++)
        p->coll_fail[t] = chance(s, 4) ? 60 + t : 0;
    p->abort_done = chance(s, 20) ? (int)rp_pick(s, RP_NPOOL) : -1;
    for (int i = 0; i < p->nphases; i++)
        gen_phase(&p->phases[i], s);
}

static const char *const op_names[RP_NKINDS] = {"yield",  "wait",    "enq",     "done", "submit",
                                                "isdone", "coll",    "barrier", "fail", "raise",
                                                "return", "badwait", "exit"};

const char *rp_op_text(const struct rp_op *op, char *buf, size_t cap)
{
    const char *name = op->kind < RP_NKINDS ? op_names[op->kind] : "?";
    switch (op->kind) {
    case RP_WAIT:
    case RP_ENQ:
    case RP_DONE:
    case RP_SUBMIT:
    case RP_ISDONE:
        snprintf(buf, cap, "%s %llu", name, (unsigned long long)rp_pool_handle(op->h));
        break;
    case RP_COLL:
        snprintf(buf, cap, "coll t%d w%d %s", op->tag, op->code, op->poll ? "poll" : "wait");
        break;
    case RP_FAIL:
    case RP_RAISE:
    case RP_RETURN:
        snprintf(buf, cap, "%s %d", name, op->code);
        break;
    default:
        snprintf(buf, cap, "%s", name);
        break;
    }
    return buf;
}

static const char *const dop_names[RD_N] = {"enq", "done", "submit", "wait", "isdone", "busy"};

const char *rp_dop_name(int kind)
{
    return kind >= 0 && kind < RD_N ? dop_names[kind] : "?";
}

static const char *const oc_names[OC_N] = {"return-ecanceled", "return-0", "return-code", "fail", "continue"};
static const char *const cl_names[CL_N] = {"log", "fail", "suspend", "enq", "done"};
static const char *const kn_names[KN_N] = {"none", "fail", "enq", "submit", "done", "dwait"};

static void dump_dops(FILE *out, const char *what, const struct rp_dop *d, int n)
{
    if (n == 0)
        return;
    fprintf(out, "    %s:", what);
    for (int i = 0; i < n; i++)
        fprintf(out, " %s %llu", rp_dop_name(d[i].kind), (unsigned long long)rp_pool_handle(d[i].h));
    fprintf(out, "\n");
}

void rp_dump(const struct rp_prog *p, FILE *out)
{
    fprintf(out, "program: %d phases\n  engine:", p->nphases);
    for (int i = 0; i < RP_NPOOL; i++) {
        const struct rp_knob *k = &p->knobs[i];
        if (k->kind == KN_NONE)
            continue;
        fprintf(out, " %llu:%s", (unsigned long long)rp_pool_handle(i), kn_names[k->kind]);
        if (k->kind == KN_FAIL)
            fprintf(out, "(%d x%d)", k->code, k->times);
        else
            fprintf(out, "(%llu)", (unsigned long long)rp_pool_handle(k->target));
    }
    for (int t = 0; t < RP_NTAGS; t++)
        if (p->coll_fail[t])
            fprintf(out, " coll t%d:fail(%d)", t, p->coll_fail[t]);
    if (p->abort_done >= 0)
        fprintf(out, " abort:done(%llu)", (unsigned long long)rp_pool_handle(p->abort_done));
    fprintf(out, "\n");
    for (int i = 0; i < p->nphases; i++) {
        const struct rp_phase *ph = &p->phases[i];
        fprintf(out, "  phase %d: %s nprocs=%d %s%s max_rounds=%u", i,
                ph->kind == RP_START ? "start" : "spawn", ph->nprocs,
                ph->cancel_mode == KB_CANCEL_RETURN ? "RETURN" : "UNWIND", ph->seeded ? " seeded" : "",
                ph->max_rounds);
        if (ph->seeded)
            fprintf(out, " seed=%llu", (unsigned long long)ph->seed);
        fprintf(out, "\n");
        dump_dops(out, "before", ph->pre, ph->npre);
        for (int r = 0; r < ph->nprocs; r++) {
            const struct rp_rank *rk = &ph->ranks[r];
            char buf[64];
            fprintf(out, "    rank %d:", r);
            for (int k = 0; k < rk->nops; k++)
                fprintf(out, "%s %s", k ? "," : "", rp_op_text(&rk->ops[k], buf, sizeof buf));
            fprintf(out, "; end %d; on cancel %s; cleanup %s %llu\n", rk->end_code, oc_names[rk->on_cancel],
                    cl_names[rk->cleanup], (unsigned long long)rp_pool_handle(rk->cleanup_h));
        }
        for (int j = 0; j < ph->njoins; j++) {
            fprintf(out, "    join %d: timeout %ld\n", j, ph->joins[j].timeout_ms);
            dump_dops(out, "then", ph->joins[j].dops, ph->joins[j].ndops);
        }
        if (ph->kind == RP_START)
            fprintf(out, "    %s%s\n", ph->free_early ? "free early" : "join to the end",
                    ph->join_again ? ", join again" : "");
    }
}
