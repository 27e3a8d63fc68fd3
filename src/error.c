/* Failure records of ranks and the kb_spawn_error report built from them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "run.h"

struct kb_spawn_error {
    kb_rank_error *errors; /* insertion order */
    size_t count;
    char *message;
    int drain_code;
    kb_handle drain_handle;
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

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...)
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
}

void kb_record_failurev(struct kb_rank *rk, int code, const char *fmt, va_list ap)
{
    if (rk->recorded)
        return; /* the first failure of a rank is the one that counts */
    record(rk, code, fmt ? vformat(fmt, ap) : format("failed with code %d", code));
}

void kb_record_failure_text(struct kb_rank *rk, int code, const char *text)
{
    if (rk->recorded)
        return;
    record(rk, code, text ? format("%s", text) : format("rank function returned %d", code));
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

/* "spawn failed on ranks [1, 3]" + the drain failure, then the first
 * recorded rank. */
static char *build_message(const kb_rank_error *errors, size_t n, int drain_code, kb_handle drain_handle,
                           kb_wait_origin drain_origin)
{
    int *ranks = kb_malloc((n ? n : 1) * sizeof *ranks);
    if (!ranks)
        return NULL;
    for (size_t i = 0; i < n; i++)
        ranks[i] = errors[i].rank;
    qsort(ranks, n, sizeof *ranks, cmp_int);

    size_t cap = 64 + n * 14;
    char *list = kb_malloc(cap);
    if (!list) {
        free(ranks);
        return NULL;
    }
    size_t len = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(list + len, cap - len, "%s%d", i ? ", " : "", ranks[i]);
    free(ranks);

    char drain[160] = "";
    if (drain_code != 0)
        snprintf(drain, sizeof drain, ": drain failed: engine wait for handle %llu (%s) returned %d",
                 (unsigned long long)drain_handle,
                 drain_origin == KB_WAIT_COLLECTIVE ? "pending collective" : "pending worker wait",
                 drain_code);
    char *msg;
    if (n > 0)
        msg = format("spawn failed on ranks [%s]%s%srank %d raised code %d: %s", list, drain,
                     drain_code ? "; " : ": ", errors[0].rank, errors[0].code, errors[0].message);
    else
        msg = format("spawn failed on ranks [%s]%s", list, drain);
    free(list);
    return msg;
}

kb_spawn_error *kb_spawn_error_build(struct kb_run *run)
{
    kb_spawn_error *e = kb_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->message =
        build_message(run->errors, run->nerrors, run->drain_code, run->drain_handle, run->drain_origin);
    if (!e->message) {
        free(e);
        return NULL;
    }
    /* Take the records over from the run. */
    e->errors = run->errors;
    e->count = run->nerrors;
    run->errors = NULL;
    run->nerrors = 0;
    e->drain_code = run->drain_code;
    e->drain_handle = run->drain_code ? run->drain_handle : 0;
    return e;
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
    free(e->message);
    free(e);
}
