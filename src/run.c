/* SPDX-License-Identifier: MIT */
/*
 * A run's life: creating it (its options resolved, its files opened, a
 * worker thread bound to every rank) and destroying it (its outputs
 * written, its workers returned to the ctx's pool). The entry points that
 * drive it are in spawn.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "annotate.h"
#include "crash.h"
#include "error.h"
#include "registry.h"
#include "round_loop.h"
#include "run.h"
#include "run_files.h"
#include "spawn_options.h"
#include "stats.h"
#include "strategy.h"
#include "system.h"
#include "wait_policy.h"
#include "watchdog.h"

/* Hand every rank's worker back, in reverse rank order so that the next
 * spawn's rank i gets the thread already named for rank i: to the ctx's
 * pool (it is still waiting on its slot), or ended and joined when it was
 * created by a spawn that failed to start (end_fresh). Workers whose rank
 * unwound were joined and freed by the scheduler already (rk->w NULL). */
static void release_workers(struct kb_run *run, int end_fresh)
{
    for (int i = run->nprocs - 1; i >= 0; i--) {
        struct kb_worker *w = run->ranks ? run->ranks[i].w : NULL;
        if (!w)
            continue;
        run->ranks[i].w = NULL;
        if (w->exited || (end_fresh && w->fresh))
            kb__worker_end(run->ctx, w);
        else
            kb__worker_put(run->ctx, w);
    }
    run->holder = KB_DRIVER;
}

static void run_free(struct kb_run *run)
{
    if (run->failure.errors)
        kb__rank_errors_free(run->failure.errors, run->failure.nerrors);
    kb__run_files_free(run);
    kb__order_free(run);
    free(run->failure.live);
    free(run->failure.detail);
    free(run->order);
    free(run->opt.cpus);
    free(run->counters.rank_turns);
    free(run->counters.rank_cpu_ns);
    kb__wait_policy_destroy(run->wait);
    free(run->ranks);
    free(run);
}

void kb__run_destroy(struct kb_run *run)
{
    kb__registry_remove(run);
    kb__run_files_finish(run);
    if (run->opt.stats)
        kb__stats_fill(run, run->opt.stats);
    kb__wait_nudges(run); /* a finished rank may still be nudging a slot */
    release_workers(run, 0);
    run_free(run);
}

/* Give rank i a worker named for it, with a signal stack if needed. */
static int assign_worker(struct kb_run *run, int i)
{
    struct kb_worker *w;
    int created;
    int rc = kb__worker_get(run->ctx, run->stack_size, &w, &created);
    if (rc != 0)
        return rc;
    w->fresh = created;
    w->rank = &run->ranks[i];
    w->cmd = KB_CMD_RUN;
    w->park_look_ns = kb__wait_park_ns(run->wait);
    run->ranks[i].w = w;
    if (run->opt.crash_report && !w->altstack) {
        w->altstack = kb__malloc(run->opt.altstack_size);
        if (!w->altstack)
            return KB_ENOMEM;
        w->altstack_size = run->opt.altstack_size;
    }
    if (w->named_rank != i) {
        /* "kb-rank-" + up to 7 digits fits the 15-byte limit; larger ranks
         * are cut to 15 bytes rather than refused (ERANGE) by the kernel. */
        char name[32];
        snprintf(name, sizeof name, "kb-rank-%d", i);
        kb__sys_name_thread(w->thread, name);
        w->named_rank = i;
    }
    return 0;
}

/* A run of nprocs ranks with nothing resolved yet, or NULL. */
static struct kb_run *run_alloc(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts)
{
    struct kb_run *run = kb__zalloc_aligned(KB_CACHELINE, sizeof *run);
    if (!run)
        return NULL;
    run->ctx = ctx;
    run->fn = fn;
    run->arg = arg;
    run->nprocs = nprocs;
    run->cancel_mode = opts ? opts->cancel_mode : KB_CANCEL_UNWIND;
    run->stack_size = opts ? opts->stack_size : 0;
    run->holder = KB_DRIVER;
    run->nlive = nprocs;
    if (nprocs > 0) {
        run->ranks = kb__calloc((size_t)nprocs, sizeof *run->ranks);
        run->failure.errors = kb__calloc((size_t)nprocs, sizeof *run->failure.errors);
        run->order = kb__calloc((size_t)nprocs, sizeof *run->order);
        if (!run->ranks || !run->failure.errors || !run->order) {
            run_free(run);
            return NULL;
        }
    }
    for (int i = 0; i < nprocs; i++) {
        run->ranks[i].run = run;
        run->ranks[i].index = i;
    }
    return run;
}

/* Everything a run needs before its ranks get threads: its options, its
 * files, its counters and its wait policy. 0 or an error of
 * kb__run_create. */
static int run_resolve(struct kb_run *run, const kb_spawn_opts *opts)
{
    int rc = kb__run_options_resolve(run, opts);
    if (rc == 0)
        rc = kb__run_files_open(run, opts);
    if (rc == 0)
        rc = kb__counters_init(run);
    if (rc != 0)
        return rc;
    run->opt.observe = run->opt.stats || run->files.tl;
    struct kb_wait_setup ws = {.nprocs = run->nprocs,
                               .affinity = run->opt.affinity,
                               .spread_ncpus = run->opt.ncpus,
                               .memory = &run->ctx->wait_memory};
    return kb__wait_policy_create(&ws, &run->wait);
}

/* Give every rank a worker; on failure none ran: pooled workers go back,
 * new ones end. */
static int assign_workers(struct kb_run *run)
{
    for (int i = 0; i < run->nprocs; i++) {
        int rc = assign_worker(run, i);
        if (rc != 0) {
            release_workers(run, 1);
            return rc;
        }
    }
    for (int i = 0; i < run->nprocs; i++)
        run->ranks[i].w->fresh = 0;
    return 0;
}

int kb__run_create(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                   struct kb_run **out)
{
    struct kb_run *run = run_alloc(ctx, fn, arg, nprocs, opts);
    if (!run)
        return KB_ENOMEM;
    int rc = run_resolve(run, opts);
    if (rc == 0)
        rc = assign_workers(run);
    if (rc != 0) {
        run_free(run);
        return rc;
    }
    if (run->opt.affinity == KB_AFFINITY_ONE_CPU)
        run->opt.cpu = kb__sys_current_cpu();
    run->driver_tid = kb__sys_tid();
    kb__hb_sync_word(&run->join.due, sizeof run->join.due);
    if (run->opt.stall_ms)
        kb__watch_setup(run);
    if (run->opt.crash_report)
        kb__crash_report_install();
    kb__registry_add(run);
    /* Every rank exists; bind them all before any runs. */
    for (int i = 0; i < nprocs; i++)
        kb__engine_bind(ctx, i);
    *out = run;
    return 0;
}
