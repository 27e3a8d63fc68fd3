/* SPDX-License-Identifier: MIT */
/*
 * fake_engine: see fake_engine.h. The C counterpart of the oracle's
 * fakectx.py (written from its documented behaviour, not translated).
 */
#include "fake_engine.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

/* ------------------------------------------------------------------------ */
/* handles                                                                  */
/* ------------------------------------------------------------------------ */

#define FE_MAX_HANDLES 4096
static kb_handle known[FE_MAX_HANDLES];
static size_t nknown;

kb_handle fe_h(const char *name)
{
    kb_handle h = tr_handle(name);
    for (size_t i = 0; i < nknown; i++)
        if (known[i] == h)
            return h;
    if (nknown == FE_MAX_HANDLES)
        abort();
    known[nknown++] = h;
    return h;
}

const char *fe_code(int rc)
{
    static char buf[8][24];
    static unsigned k;
    switch (rc) {
    case 0:
        return "0";
    case KB_EINVAL:
        return "KB_EINVAL";
    case KB_ENOMEM:
        return "KB_ENOMEM";
    case KB_EAGAIN:
        return "KB_EAGAIN";
    case KB_EBUSY:
        return "KB_EBUSY";
    case KB_EPERM:
        return "KB_EPERM";
    case KB_ECANCELED:
        return "KB_ECANCELED";
    case KB_ESPAWN:
        return "KB_ESPAWN";
    default: {
        char *b = buf[k++ % 8];
        snprintf(b, sizeof buf[0], "%d", rc);
        return b;
    }
    }
}

/* A small growable string for building lines. */
struct sb {
    char *s;
    size_t len, cap;
};

static void sb_add(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 128;
        while (nc < b->len + (size_t)n + 1)
            nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns)
            abort();
        b->s = ns;
        b->cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void sb_free(struct sb *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

static void sb_waits(struct sb *b, const kb_ctx *ctx)
{
    size_t n = kb_pending_waits(ctx, NULL, 0);
    kb_handle *hs = n ? calloc(n, sizeof *hs) : NULL;
    if (n && !hs)
        abort();
    size_t m = kb_pending_waits(ctx, hs, n);
    if (m < n)
        n = m;
    sb_add(b, "pending_worker=[");
    for (size_t i = 0; i < n; i++)
        sb_add(b, "%s%s", i ? "," : "", tr_name(hs[i]));
    sb_add(b, "]");
    free(hs);
}

static void sb_colls(struct sb *b, const kb_ctx *ctx)
{
    size_t n = kb_pending_collectives(ctx, NULL, 0);
    kb_collective *cs = n ? calloc(n, sizeof *cs) : NULL;
    if (n && !cs)
        abort();
    size_t m = kb_pending_collectives(ctx, cs, n);
    if (m < n)
        n = m;
    sb_add(b, "pending_coll=[");
    for (size_t i = 0; i < n; i++)
        sb_add(b, "%s%s", i ? "," : "", tr_name(cs[i].handle));
    sb_add(b, "]");
    free(cs);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void sb_completed(struct sb *b, const kb_ctx *ctx)
{
    const char **names = calloc(nknown ? nknown : 1, sizeof *names);
    size_t n = 0;
    if (!names)
        abort();
    for (size_t i = 0; i < nknown; i++)
        if (kb_is_completed(ctx, known[i]) == 1)
            names[n++] = tr_name(known[i]);
    qsort(names, n, sizeof *names, cmp_str);
    sb_add(b, "completed=[");
    for (size_t i = 0; i < n; i++)
        sb_add(b, "%s%s", i ? "," : "", names[i]);
    sb_add(b, "]");
    free(names);
}

/* ------------------------------------------------------------------------ */
/* engine hooks                                                             */
/* ------------------------------------------------------------------------ */

static const char *origin_name(kb_wait_origin o)
{
    switch (o) {
    case KB_WAIT_QUEUED:
        return "queued";
    case KB_WAIT_COLLECTIVE:
        return "collective";
    case KB_WAIT_DRIVER:
        return "driver";
    }
    return "?";
}

static void check_driver(fe *f, const char *hook)
{
    if (!pthread_equal(pthread_self(), f->driver) || kb_rank() != -1)
        tr_add("hook_off_driver %s", hook);
}

static int hook_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    fe *f = self;
    check_driver(f, "wait");
    f->waits++;
    if (f->nlog < FE_MAX_LOG)
        f->log[f->nlog++] = (struct fe_wait_log){h, meta, origin};
    if (origin != KB_WAIT_QUEUED)
        tr_add("main_wait %s meta=%s", tr_name(h), meta ? (const char *)meta : "None");
    if (f->trace_origin)
        tr_add("engine_wait %s origin=%s meta=%s", tr_name(h), origin_name(origin),
               meta ? (const char *)meta : "None");
    else
        tr_add("engine_wait %s", tr_name(h));
    for (int i = 0; i < f->nfail_on; i++)
        if (f->fail_on[i].h == h)
            return f->fail_on[i].code;
    for (int i = 0; i < f->non_wait; i++)
        if (f->on_wait[i].h == h)
            return f->on_wait[i].cb(f, h, f->on_wait[i].arg);
    return 0;
}

static void hook_bind(void *self, kb_ctx *ctx, int rank)
{
    fe *f = self;
    check_driver(f, "bind");
    f->binds++;
    if (ctx != f->ctx)
        tr_add("bind_wrong_ctx %d", rank);
    tr_add("bind %d", rank);
    if (f->on_bind)
        f->on_bind(f, rank);
}

static void hook_abort(void *self, kb_ctx *ctx)
{
    fe *f = self;
    struct sb b = {0};
    check_driver(f, "abort");
    f->aborts++;
    if (ctx != f->ctx)
        tr_add("abort_wrong_ctx");
    sb_add(&b, "barrier_reset ");
    sb_waits(&b, ctx);
    sb_add(&b, " ");
    sb_colls(&b, ctx);
    tr_add("%s", b.s);
    sb_free(&b);
    if (f->on_abort)
        f->on_abort(f);
}

fe *fe_new(void)
{
    tr_reset();
    fe *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->engine.self = f;
    f->engine.wait = hook_wait;
    f->engine.bind = hook_bind;
    f->engine.abort = hook_abort;
    f->driver = pthread_self();
    assert_int_equal(kb_ctx_create(&f->engine, &f->ctx), 0);
    assert_non_null(f->ctx);
    return f;
}

void fe_free(fe *f)
{
    if (!f)
        return;
    assert_int_equal(kb_ctx_destroy(f->ctx), 0);
    kb_spawn_error_free(f->err);
    free(f->state);
    free(f->calls);
    free(f);
}

void fe_fail_on(fe *f, const char *handle, int code)
{
    assert_true(f->nfail_on < FE_MAX_KNOBS);
    f->fail_on[f->nfail_on].h = fe_h(handle);
    f->fail_on[f->nfail_on].code = code;
    f->nfail_on++;
}

void fe_on_wait(fe *f, const char *handle, fe_wait_cb cb, void *arg)
{
    assert_true(f->non_wait < FE_MAX_KNOBS);
    f->on_wait[f->non_wait].h = fe_h(handle);
    f->on_wait[f->non_wait].cb = cb;
    f->on_wait[f->non_wait].arg = arg;
    f->non_wait++;
}

const char *fe_queues(fe *f)
{
    static char *last;
    struct sb b = {0};
    sb_waits(&b, f->ctx);
    sb_add(&b, " ");
    sb_colls(&b, f->ctx);
    sb_add(&b, " ");
    sb_completed(&b, f->ctx);
    free(last);
    last = b.s;
    return last;
}

void fe_post(fe *f, int all_dead)
{
    static const char *names[] = {"unstarted", "suspended", "dead"};
    struct sb b = {0};
    sb_add(&b, "post ranks=[");
    for (int r = 0; r < f->nprocs; r++)
        sb_add(&b, "%s%s", r ? "," : "", all_dead ? "dead" : names[f->state[r]]);
    sb_add(&b, "] %s", fe_queues(f));
    tr_add("%s", b.s);
    sb_free(&b);
}

/* ------------------------------------------------------------------------ */
/* rank-side helpers                                                        */
/* ------------------------------------------------------------------------ */

int fe_wait(fe *f, kb_handle h)
{
    int r = kb_rank();
    if (kb_is_completed(f->ctx, h) == 1) {
        tr_add("wait_fast %d %s", r, tr_name(h));
        return kb_wait(f->ctx, h);
    }
    tr_add("wait_enqueue %d %s", r, tr_name(h));
    int rc = kb_wait(f->ctx, h);
    if (rc != 0)
        return rc;
    tr_add("wait_done %d %s", r, tr_name(h));
    return 0;
}

int fe_driver_wait(fe *f, kb_handle h, const char *meta)
{
    f->driver = pthread_self();
    tr_add("driver_wait %s", tr_name(h));
    if (kb_is_completed(f->ctx, h) == 1)
        tr_add("wait_fast main %s", tr_name(h));
    int rc = kb_wait_meta(f->ctx, h, (void *)(uintptr_t)meta);
    if (rc != 0)
        tr_add("driver_wait_rc %s %s", tr_name(h), fe_code(rc));
    return rc;
}

static struct fe_tag *tag_get(fe *f, const char *tag)
{
    for (int i = 0; i < f->ntags; i++)
        if (strcmp(f->tags[i].tag, tag) == 0)
            return &f->tags[i];
    if (f->ntags == FE_MAX_TAGS)
        abort();
    struct fe_tag *t = &f->tags[f->ntags++];
    snprintf(t->tag, sizeof t->tag, "%s", tag);
    snprintf(t->meta, sizeof t->meta, "all_reduce:%s", tag);
    char hn[48];
    snprintf(hn, sizeof hn, "coll:%s", tag);
    t->h = fe_h(hn);
    return t;
}

int fe_all_reduce(fe *f, const char *tag, int world, int value, int mode, int *result)
{
    int r = kb_rank(), rc;
    struct fe_tag *t = tag_get(f, tag);
    t->arrived++;
    t->sum += value;
    tr_add("coll_arrive %d %s n=%d/%d", r, tag, t->arrived, world);
    if (t->arrived == world) {
        int sip = f->next_sip++;
        t->issued = 1;
        t->result = t->sum;
        rc = kb_collective_submit(f->ctx, t->h, sip, t->meta);
        if (rc != 0) {
            tr_add("coll_submit_rc %d %s", r, fe_code(rc));
            return rc;
        }
        tr_add("coll_issue %d %s sip=%d", r, tr_name(t->h), sip);
    } else {
        while (!t->issued)
            if ((rc = kb_yield()) != 0)
                return rc;
    }
    if (mode == FE_AR_WAIT) {
        if ((rc = fe_wait(f, t->h)) != 0)
            return rc;
    } else {
        while (kb_is_completed(f->ctx, t->h) != 1)
            if ((rc = kb_yield()) != 0)
                return rc;
    }
    tr_add("coll_done %d %s result=%d", r, tag, t->result);
    if (result)
        *result = t->result;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* traced                                                                   */
/* ------------------------------------------------------------------------ */

struct frame {
    fe *f;
    int rank;
    int done; /* the body returned: the end/unwind line is written */
    int rc;
};

static void traced_cleanup(void *p)
{
    struct frame *fr = p;
    if (!fr->done) {
        tr_add("unwind %d %s", fr->rank, kb_cancelled() ? "cancel" : "raise");
        if (fr->f->on_unwind)
            fr->f->on_unwind(fr->f, fr->rank);
    }
    tr_add("finally %d", fr->rank);
    if (fr->rank >= 0 && fr->rank < fr->f->nprocs)
        fr->f->state[fr->rank] = FE_DEAD;
}

int fe_traced(int rank, void *arg)
{
    struct frame fr = {arg, rank, 0, 0};
    fe *f = fr.f;
    if (rank < 0 || rank >= f->nprocs || kb_rank() != rank || kb_world_size() != f->nprocs ||
        kb_current_ctx() != f->ctx)
        tr_add("bad_identity %d rank=%d world=%d", rank, kb_rank(), kb_world_size());
    tr_add("start %d", rank);
    if (rank >= 0 && rank < f->nprocs) {
        f->calls[rank]++;
        f->state[rank] = FE_SUSPENDED;
    }
    pthread_cleanup_push(traced_cleanup, &fr);
    fr.rc = f->body(f, rank, f->body_arg);
    if (fr.rc == 0)
        tr_add("end %d", rank);
    else
        tr_add("unwind %d %s", rank, fr.rc == KB_ECANCELED && kb_cancelled() ? "cancel" : "raise");
    fr.done = 1;
    pthread_cleanup_pop(1);
    return fr.rc;
}

/* ------------------------------------------------------------------------ */
/* plans                                                                    */
/* ------------------------------------------------------------------------ */

int fe_do_action(fe *f, int rank, const fe_act *a)
{
    int rc;
    switch (a->op) {
    case FE_OP_END:
        return 0;
    case FE_OP_YIELD:
        return kb_yield();
    case FE_OP_WAIT:
        return fe_wait(f, fe_h(a->name));
    case FE_OP_RAISE:
        kb_raise(a->code, "%s", a->msg ? a->msg : "");
    case FE_OP_RETURN:
        return a->code;
    case FE_OP_FAIL:
        rc = kb_fail(a->code, "%s", a->msg ? a->msg : "");
        if (rc != 0)
            tr_add("fail_rc %d %s", rank, fe_code(rc));
        return 0;
    case FE_OP_ENQUEUE:
        rc = kb_enqueue_wait(f->ctx, fe_h(a->name));
        if (rc != 0)
            tr_add("enqueue_rc %d %s", rank, fe_code(rc));
        return rc;
    case FE_OP_SUBMIT:
        rc = kb_collective_submit(f->ctx, fe_h(a->name), a->code, (void *)(uintptr_t)a->msg);
        if (rc != 0)
            tr_add("submit_rc %d %s", rank, fe_code(rc));
        return rc;
    case FE_OP_COMPLETE:
        rc = kb_complete(f->ctx, fe_h(a->name));
        if (rc != 0)
            tr_add("complete_rc %d %s", rank, fe_code(rc));
        return rc;
    case FE_OP_AR:
        return fe_all_reduce(f, a->name, a->code, rank + 1, FE_AR_WAIT, NULL);
    case FE_OP_AR_POLL:
        return fe_all_reduce(f, a->name, a->code, rank + 1, FE_AR_POLL, NULL);
    case FE_OP_BARRIER:
        if ((rc = kb_barrier()) != 0)
            return rc;
        tr_add("barrier_done %d", rank);
        return 0;
    case FE_OP_MARK:
        tr_add("%s", a->msg);
        return 0;
    case FE_OP_CALL:
        return a->fn(f, rank, a);
    }
    tr_add("bad_action %d", (int)a->op);
    return 99;
}

int fe_plan_body(fe *f, int rank, void *plans)
{
    const fe_act *const *p = plans;
    for (int i = 0; p[rank][i].op != FE_OP_END; i++) {
        tr_add("step %d %d", rank, i);
        int rc = fe_do_action(f, rank, &p[rank][i]);
        if (rc == FE_STOP)
            return 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* spawn / start / join                                                     */
/* ------------------------------------------------------------------------ */

static void prepare_run(fe *f, int nprocs)
{
    f->driver = pthread_self();
    free(f->state);
    free(f->calls);
    f->nprocs = nprocs > 0 ? nprocs : 0;
    f->state = calloc((size_t)f->nprocs + 1, sizeof *f->state);
    f->calls = calloc((size_t)f->nprocs + 1, sizeof *f->calls);
    assert_non_null(f->state);
    assert_non_null(f->calls);
    kb_spawn_error_free(f->err);
    f->err = NULL;
}

/* Replace every whole decimal rendering of h in s by its name. */
static void put_msg(struct sb *b, const char *s, kb_handle h)
{
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, (uint64_t)h);
    size_t nl = strlen(num);
    while (*s) {
        if (h != 0 && strncmp(s, num, nl) == 0 && !(s[nl] >= '0' && s[nl] <= '9')) {
            sb_add(b, "%s", tr_name(h));
            s += nl;
            continue;
        }
        if (h != 0 && *s >= '0' && *s <= '9') { /* skip other numbers whole */
            while (*s >= '0' && *s <= '9')
                sb_add(b, "%c", *s++);
            continue;
        }
        sb_add(b, "%c", *s++);
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void fe_report_error(const kb_spawn_error *e)
{
    size_t n = kb_spawn_error_count(e);
    int *ranks = calloc(n + 1, sizeof *ranks);
    struct sb b = {0};
    if (!ranks)
        abort();
    for (size_t i = 0; i < n; i++) {
        const kb_rank_error *re = kb_spawn_error_get(e, i);
        ranks[i] = re ? re->rank : -1;
    }
    qsort(ranks, n, sizeof *ranks, cmp_int);
    sb_add(&b, "error ranks=[");
    for (size_t i = 0; i < n; i++)
        sb_add(&b, "%s%d", i ? "," : "", ranks[i]);
    const kb_rank_error *first = kb_spawn_error_get(e, 0);
    if (first)
        sb_add(&b, "] first=%d code=%d", first->rank, first->code);
    else
        sb_add(&b, "] first=None code=None");
    tr_add("%s", b.s);
    sb_free(&b);
    free(ranks);
    for (size_t i = 0; i < n; i++) {
        const kb_rank_error *re = kb_spawn_error_get(e, i);
        tr_add("error_entry %d code=%d msg=%s", re->rank, re->code, re->message ? re->message : "(NULL)");
    }
    if (kb_spawn_error_get(e, n) != NULL)
        tr_add("error_get_past_end_not_null");
    int dc = kb_spawn_error_drain_code(e);
    kb_handle dh = kb_spawn_error_drain_handle(e);
    if (dc != 0 || dh != 0)
        tr_add("error_drain code=%d handle=%s", dc, tr_name(dh));
    put_msg(&b, kb_spawn_error_message(e), dh);
    tr_add("error_msg %s", b.s ? b.s : "");
    sb_free(&b);
}

int fe_do_spawn(fe *f, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts)
{
    prepare_run(f, nprocs);
    tr_add("spawn_begin nprocs=%d", nprocs);
    int rc = kb_spawn(f->ctx, fn, arg, nprocs, opts, &f->err);
    if (rc == 0) {
        tr_add("spawn_return 0");
        if (f->err)
            tr_add("spawn_err_set_on_success");
    } else if (rc == KB_ESPAWN) {
        tr_add("spawn_raised KB_ESPAWN");
        if (f->err)
            fe_report_error(f->err);
        else
            tr_add("error err=NULL");
    } else {
        tr_add("spawn_raised %s raw", fe_code(rc));
    }
    fe_post(f, rc == 0 || rc == KB_ESPAWN);
    tr_add("spawn_end");
    return rc;
}

int fe_spawn_body(fe *f, fe_body body, void *arg, int nprocs, const kb_spawn_opts *opts)
{
    f->body = body;
    f->body_arg = arg;
    return fe_do_spawn(f, fe_traced, f, nprocs, opts);
}

int fe_spawn_plans(fe *f, const fe_act *const *plans, int nprocs, const kb_spawn_opts *opts)
{
    return fe_spawn_body(f, fe_plan_body, (void *)(uintptr_t)plans, nprocs, opts);
}

const kb_spawn_opts *fe_unwind(void)
{
    static const kb_spawn_opts o = {.cancel_mode = KB_CANCEL_UNWIND};
    return &o;
}

const kb_spawn_opts *fe_return(void)
{
    static const kb_spawn_opts o = {.cancel_mode = KB_CANCEL_RETURN};
    return &o;
}

int fe_start(fe *f, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts, kb_process_context **pc)
{
    prepare_run(f, nprocs);
    tr_add("start_begin nprocs=%d", nprocs);
    int rc = kb_start(f->ctx, fn, arg, nprocs, opts, pc);
    tr_add("start_return %s", fe_code(rc));
    return rc;
}

int fe_start_plans(fe *f, const fe_act *const *plans, int nprocs, const kb_spawn_opts *opts,
                   kb_process_context **pc)
{
    f->body = fe_plan_body;
    f->body_arg = (void *)(uintptr_t)plans;
    return fe_start(f, fe_traced, f, nprocs, opts, pc);
}

int fe_join(fe *f, kb_process_context *pc, long timeout_ms)
{
    f->driver = pthread_self();
    tr_add("join timeout=%ld", timeout_ms);
    kb_spawn_error_free(f->err);
    f->err = NULL;
    int rc = kb_join(pc, timeout_ms, &f->err);
    if (rc == 0 || rc == 1) {
        tr_add("join_return %d", rc);
        if (f->err)
            tr_add("join_err_set_on_success");
    } else if (rc == KB_ESPAWN) {
        if (f->err) {
            tr_add("join_raised KB_ESPAWN");
            fe_report_error(f->err);
        } else {
            tr_add("join_raised KB_ESPAWN err=NULL");
        }
    } else {
        tr_add("join_raised %s raw", fe_code(rc));
    }
    fe_post(f, rc == 1 || rc == KB_ESPAWN);
    return rc;
}

void fe_pc_free(fe *f, kb_process_context *pc)
{
    f->driver = pthread_self();
    tr_add("free_begin");
    kb_process_context_free(pc);
    tr_add("free_end");
    fe_post(f, 1);
}
