/* Failure records of ranks and the kb_spawn_error report built from them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "run.h"
#include "timeline.h"

struct kb_spawn_error {
    int code;              /* KB_ESPAWN, KB_ETIMEDOUT or KB_EDIVERGED */
    kb_rank_error *errors; /* insertion order */
    size_t count;
    char *message;
    int drain_code;
    kb_handle drain_handle;
    uint64_t turn;      /* KB_EDIVERGED */
    kb_live_rank *live; /* KB_ETIMEDOUT, KB_EDIVERGED: rank order */
    size_t nlive;
};

/* Used when a message cannot be allocated; never freed. */
static const char oom_message[] = "(message lost: out of memory)";

static char *vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = kb_malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *kb_format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

static void record(struct kb_rank *rk, int code, char *msg)
{
    struct kb_run *run = rk->run;
    kb_rank_error *e = &run->errors[run->nerrors++];
    e->rank = rk->index;
    e->code = code;
    e->message = msg ? msg : oom_message;
    rk->recorded = 1;
    kb_tl_instant(run, rk->index, KB_TL_FAIL, 0, code);
}

void kb_record_failurev(struct kb_rank *rk, int code, const char *fmt, va_list ap)
{
    if (rk->recorded)
        return; /* the first failure of a rank is the one that counts */
    record(rk, code, fmt ? vformat(fmt, ap) : kb_format("failed with code %d", code));
}

void kb_record_failure_text(struct kb_rank *rk, int code, const char *text)
{
    if (rk->recorded)
        return;
    record(rk, code, text ? kb_format("%s", text) : kb_format("rank function returned %d", code));
}

void kb_rank_errors_free(kb_rank_error *errors, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (errors[i].message != oom_message)
            free((char *)errors[i].message);
    free(errors);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A growing string for messages; NULL once an allocation failed. */
struct str {
    char *s;
    size_t len;
};

static void add(struct str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct str *b, const char *fmt, ...)
{
    if (!b->s)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *piece = vformat(fmt, ap);
    va_end(ap);
    char *grown = piece ? kb_realloc(b->s, b->len + strlen(piece) + 1) : NULL;
    if (!grown) {
        free(piece);
        free(b->s);
        b->s = NULL;
        return;
    }
    memcpy(grown + b->len, piece, strlen(piece) + 1);
    b->len += strlen(piece);
    b->s = grown;
    free(piece);
}

static const char *where_text(kb_rank_where w)
{
    switch (w) {
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

/* KB_ESPAWN: "spawn failed on ranks [1, 3]" + the drain failure + the first
 * recorded rank. KB_ETIMEDOUT / KB_EDIVERGED: what stopped the spawn, the
 * live ranks' suspension points, then any rank recorded while they were
 * cancelled. */
static char *build_message(const struct kb_run *run)
{
    const kb_rank_error *errors = run->errors;
    size_t n = run->nerrors;
    struct str b = {kb_calloc(1, 1), 0};
    if (run->fail_code == KB_ESPAWN) {
        int *ranks = kb_malloc((n ? n : 1) * sizeof *ranks);
        if (!ranks) {
            free(b.s);
            return NULL;
        }
        for (size_t i = 0; i < n; i++)
            ranks[i] = errors[i].rank;
        qsort(ranks, n, sizeof *ranks, cmp_int);
        add(&b, "spawn failed on ranks [");
        for (size_t i = 0; i < n; i++)
            add(&b, "%s%d", i ? ", " : "", ranks[i]);
        add(&b, "]");
        free(ranks);
        if (run->drain_code != 0)
            add(&b, ": drain failed: engine wait for handle %llu (%s) returned %d",
                (unsigned long long)run->drain_handle,
                run->drain_origin == KB_WAIT_COLLECTIVE ? "pending collective" : "pending worker wait",
                run->drain_code);
    } else {
        add(&b, "%s; live ranks:", run->stop_detail ? run->stop_detail : "spawn stopped");
        for (size_t i = 0; i < run->nlive_snapshot; i++) {
            const kb_live_rank *l = &run->live[i];
            add(&b, "%s rank %d %s", i ? "," : "", l->rank, where_text(l->where));
            if (l->where == KB_AT_WAIT)
                add(&b, " %llu", (unsigned long long)l->handle);
        }
        if (run->nlive_snapshot == 0)
            add(&b, " none");
    }
    if (n > 0)
        add(&b, "%srank %d raised code %d: %s", run->drain_code || run->fail_code != KB_ESPAWN ? "; " : ": ",
            errors[0].rank, errors[0].code, errors[0].message);
    return b.s;
}

kb_spawn_error *kb_spawn_error_build(struct kb_run *run)
{
    kb_spawn_error *e = kb_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->message = build_message(run);
    if (!e->message) {
        free(e);
        return NULL;
    }
    e->code = run->fail_code;
    /* Take the records over from the run. */
    e->errors = run->errors;
    e->count = run->nerrors;
    run->errors = NULL;
    run->nerrors = 0;
    e->live = run->live;
    e->nlive = run->nlive_snapshot;
    run->live = NULL;
    run->nlive_snapshot = 0;
    e->drain_code = run->drain_code;
    e->drain_handle = run->drain_code ? run->drain_handle : 0;
    e->turn = run->fail_code == KB_EDIVERGED ? run->diverged_turn : 0;
    return e;
}

int kb_spawn_error_code(const kb_spawn_error *e)
{
    return e ? e->code : 0;
}

uint64_t kb_spawn_error_turn(const kb_spawn_error *e)
{
    return e ? e->turn : 0;
}

size_t kb_spawn_error_live_count(const kb_spawn_error *e)
{
    return e ? e->nlive : 0;
}

const kb_live_rank *kb_spawn_error_live_get(const kb_spawn_error *e, size_t i)
{
    return e && i < e->nlive ? &e->live[i] : NULL;
}

size_t kb_spawn_error_count(const kb_spawn_error *e)
{
    return e ? e->count : 0;
}

const kb_rank_error *kb_spawn_error_get(const kb_spawn_error *e, size_t i)
{
    return e && i < e->count ? &e->errors[i] : NULL;
}

const char *kb_spawn_error_message(const kb_spawn_error *e)
{
    return e ? e->message : "";
}

int kb_spawn_error_drain_code(const kb_spawn_error *e)
{
    return e ? e->drain_code : 0;
}

kb_handle kb_spawn_error_drain_handle(const kb_spawn_error *e)
{
    return e ? e->drain_handle : 0;
}

void kb_spawn_error_free(kb_spawn_error *e)
{
    if (!e)
        return;
    kb_rank_errors_free(e->errors, e->count);
    free(e->live);
    free(e->message);
    free(e);
}
