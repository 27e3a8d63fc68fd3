/* SPDX-License-Identifier: MIT */
/* The timeline: Chrome trace-event JSON (see timeline.h). */
#include "timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "clock.h"
#include "run.h"

struct kb_tl_event {
    uint64_t ts, dur; /* ns; dur == UINT64_MAX: an instant */
    int track;
    int kind;
    kb_handle h;
    int64_t v;
};

struct kb_timeline {
    FILE *f;
    uint64_t t0;
    struct kb_tl_event *ev;
    size_t n, cap;
    int oom; /* events were dropped */
};

int kb__tl_open(struct kb_run *run, const char *path)
{
    struct kb_timeline *tl = kb__calloc(1, sizeof *tl);
    if (!tl)
        return KB_ENOMEM;
    tl->f = fopen(path, "w");
    if (!tl->f) {
        int e = errno;
        free(tl);
        return -e;
    }
    tl->t0 = kb__now_ns();
    run->files.tl = tl;
    return 0;
}

static void add(struct kb_run *run, int track, int kind, uint64_t ts, uint64_t dur, kb_handle h, int64_t v)
{
    struct kb_timeline *tl = run->files.tl;
    if (!tl || tl->oom)
        return;
    if (tl->n == tl->cap) {
        size_t ncap = tl->cap ? tl->cap * 2 : 1024;
        struct kb_tl_event *ne = kb__realloc(tl->ev, ncap * sizeof *ne);
        if (!ne) {
            tl->oom = 1;
            return;
        }
        tl->ev = ne;
        tl->cap = ncap;
    }
    tl->ev[tl->n++] =
        (struct kb_tl_event){.ts = ts, .dur = dur, .track = track, .kind = kind, .h = h, .v = v};
}

void kb__tl_slice(struct kb_run *run, int track, int kind, uint64_t start_ns, uint64_t end_ns, kb_handle h,
                  int64_t v)
{
    if (run->files.tl)
        add(run, track, kind, start_ns, end_ns - start_ns, h, v);
}

void kb__tl_instant(struct kb_run *run, int track, int kind, kb_handle h, int64_t v)
{
    if (run->files.tl)
        add(run, track, kind, kb__now_ns(), UINT64_MAX, h, v);
}

static const char *kind_name(int kind)
{
    static const char *const names[] = {
        [KB_TL_TURN] = "turn",
        [KB_TL_ROUND] = "round",
        [KB_TL_DRAIN] = "drain",
        [KB_TL_ENGINE_WAIT] = "engine_wait",
        [KB_TL_WAIT] = "wait",
        [KB_TL_WAIT_FAST] = "wait_fast",
        [KB_TL_COLLECTIVE] = "collective",
        [KB_TL_BARRIER] = "barrier",
        [KB_TL_CANCEL] = "cancel",
        [KB_TL_FAIL] = "fail",
        [KB_TL_DRAIN_FAIL] = "drain_fail",
        [KB_TL_STOP] = "stop",
    };
    return names[kind];
}

/* The args object of an event: what its kind carries. */
static void write_args(FILE *f, const struct kb_tl_event *e)
{
    switch (e->kind) {
    case KB_TL_TURN:
    case KB_TL_ROUND:
    case KB_TL_DRAIN:
        fprintf(f, "{\"round\":%lld}", (long long)e->v);
        break;
    case KB_TL_ENGINE_WAIT:
        fprintf(f, "{\"handle\":%llu,\"origin\":\"%s\"}", (unsigned long long)e->h,
                e->v == KB_WAIT_QUEUED       ? "queued"
                : e->v == KB_WAIT_COLLECTIVE ? "collective"
                                             : "driver");
        break;
    case KB_TL_WAIT:
    case KB_TL_WAIT_FAST:
        fprintf(f, "{\"handle\":%llu}", (unsigned long long)e->h);
        break;
    case KB_TL_COLLECTIVE:
        fprintf(f, "{\"handle\":%llu,\"sip_id\":%lld}", (unsigned long long)e->h, (long long)e->v);
        break;
    case KB_TL_FAIL:
    case KB_TL_STOP:
        fprintf(f, "{\"code\":%lld}", (long long)e->v);
        break;
    case KB_TL_DRAIN_FAIL:
        fprintf(f, "{\"handle\":%llu,\"code\":%lld}", (unsigned long long)e->h, (long long)e->v);
        break;
    default:
        fprintf(f, "{}");
    }
}

int kb__tl_close(struct kb_run *run)
{
    struct kb_timeline *tl = run->files.tl;
    if (!tl)
        return 0;
    run->files.tl = NULL;
    FILE *f = tl->f;
    fprintf(f,
            "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"library\":\"libkbthreads %s\",\"nprocs\":%d,"
            "\"dropped_events\":%s},\n\"traceEvents\":[\n",
            kb_version(), run->nprocs, tl->oom ? "true" : "false");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"kbthreads "
               "spawn\"}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"driver\"}}");
    for (int r = 0; r < run->nprocs; r++)
        fprintf(f,
                ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"rank "
                "%d\"}},\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{"
                "\"sort_index\":%d}}",
                r + 1, r, r + 1, r + 1);
    for (size_t i = 0; i < tl->n; i++) {
        const struct kb_tl_event *e = &tl->ev[i];
        uint64_t ts = e->ts - tl->t0;
        fprintf(f, ",\n{\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%llu.%03llu,", kind_name(e->kind),
                e->track == KB_DRIVER ? 0 : e->track + 1, (unsigned long long)(ts / 1000),
                (unsigned long long)(ts % 1000));
        if (e->dur == UINT64_MAX)
            fprintf(f, "\"ph\":\"i\",\"s\":\"t\",\"args\":");
        else
            fprintf(f, "\"ph\":\"X\",\"dur\":%llu.%03llu,\"args\":", (unsigned long long)(e->dur / 1000),
                    (unsigned long long)(e->dur % 1000));
        write_args(f, e);
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    free(tl->ev);
    free(tl);
    return rc;
}
