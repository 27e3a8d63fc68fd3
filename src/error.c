/* SPDX-License-Identifier: MIT */
/* A run's failure state (error.h): the failures of its ranks and the kb_spawn_error report built from them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "run.h"
#include "sort.h"
#include "strbuf.h"
#include "timeline.h"

struct kb_spawn_error {
    int code;              /* KB_ESPAWN, KB_ETIMEDOUT, KB_EDIVERGED or KB_ENOMEM */
    kb_rank_error *errors; /* insertion order */
    size_t count;
    char *message;
    int drain_code;
    kb_handle drain_handle;
    uint64_t turn;      /* KB_EDIVERGED */
    kb_live_rank *live; /* all but KB_ESPAWN: rank order */
    size_t nlive;
};

/* Used when a message cannot be allocated; never freed. */
static const char oom_message[] = "(message lost: out of memory)";

static void add_failure(struct kb_rank *rk, int code, char *msg)
{
    struct kb_run *run = rk->run;
    kb_rank_error *e = &run->failure.errors[run->failure.nerrors++];
    e->rank = rk->index;
    e->code = code;
    e->message = msg ? msg : oom_message;
    rk->failed = 1;
    kb__tl_instant(run, rk->index, KB_TL_FAIL, 0, code);
}

void kb__failure_addv(struct kb_rank *rk, int code, const char *fmt, va_list ap)
{
    if (rk->failed)
        return; /* the first failure of a rank is the one that counts */
    add_failure(rk, code, fmt ? kb__vformat(fmt, ap) : kb__format("failed with code %d", code));
}

void kb__failure_add_text(struct kb_rank *rk, int code, const char *text)
{
    if (rk->failed)
        return;
    add_failure(rk, code, text ? kb__format("%s", text) : kb__format("rank function returned %d", code));
}

void kb__rank_errors_free(kb_rank_error *errors, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (errors[i].message != oom_message)
            free((char *)errors[i].message);
    free(errors);
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
 * failed rank. KB_ETIMEDOUT / KB_EDIVERGED / KB_ENOMEM: what stopped the
 * spawn, the live ranks' suspension points, then any rank that failed
 * while they were cancelled. */
static char *build_message(const struct kb_run *run)
{
    const kb_rank_error *errors = run->failure.errors;
    size_t n = run->failure.nerrors;
    struct kb_strbuf b = {0};
    if (run->failure.code == KB_ESPAWN) {
        int *ranks = kb__malloc((n ? n : 1) * sizeof *ranks);
        if (!ranks) {
            kb__strbuf_free(&b);
            return NULL;
        }
        for (size_t i = 0; i < n; i++)
            ranks[i] = errors[i].rank;
        kb__sort_ints(ranks, n);
        kb__strbuf_addf(&b, "spawn failed on ranks [");
        for (size_t i = 0; i < n; i++)
            kb__strbuf_addf(&b, "%s%d", i ? ", " : "", ranks[i]);
        kb__strbuf_addf(&b, "]");
        free(ranks);
        if (run->failure.drain_code != 0)
            kb__strbuf_addf(&b, ": drain failed: engine wait for handle %llu (%s) returned %d",
                            (unsigned long long)run->failure.drain_handle,
                            run->failure.drain_origin == KB_WAIT_COLLECTIVE ? "pending collective"
                                                                            : "pending worker wait",
                            run->failure.drain_code);
    } else {
        kb__strbuf_addf(&b, "%s; live ranks:", run->failure.detail ? run->failure.detail : "spawn stopped");
        for (size_t i = 0; i < run->failure.nlive; i++) {
            const kb_live_rank *l = &run->failure.live[i];
            kb__strbuf_addf(&b, "%s rank %d %s", i ? "," : "", l->rank, where_text(l->where));
            if (l->where == KB_AT_WAIT)
                kb__strbuf_addf(&b, " %llu", (unsigned long long)l->handle);
        }
        if (run->failure.nlive == 0)
            kb__strbuf_addf(&b, " none");
    }
    if (n > 0)
        kb__strbuf_addf(&b, "%srank %d raised code %d: %s",
                        run->failure.drain_code || run->failure.code != KB_ESPAWN ? "; " : ": ",
                        errors[0].rank, errors[0].code, errors[0].message);
    return kb__strbuf_take(&b);
}

kb_spawn_error *kb__spawn_error_build(struct kb_run *run)
{
    kb_spawn_error *e = kb__calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->message = build_message(run);
    if (!e->message) {
        free(e);
        return NULL;
    }
    e->code = run->failure.code;
    /* Take the records over from the run. */
    e->errors = run->failure.errors;
    e->count = run->failure.nerrors;
    run->failure.errors = NULL;
    run->failure.nerrors = 0;
    e->live = run->failure.live;
    e->nlive = run->failure.nlive;
    run->failure.live = NULL;
    run->failure.nlive = 0;
    e->drain_code = run->failure.drain_code;
    e->drain_handle = run->failure.drain_code ? run->failure.drain_handle : 0;
    e->turn = run->failure.code == KB_EDIVERGED ? run->failure.diverged_turn : 0;
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
    kb__rank_errors_free(e->errors, e->count);
    free(e->live);
    free(e->message);
    free(e);
}
