/* SPDX-License-Identifier: MIT */
/*
 * des_engine.c - the discrete-event engine behind kbdemo (see des_engine.h
 * for the time model).
 *
 * Layout: operations live in one growable array and are named by index
 * (handle = index + 1), never by pointer, because creating an operation may
 * move the array. Every operation whose end time is known sits in a binary
 * min-heap keyed by (end, index); the wait hook pops that heap. An operation
 * whose end is not known yet (a recv without its send, an allreduce that
 * not every rank joined) waits in its channel or collective instance and is
 * pushed on the heap the moment its last input is posted.
 *
 * Invariants
 *   - op.scheduled <=> op.end is final and the op was pushed on the heap;
 *     op.done <=> it was popped (released). done implies scheduled.
 *   - A channel (src, dst) never holds unmatched sends and unmatched recvs at
 *     the same time; matching is FIFO on both sides.
 *   - A send's payload copy is owned by the send op until the matching recv
 *     is released, which copies it out and frees it (or until destroy).
 *   - Fallible steps (allocation, overflow checks) all happen before the
 *     first change of state, so a failed call changes nothing observable (it
 *     may leave behind an empty channel or allreduce instance, which later
 *     calls simply reuse).
 */
#include "des_engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum des_kind { OP_COMPUTE, OP_SEND, OP_RECV, OP_ALLREDUCE } des_kind;

typedef struct des_op {
    des_kind kind;
    int rank;
    int peer;         /* send: destination; recv: source; else -1 */
    int scheduled;    /* end is final and the op is (or was) on the heap */
    int done;         /* released by the clock */
    uint64_t start;   /* issue time (recv: post time; allreduce: join time) */
    uint64_t end;     /* completion time, once scheduled */
    uint64_t arrival; /* send: when the data reaches the destination */
    void *data;       /* send: owned payload copy; recv: user buffer; allreduce: int64_t * */
    size_t len;       /* payload bytes */
    size_t link;      /* recv: matched send index; allreduce: instance index */
} des_op;

/* A FIFO of op indices: v[head .. head+len). */
typedef struct des_fifo {
    size_t *v;
    size_t head, len, cap;
} des_fifo;

/* The one-way link and message queue from src to dst. */
typedef struct des_chan {
    int src, dst;
    uint64_t link_free; /* the link is busy until then */
    des_fifo sends;     /* posted sends no recv matched yet */
    des_fifo recvs;     /* posted recvs no send matched yet */
} des_chan;

/* One allreduce instance: the k-th allreduce call of every rank. */
typedef struct des_coll {
    int joined;
    uint64_t last_join;
    uint64_t wire_bytes; /* largest size any member gave */
    uint64_t sum;        /* unsigned: wraps instead of overflowing */
    size_t *members;     /* op indices, joined of them; nranks slots */
} des_coll;

typedef struct des_event {
    uint64_t time;
    size_t op; /* ties on time go to the op created first */
} des_event;

struct des_engine {
    des_config cfg;
    kb_ctx *ctx; /* from bind; NULL before the first spawn */
    int aborted;
    int bind_failed;

    uint64_t *clock;    /* per rank: local clock */
    uint64_t *cpu_free; /* per rank: compute unit busy until then */
    size_t *coll_seq;   /* per rank: allreduce calls so far */

    des_op *ops;
    size_t nops, cap_ops;
    des_chan *chans; /* looked up linearly: a ring uses nranks of them */
    size_t nchans, cap_chans;
    des_coll *colls;
    size_t ncolls, cap_colls;
    des_event *heap;
    size_t nheap, cap_heap;

    des_stats stats;
    char error[320];
};

/* ------------------------------------------------------------------------ */
/* Small helpers.                                                           */
/* ------------------------------------------------------------------------ */

const char *des_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
    case DES_EDEADLOCK:
        return "the handle can never complete (a counterpart is not posted)";
    case DES_EUNKNOWN:
        return "handle not created by this engine";
    case DES_EABORTED:
        return "the spawn was aborted; the engine is spent";
    case DES_ELIBRARY:
        return "a kbthreads call made by the engine failed";
    case DES_EBIND:
        return "engine bound to a rank out of range or to a second ctx";
    case DES_ESTATE:
        return "handle completed by the library but not by the engine";
    default:
        return "unknown engine code";
    }
}

/* Record the first failure only: later ones are usually its consequences. */
static void set_error(des_engine *e, const char *fmt, ...) KB_PRINTF_LIKE(2, 3);
static void set_error(des_engine *e, const char *fmt, ...)
{
    if (e->error[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
}

static const char *kind_name(des_kind k)
{
    switch (k) {
    case OP_COMPUTE:
        return "compute";
    case OP_SEND:
        return "send";
    case OP_RECV:
        return "recv";
    case OP_ALLREDUCE:
        return "allreduce";
    }
    return "?";
}

static int add_time(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a > UINT64_MAX - b)
        return 0;
    *out = a + b;
    return 1;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Time to push wire_bytes through a link, rounded up to whole ns. */
static int serialisation_ns(const des_engine *e, uint64_t wire_bytes, uint64_t *out)
{
    if (wire_bytes > UINT64_MAX / 1000u)
        return 0;
    uint64_t scaled = wire_bytes * 1000u;
    uint64_t bw = e->cfg.link_bytes_per_us;
    *out = scaled / bw + (scaled % bw != 0);
    return 1;
}

/* Make room for `need` elements of `elem` bytes in *p (capacity *cap). */
static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return 0;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem)
        return 0;
    void *np = realloc(*p, ncap * elem);
    if (np == NULL)
        return 0;
    *p = np;
    *cap = ncap;
    return 1;
}

static int fifo_reserve(des_fifo *q)
{
    if (q->head + q->len < q->cap)
        return 1;
    if (q->head > 0) { /* slide the live part to the front */
        memmove(q->v, q->v + q->head, q->len * sizeof *q->v);
        q->head = 0;
        return 1;
    }
    void *p = q->v;
    int ok = reserve(&p, &q->cap, q->len + 1, sizeof *q->v);
    q->v = p;
    return ok;
}

/* Call fifo_reserve first. */
static void fifo_push(des_fifo *q, size_t x)
{
    q->v[q->head + q->len++] = x;
}
static size_t fifo_front(const des_fifo *q)
{
    return q->v[q->head];
}
static void fifo_pop(des_fifo *q)
{
    q->head++;
    if (--q->len == 0)
        q->head = 0;
}

/* ------------------------------------------------------------------------ */
/* The event heap: a binary min-heap on (time, op).                         */
/* ------------------------------------------------------------------------ */

static int event_before(des_event a, des_event b)
{
    return a.time < b.time || (a.time == b.time && a.op < b.op);
}

static int heap_reserve(des_engine *e, size_t extra)
{
    void *p = e->heap;
    int ok = extra <= SIZE_MAX - e->nheap && reserve(&p, &e->cap_heap, e->nheap + extra, sizeof *e->heap);
    e->heap = p;
    return ok;
}

/* Call heap_reserve first. */
static void heap_push(des_engine *e, des_event ev)
{
    size_t i = e->nheap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!event_before(ev, e->heap[parent]))
            break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = ev;
}

static des_event heap_pop(des_engine *e)
{
    des_event top = e->heap[0];
    des_event last = e->heap[--e->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->nheap)
            break;
        if (c + 1 < e->nheap && event_before(e->heap[c + 1], e->heap[c]))
            c++;
        if (!event_before(e->heap[c], last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->nheap > 0)
        e->heap[i] = last;
    return top;
}

/* The end time of op i is final: put it on the heap (room reserved). */
static void schedule(des_engine *e, size_t i, uint64_t end)
{
    e->ops[i].end = end;
    e->ops[i].scheduled = 1;
    heap_push(e, (des_event){.time = end, .op = i});
}

/* ------------------------------------------------------------------------ */
/* Creation and destruction.                                                */
/* ------------------------------------------------------------------------ */

int des_engine_create(const des_config *cfg, des_engine **out)
{
    if (out == NULL)
        return KB_EINVAL;
    *out = NULL;
    if (cfg == NULL || cfg->nranks < 1 || cfg->link_bytes_per_us == 0)
        return KB_EINVAL;
    des_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return KB_ENOMEM;
    size_t n = (size_t)cfg->nranks;
    e->cfg = *cfg;
    e->clock = calloc(n, sizeof *e->clock);
    e->cpu_free = calloc(n, sizeof *e->cpu_free);
    e->coll_seq = calloc(n, sizeof *e->coll_seq);
    if (e->clock == NULL || e->cpu_free == NULL || e->coll_seq == NULL) {
        des_engine_destroy(e);
        return KB_ENOMEM;
    }
    *out = e;
    return 0;
}

void des_engine_destroy(des_engine *e)
{
    if (e == NULL)
        return;
    for (size_t i = 0; i < e->nops; i++)
        if (e->ops[i].kind == OP_SEND)
            free(e->ops[i].data);
    for (size_t i = 0; i < e->nchans; i++) {
        free(e->chans[i].sends.v);
        free(e->chans[i].recvs.v);
    }
    for (size_t i = 0; i < e->ncolls; i++)
        free(e->colls[i].members);
    free(e->ops);
    free(e->chans);
    free(e->colls);
    free(e->heap);
    free(e->clock);
    free(e->cpu_free);
    free(e->coll_seq);
    free(e);
}

/* ------------------------------------------------------------------------ */
/* Operations.                                                              */
/* ------------------------------------------------------------------------ */

/* Common checks of every creation call; 0 (with the error set) to refuse. */
static int usable(des_engine *e, int rank, const char *what)
{
    if (e->aborted) {
        set_error(e, "%s: the engine was aborted", what);
        return 0;
    }
    if (rank < 0 || rank >= e->cfg.nranks) {
        set_error(e, "%s: rank %d out of range [0, %d)", what, rank, e->cfg.nranks);
        return 0;
    }
    return 1;
}

/* Room for one more op (the handle index + 1 must stay below UINT64_MAX). */
static int ops_reserve(des_engine *e)
{
    if ((uint64_t)e->nops >= UINT64_MAX - 1)
        return 0;
    void *p = e->ops;
    int ok = reserve(&p, &e->cap_ops, e->nops + 1, sizeof *e->ops);
    e->ops = p;
    return ok;
}

/* Append an op (room reserved); returns its index. */
static size_t add_op(des_engine *e, des_kind kind, int rank, int peer, uint64_t start)
{
    size_t i = e->nops++;
    e->ops[i] = (des_op){.kind = kind, .rank = rank, .peer = peer, .start = start};
    e->stats.ops++;
    return i;
}

static kb_handle handle_of(size_t i)
{
    return (kb_handle)i + 1;
}

static kb_handle out_of_memory(des_engine *e, const char *what)
{
    set_error(e, "%s: out of memory", what);
    return 0;
}

static kb_handle overflow(des_engine *e, const char *what, int rank)
{
    set_error(e, "%s on rank %d: simulated time overflows", what, rank);
    return 0;
}

kb_handle des_compute(des_engine *e, int rank, uint64_t duration_ns)
{
    if (e == NULL || !usable(e, rank, "des_compute"))
        return 0;
    uint64_t start = max_u64(e->clock[rank], e->cpu_free[rank]);
    uint64_t end;
    if (!add_time(start, duration_ns, &end))
        return overflow(e, "des_compute", rank);
    if (!ops_reserve(e) || !heap_reserve(e, 1))
        return out_of_memory(e, "des_compute");
    size_t i = add_op(e, OP_COMPUTE, rank, -1, start);
    e->cpu_free[rank] = end;
    schedule(e, i, end);
    return handle_of(i);
}

/* The channel src->dst, created on first use; SIZE_MAX when out of memory. */
static size_t channel(des_engine *e, int src, int dst)
{
    for (size_t c = 0; c < e->nchans; c++)
        if (e->chans[c].src == src && e->chans[c].dst == dst)
            return c;
    void *p = e->chans;
    int ok = reserve(&p, &e->cap_chans, e->nchans + 1, sizeof *e->chans);
    e->chans = p;
    if (!ok)
        return SIZE_MAX;
    e->chans[e->nchans] = (des_chan){.src = src, .dst = dst};
    return e->nchans++;
}

/* A peer rank argument: in range and not the rank itself. */
static int valid_peer(des_engine *e, int rank, int peer, const char *what)
{
    if (peer < 0 || peer >= e->cfg.nranks || peer == rank) {
        set_error(e, "%s on rank %d: bad peer rank %d", what, rank, peer);
        return 0;
    }
    return 1;
}

/* Pair send s with recv r (both exist): the recv's end becomes final. */
static void match(des_engine *e, size_t s, size_t r)
{
    e->ops[r].link = s;
    schedule(e, r, max_u64(e->ops[r].start, e->ops[s].arrival));
}

kb_handle des_send(des_engine *e, int rank, int dst, uint64_t wire_bytes, const void *data, size_t len)
{
    if (e == NULL || !usable(e, rank, "des_send") || !valid_peer(e, rank, dst, "des_send"))
        return 0;
    if (len > 0 && data == NULL) {
        set_error(e, "des_send on rank %d: NULL data with len %zu", rank, len);
        return 0;
    }
    size_t c = channel(e, rank, dst);
    if (c == SIZE_MAX)
        return out_of_memory(e, "des_send");
    des_chan *ch = &e->chans[c];

    uint64_t ser, start = max_u64(e->clock[rank], ch->link_free), end, arrival;
    if (!serialisation_ns(e, wire_bytes, &ser) || !add_time(start, ser, &end) ||
        !add_time(end, e->cfg.link_latency_ns, &arrival))
        return overflow(e, "des_send", rank);
    int has_recv = ch->recvs.len > 0;
    if (has_recv && e->ops[fifo_front(&ch->recvs)].len != len) {
        set_error(e, "des_send %d->%d: payload of %zu bytes, the matching recv expects %zu", rank, dst, len,
                  e->ops[fifo_front(&ch->recvs)].len);
        return 0;
    }
    if (!ops_reserve(e) || !heap_reserve(e, 2) || (!has_recv && !fifo_reserve(&ch->sends)))
        return out_of_memory(e, "des_send");
    void *copy = NULL;
    if (len > 0) {
        copy = malloc(len);
        if (copy == NULL)
            return out_of_memory(e, "des_send");
        memcpy(copy, data, len);
    }

    size_t i = add_op(e, OP_SEND, rank, dst, start);
    e->ops[i].arrival = arrival;
    e->ops[i].data = copy;
    e->ops[i].len = len;
    ch->link_free = end;
    schedule(e, i, end);
    if (has_recv) {
        size_t r = fifo_front(&ch->recvs);
        fifo_pop(&ch->recvs);
        match(e, i, r);
    } else {
        fifo_push(&ch->sends, i);
    }
    return handle_of(i);
}

kb_handle des_recv(des_engine *e, int rank, int src, void *buf, size_t len)
{
    if (e == NULL || !usable(e, rank, "des_recv") || !valid_peer(e, rank, src, "des_recv"))
        return 0;
    if (len > 0 && buf == NULL) {
        set_error(e, "des_recv on rank %d: NULL buffer with len %zu", rank, len);
        return 0;
    }
    size_t c = channel(e, src, rank);
    if (c == SIZE_MAX)
        return out_of_memory(e, "des_recv");
    des_chan *ch = &e->chans[c];
    int has_send = ch->sends.len > 0;
    if (has_send && e->ops[fifo_front(&ch->sends)].len != len) {
        set_error(e, "des_recv %d<-%d: expects %zu bytes, the matching send carries %zu", rank, src, len,
                  e->ops[fifo_front(&ch->sends)].len);
        return 0;
    }
    if (!ops_reserve(e) || !heap_reserve(e, 1) || (!has_send && !fifo_reserve(&ch->recvs)))
        return out_of_memory(e, "des_recv");

    size_t i = add_op(e, OP_RECV, rank, src, e->clock[rank]);
    e->ops[i].data = buf;
    e->ops[i].len = len;
    if (has_send) {
        size_t s = fifo_front(&ch->sends);
        fifo_pop(&ch->sends);
        match(e, s, i);
    } else {
        fifo_push(&ch->recvs, i);
    }
    return handle_of(i);
}

/* Rounds of recursive doubling: ceil(log2 n). */
static uint64_t doubling_rounds(int n)
{
    uint64_t r = 0;
    for (uint64_t reach = 1; reach < (uint64_t)n; reach *= 2)
        r++;
    return r;
}

kb_handle des_allreduce_i64(des_engine *e, int rank, uint64_t wire_bytes, int64_t *inout)
{
    if (e == NULL || !usable(e, rank, "des_allreduce_i64"))
        return 0;
    if (inout == NULL) {
        set_error(e, "des_allreduce_i64 on rank %d: NULL inout", rank);
        return 0;
    }
    size_t k = e->coll_seq[rank];
    if (k == e->ncolls) { /* this rank is the first to reach instance k */
        void *p = e->colls;
        int ok = reserve(&p, &e->cap_colls, e->ncolls + 1, sizeof *e->colls);
        e->colls = p;
        if (!ok)
            return out_of_memory(e, "des_allreduce_i64");
        size_t *members = calloc((size_t)e->cfg.nranks, sizeof *members);
        if (members == NULL)
            return out_of_memory(e, "des_allreduce_i64");
        e->colls[e->ncolls++] = (des_coll){.members = members};
    }
    des_coll *in = &e->colls[k];
    uint64_t join = e->clock[rank];
    uint64_t last = max_u64(in->last_join, join), wire = max_u64(in->wire_bytes, wire_bytes);
    int completes = in->joined + 1 == e->cfg.nranks;
    uint64_t ser, step, cost, end = 0;
    if (!serialisation_ns(e, wire, &ser) || !add_time(ser, e->cfg.link_latency_ns, &step))
        return overflow(e, "des_allreduce_i64", rank);
    uint64_t rounds = doubling_rounds(e->cfg.nranks);
    if (rounds > 0 && step > UINT64_MAX / rounds)
        return overflow(e, "des_allreduce_i64", rank);
    cost = rounds * step;
    if (completes && !add_time(last, cost, &end))
        return overflow(e, "des_allreduce_i64", rank);
    if (!ops_reserve(e) || !heap_reserve(e, (size_t)e->cfg.nranks))
        return out_of_memory(e, "des_allreduce_i64");

    size_t i = add_op(e, OP_ALLREDUCE, rank, -1, join);
    e->ops[i].data = inout;
    e->ops[i].len = sizeof *inout;
    e->ops[i].link = k;
    e->coll_seq[rank]++;
    in->members[in->joined++] = i;
    in->last_join = last;
    in->wire_bytes = wire;
    in->sum += (uint64_t)*inout;
    if (completes)
        for (int m = 0; m < in->joined; m++)
            schedule(e, in->members[m], end);
    return handle_of(i);
}

/* ------------------------------------------------------------------------ */
/* The clock and the hooks.                                                 */
/* ------------------------------------------------------------------------ */

static des_op *lookup(des_engine *e, kb_handle h)
{
    if (h == KB_HANDLE_RESERVED_LOW || h > (kb_handle)e->nops)
        return NULL;
    return &e->ops[h - 1];
}

/* Release the earliest event: the op completes, its side effects happen, and
 * the library learns of it unless it is the handle being waited for (the
 * library marks that one itself when the hook returns). */
static int release_next(des_engine *e, kb_handle waited)
{
    des_event ev = heap_pop(e);
    des_op *op = &e->ops[ev.op];
    op->done = 1;
    e->stats.events++;
    e->stats.horizon_ns = max_u64(e->stats.horizon_ns, op->end);
    if (op->kind == OP_RECV) {
        des_op *s = &e->ops[op->link];
        if (op->len > 0)
            memcpy(op->data, s->data, op->len);
        free(s->data);
        s->data = NULL;
    } else if (op->kind == OP_ALLREDUCE) {
        *(int64_t *)op->data = (int64_t)e->colls[op->link].sum;
    }
    kb_handle h = handle_of(ev.op);
    if (h == waited)
        return 0;
    e->stats.completed_early++;
    if (e->ctx == NULL) /* no spawn bound yet: the library asks us when it needs to */
        return 0;
    int rc = kb_complete(e->ctx, h);
    if (rc != 0) {
        set_error(e, "kb_complete(handle %llu): %s", (unsigned long long)h, kb_strerror(rc));
        return DES_ELIBRARY;
    }
    return 0;
}

/* Explain why op (never to be scheduled) cannot complete. */
static void describe_stuck(des_engine *e, kb_handle h, const des_op *op)
{
    if (op->kind == OP_RECV) {
        set_error(e,
                  "handle %llu: rank %d's recv from rank %d has no matching send; the sender "
                  "must post it before the end of the round",
                  (unsigned long long)h, op->rank, op->peer);
    } else if (op->kind == OP_ALLREDUCE) {
        set_error(e, "handle %llu: rank %d's allreduce #%zu: only %d of %d ranks joined",
                  (unsigned long long)h, op->rank, op->link, e->colls[op->link].joined, e->cfg.nranks);
    } else {
        set_error(e, "handle %llu: rank %d's %s is not scheduled", (unsigned long long)h, op->rank,
                  kind_name(op->kind));
    }
}

static int hook_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    des_engine *e = self;
    (void)meta; /* every op is fully described when it is created */
    if ((unsigned)origin < 3)
        e->stats.waits[origin]++;
    if (e->aborted)
        return DES_EABORTED;
    if (e->bind_failed)
        return DES_EBIND;
    des_op *op = lookup(e, h);
    if (op == NULL) {
        set_error(e, "wait: handle %llu was not created by this engine", (unsigned long long)h);
        return DES_EUNKNOWN;
    }
    while (!op->done) {
        if (e->nheap == 0) {
            describe_stuck(e, h, op);
            return DES_EDEADLOCK;
        }
        int rc = release_next(e, h);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void hook_bind(void *self, kb_ctx *ctx, int rank)
{
    des_engine *e = self;
    if (rank < 0 || rank >= e->cfg.nranks) {
        e->bind_failed = 1;
        set_error(e, "bind: rank %d, but the engine models %d ranks", rank, e->cfg.nranks);
    } else if (e->ctx == NULL) {
        e->ctx = ctx;
    } else if (e->ctx != ctx) {
        e->bind_failed = 1;
        set_error(e, "bind: one engine serves one ctx");
    }
}

/* The spawn failed: nothing more will be waited for. Drop the pending events
 * so a stray later wait fails loudly instead of simulating half a run. */
static void hook_abort(void *self, kb_ctx *ctx)
{
    des_engine *e = self;
    (void)ctx;
    e->aborted = 1;
    e->nheap = 0;
    set_error(e, "the library aborted the spawn");
}

kb_engine des_engine_hooks(des_engine *e)
{
    return (kb_engine){.self = e, .wait = hook_wait, .bind = hook_bind, .abort = hook_abort};
}

/* ------------------------------------------------------------------------ */
/* Waiting from rank code.                                                  */
/* ------------------------------------------------------------------------ */

/* h completed in the library: move rank's clock to its end. Looks the op up
 * again because other ranks may have grown the op array meanwhile. */
static int observe(des_engine *e, int rank, kb_handle h)
{
    des_op *op = lookup(e, h);
    if (op == NULL || !op->done) {
        set_error(e, "handle %llu completed in the library but not in the engine", (unsigned long long)h);
        return DES_ESTATE;
    }
    e->clock[rank] = max_u64(e->clock[rank], op->end);
    return 0;
}

/* KB_EINVAL for a bad rank, DES_EUNKNOWN for a foreign handle, else 0. */
static int check_own(des_engine *e, int rank, kb_handle h, const char *fn)
{
    if (e == NULL || rank < 0 || rank >= e->cfg.nranks)
        return KB_EINVAL;
    if (lookup(e, h) == NULL) {
        set_error(e, "%s: handle %llu was not created by this engine", fn, (unsigned long long)h);
        return DES_EUNKNOWN;
    }
    return 0;
}

int des_await(des_engine *e, kb_ctx *ctx, int rank, kb_handle h)
{
    int rc = check_own(e, rank, h, "des_await");
    if (rc == 0)
        rc = kb_wait(ctx, h);
    return rc != 0 ? rc : observe(e, rank, h);
}

int des_observe(des_engine *e, int rank, kb_handle h)
{
    int rc = check_own(e, rank, h, "des_observe");
    return rc != 0 ? rc : observe(e, rank, h);
}

int des_await_all(des_engine *e, kb_ctx *ctx, int rank, const kb_handle *hs, size_t n)
{
    if (e == NULL || rank < 0 || rank >= e->cfg.nranks || (n > 0 && hs == NULL))
        return KB_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (lookup(e, hs[i]) == NULL) {
            set_error(e, "des_await_all: handle %llu was not created by this engine",
                      (unsigned long long)hs[i]);
            return DES_EUNKNOWN;
        }
    /* In a rank: queue all open handles but the last, then wait for the last,
     * so one drain completes them all and the rank loses a single turn. On
     * the driver side nothing drains a queue: wait for each in turn. */
    if (kb_rank() >= 0) {
        size_t last = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            int c = kb_is_completed(ctx, hs[i]);
            if (c < 0)
                return c;
            if (c == 0)
                last = i;
        }
        if (last != SIZE_MAX) {
            for (size_t i = 0; i < last; i++) {
                int c = kb_is_completed(ctx, hs[i]);
                if (c < 0)
                    return c;
                if (c == 0 && (c = kb_enqueue_wait(ctx, hs[i])) != 0)
                    return c;
            }
            int rc = kb_wait(ctx, hs[last]);
            if (rc != 0)
                return rc;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int rc = kb_wait(ctx, hs[i]); /* at once, unless the drain left it open */
        if (rc == 0)
            rc = observe(e, rank, hs[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Inspection.                                                              */
/* ------------------------------------------------------------------------ */

uint64_t des_clock(const des_engine *e, int rank)
{
    if (e == NULL || rank < 0 || rank >= e->cfg.nranks)
        return 0;
    return e->clock[rank];
}

uint64_t des_makespan(const des_engine *e)
{
    uint64_t m = 0;
    for (int r = 0; e != NULL && r < e->cfg.nranks; r++)
        m = max_u64(m, e->clock[r]);
    return m;
}

void des_engine_stats(const des_engine *e, des_stats *out)
{
    if (out == NULL)
        return;
    if (e == NULL)
        *out = (des_stats){0};
    else
        *out = e->stats;
}

const char *des_engine_error(const des_engine *e)
{
    return e == NULL ? "" : e->error;
}
