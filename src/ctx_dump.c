/* SPDX-License-Identifier: MIT */
/*
 * kb_ctx_dump: a line per rank of a ctx's live spawn, each followed by the
 * rank's frames, which its own thread writes (rank_frames.c). Written for
 * a binding that must end a process whose running rank does not answer an
 * interrupt (the Python binding's second Ctrl-C): it reads the run from a
 * thread that may not hold the baton, under the ctx's run_lock, which
 * keeps the run from being freed meanwhile.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "ctx.h"
#include "rank_frames.h"
#include "run.h"
#include "worker.h"

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(int fd, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    for (size_t done = 0; done < len;) {
        ssize_t w = write(fd, line + done, len - done);
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

/* Where rank i is, in the words of kb ranks. */
static const char *where(const struct kb_rank *rk, int i, int holder, int running, char *buf, size_t size)
{
    int state = ck_pr_load_int((int *)&rk->state);
    if (state == KB_RS_NEW)
        return "not started";
    if (state == KB_RS_FINISHED)
        return "finished";
    if (i == running)
        return "holds the baton, running its own code";
    if (i == holder)
        return "holds the baton, in the library";
    switch (ck_pr_load_int((int *)&rk->susp)) {
    case KB_SUSP_YIELD:
        return "suspended in kb_yield";
    case KB_SUSP_WAIT:
        snprintf(buf, size, "suspended in kb_wait on handle %llu", (unsigned long long)rk->susp_handle);
        return buf;
    case KB_SUSP_BARRIER:
        return "suspended in kb_barrier";
    default:
        return "between turns";
    }
}

int kb_ctx_dump(kb_ctx *ctx, int fd, unsigned flags)
{
    if (!ctx || fd < 0 || (flags & ~(KB_DUMP_C_FRAMES | KB_DUMP_HOLDER_C_FRAMES)))
        return KB_EINVAL;
    kb__frames_install();
    pthread_mutex_lock(&ctx->run_lock);
    struct kb_run *run = ctx->run;
    if (!run) {
        pthread_mutex_unlock(&ctx->run_lock);
        say(fd, "kbthreads: no spawn runs on this ctx\n");
        return 0;
    }
    int holder = ck_pr_load_int(&run->holder);
    int running = ck_pr_load_int(&ctx->running);
    if (holder == KB_DRIVER)
        say(fd, "kbthreads: a spawn of %d ranks; the driver holds the baton\n", run->nprocs);
    else
        say(fd, "kbthreads: a spawn of %d ranks; rank %d holds the baton\n", run->nprocs, holder);
    for (int i = 0; i < run->nprocs; i++) {
        const struct kb_rank *rk = &run->ranks[i];
        char buf[96];
        const char *text = where(rk, i, holder, running, buf, sizeof buf);
        struct kb_worker *w = rk->w;
        int tid = w ? ck_pr_load_int(&w->tid) : 0;
        if (tid > 0)
            say(fd, "kbthreads: rank %d (kb-rank-%d, LWP %d): %s\n", i, i, tid, text);
        else
            say(fd, "kbthreads: rank %d (kb-rank-%d): %s\n", i, i, text);
        int state = ck_pr_load_int((int *)&rk->state);
        if (state != KB_RS_STARTED || !w)
            continue;
        int c_frames = (flags & KB_DUMP_C_FRAMES) || ((flags & KB_DUMP_HOLDER_C_FRAMES) && i == holder);
        if (kb__frames_of_thread(w->thread, fd, c_frames) != 0)
            say(fd, "  (its thread did not answer within 2 s)\n");
    }
    pthread_mutex_unlock(&ctx->run_lock);
    return 0;
}
