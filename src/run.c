/*
 * Runs: creating and tearing down a spawn's rank threads, and the driver
 * entry points kb_spawn, kb_start, kb_join and kb_process_context_free.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>

#include "alloc.h"
#include "annotate.h"
#include "run.h"
#include "order.h"
#include "schedule.h"
#include "system.h"
#include "timeline.h"
#include "wait_policy.h"

static void *aligned_zalloc(size_t n)
{
    void *p = NULL;
    if (kb__fault_hit(KB_FAULT_ALLOC) || posix_memalign(&p, KB_CACHELINE, n) != 0)
        return NULL;
    memset(p, 0, n);
    return p;
}

#define KB_STR_(x) #x
#define KB_STR(x)  KB_STR_(x)

/* KB_SCHED_EXHAUSTIVE's index and limit for nprocs ranks. */
static int exhaustive_ok(int nprocs, uint64_t index, uint64_t limit)
{
    unsigned k;
    uint64_t count;
    kb_exhaustive_span(nprocs, limit, &k, &count);
    return limit >= 1 && index < count;
}

/* A non-negative integer from the environment, or -1 when unset. A value
 * that is not one is ignored with a warning (once per spawn). */
static long env_number(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0 || n > (long)UINT_MAX) {
        fprintf(stderr, "kbthreads: ignoring %s=%s (not a non-negative integer)\n", name, v);
        return -1;
    }
    return n;
}

/* The debugging options: the spawn's own values, else the environment's. */
static void resolve_debug_options(struct kb_run *run, const kb_spawn_opts *opts)
{
    long n;
    run->stall_ms = opts ? opts->stall_ms : 0;
    if (!run->stall_ms && (n = env_number("KB_STALL_MS")) > 0)
        run->stall_ms = (unsigned)n;
    run->stall_abort = opts ? opts->stall_abort : 0;
    if (!run->stall_abort && env_number("KB_STALL_ABORT") > 0)
        run->stall_abort = 1;
    run->affinity = opts ? opts->affinity : 0;
    run->crash_report = opts ? opts->crash_report : 0;
    if (!run->crash_report && env_number("KB_CRASH_REPORT") > 0)
        run->crash_report = 1;
    size_t min = (size_t)sysconf(_SC_SIGSTKSZ);
    run->altstack_size = min > 65536 ? min : 65536;
}

/* KB_AFFINITY_SPREAD: the CPUs the driver may run on, in order, which
 * rank r's thread is pinned to round-robin (rank r on cpus[r % ncpus]).
 * 0 or KB_ENOMEM. */
static int resolve_spread(struct kb_run *run)
{
    if (run->affinity != KB_AFFINITY_SPREAD)
        return 0;
    struct kb_cpumask mask;
    int n = kb_sys_get_affinity(&mask) == 0 ? kb_sys_mask_count(&mask) : 0;
    run->cpus = kb_calloc(n > 0 ? (size_t)n : 1, sizeof *run->cpus);
    if (!run->cpus)
        return KB_ENOMEM;
    if (n > 0)
        run->ncpus = kb_sys_mask_cpus(&mask, run->cpus, n);
    else
        run->cpus[run->ncpus++] = kb_sys_current_cpu();
    return 0;
}

/* A path from the options, else the environment's (empty = unset). */
static const char *path_option(const char *given, const char *env)
{
    if (given)
        return given;
    const char *v = getenv(env);
    return v && *v ? v : NULL;
}

/* "a:b[:c]" of unsigned integers (C syntax: 0x.. too) into v[0..max):
 * how many, or -1 when malformed. */
static int parse_numbers(const char *s, uint64_t *v, int max)
{
    int n = 0;
    for (;;) {
        char *end;
        errno = 0;
        if (n == max || *s == '-' || *s == ' ')
            return -1;
        v[n++] = strtoull(s, &end, 0);
        if (errno || end == s)
            return -1;
        if (*end == '\0')
            return n;
        if (*end != ':')
            return -1;
        s = end + 1;
    }
}

/* The schedule from the environment, when the code left it round-robin:
 * the first of KB_SCHED_SEED, KB_SCHED_PCT, KB_SCHED_EXHAUSTIVE that is
 * set and well formed. */
static void schedule_from_env(struct kb_run *run)
{
    static const char *const names[] = {"KB_SCHED_SEED", "KB_SCHED_PCT", "KB_SCHED_EXHAUSTIVE"};
    static const char *const forms[] = {
        "an integer", "seed:depth[:rounds], depth 1.." KB_STR(KB_SCHED_PCT_MAX_DEPTH) ", rounds >= 1",
        "index:limit, limit >= 1"};
    const char *chosen = NULL;
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v)
            continue;
        if (chosen) {
            fprintf(stderr, "kbthreads: ignoring %s=%s (%s is set)\n", names[i], v, chosen);
            continue;
        }
        uint64_t x[3] = {0, 0, 0};
        static const int most[] = {1, 3, 2};
        int n = parse_numbers(v, x, most[i]), ok;
        if (i == 0)
            ok = n == 1;
        else if (i == 1)
            ok = n >= 2 && x[1] >= 1 && x[1] <= KB_SCHED_PCT_MAX_DEPTH && (n == 2 || x[2] >= 1);
        else
            ok = n == 2 && x[1] >= 1;
        if (!ok) {
            fprintf(stderr, "kbthreads: ignoring %s=%s (not %s)\n", names[i], v, forms[i]);
            continue;
        }
        chosen = names[i];
        run->schedule = i == 0 ? KB_SCHED_SEEDED : i == 1 ? KB_SCHED_PCT : KB_SCHED_EXHAUSTIVE;
        if (i < 2) {
            run->seed = x[0];
            run->pct_depth = (unsigned)x[1];
            run->pct_rounds = x[2];
        } else {
            /* modulo the count: one index serves spawns of every size */
            unsigned k;
            uint64_t count;
            kb_exhaustive_span(run->nprocs, x[1], &k, &count);
            run->ex_index = x[0] % count;
            run->ex_limit = x[1];
        }
    }
}

/* The spawns of this process that recorded to KB_RECORD's file (replayed
 * from KB_REPLAY's): the k-th since the variable named that file writes
 * (reads) the file's k-th recording. Spawns on different threads count in
 * the order they start. */
struct env_file {
    pthread_mutex_t lock;
    char path[4096];
    int spawns;
};
static struct env_file env_record = {PTHREAD_MUTEX_INITIALIZER, "", 0};
static struct env_file env_replay = {PTHREAD_MUTEX_INITIALIZER, "", 0};

static int env_spawn_number(struct env_file *e, const char *path)
{
    pthread_mutex_lock(&e->lock);
    if (strncmp(e->path, path, sizeof e->path - 1) != 0) {
        snprintf(e->path, sizeof e->path, "%s", path);
        e->spawns = 0;
    }
    int n = ++e->spawns;
    pthread_mutex_unlock(&e->lock);
    return n;
}

static int open_replay(struct kb_run *run, const kb_spawn_opts *opts)
{
    const char *given = opts ? opts->replay_path : NULL, *path = path_option(given, "KB_REPLAY");
    if (!path)
        return 0;
    int line, spawn = given ? 0 : env_spawn_number(&env_replay, path);
    int rc = kb_replay_open(path, run->nprocs, spawn, &run->replay, &line);
    if (rc == KB_EINVAL)
        fprintf(stderr, "kbthreads: %s:%d: not a kbthreads-schedule 1 recording\n", path, line);
    if (rc == KB_EDIVERGED && run->replay)
        fprintf(stderr, "kbthreads: %s was recorded for %d ranks, not %d\n", path,
                kb_replay_nprocs(run->replay), run->nprocs);
    else if (rc == KB_EDIVERGED)
        fprintf(stderr, "kbthreads: %s holds %d recordings; this is the process's spawn %d\n", path, line,
                spawn);
    return rc;
}

static int open_record(struct kb_run *run, const kb_spawn_opts *opts)
{
    const char *given = opts ? opts->record_path : NULL, *path = path_option(given, "KB_RECORD");
    if (!path)
        return 0;
    int spawn = given ? 0 : env_spawn_number(&env_record, path);
    char *what = kb_order_describe(run);
    if (!what)
        return KB_ENOMEM;
    int rc = kb_record_open(path, spawn > 1, spawn, run->nprocs, what, &run->record);
    free(what);
    return rc;
}

/* The scheduling options (schedule, record, replay, trace, max_rounds,
 * stats). Files are opened here, before any rank runs: 0, a negative errno,
 * KB_EINVAL (a malformed recording) or KB_EDIVERGED (recorded for another
 * nprocs). */
static int resolve_schedule_options(struct kb_run *run, const kb_spawn_opts *opts)
{
    run->schedule = opts ? (int)opts->schedule : KB_SCHED_ROUND_ROBIN;
    run->seed = opts ? opts->seed : 0;
    run->pct_depth = opts ? opts->pct_depth : 0;
    run->pct_rounds = opts ? opts->pct_rounds : 0;
    run->ex_index = opts ? opts->exhaustive_index : 0;
    run->ex_limit = opts ? opts->exhaustive_limit : 0;
    if (run->schedule == KB_SCHED_ROUND_ROBIN)
        schedule_from_env(run);
    if (run->schedule == KB_SCHED_PCT && !run->pct_rounds)
        run->pct_rounds = run->nprocs > 0 ? 2 * (uint64_t)run->nprocs : 1;
    run->rng = run->seed;
    int rc = kb_order_setup(run);
    if (rc != 0)
        return rc;
    run->max_rounds = opts ? opts->max_rounds : 0;
    long n;
    if (!run->max_rounds && (n = env_number("KB_MAX_ROUNDS")) > 0)
        run->max_rounds = (uint64_t)n;
    run->stats = opts ? opts->stats : NULL;
    run->start_ns = kb_now_ns();

    if ((rc = open_replay(run, opts)) != 0 || (rc = open_record(run, opts)) != 0)
        return rc;
    const char *trace = path_option(opts ? opts->trace_path : NULL, "KB_TRACE");
    if (trace && (rc = kb_tl_open(run, trace)) != 0)
        return rc;
    if (run->stats && run->nprocs > 0) {
        run->rank_turns = kb_calloc((size_t)run->nprocs, sizeof *run->rank_turns);
        run->rank_cpu_ns = kb_calloc((size_t)run->nprocs, sizeof *run->rank_cpu_ns);
        if (!run->rank_turns || !run->rank_cpu_ns)
            return KB_ENOMEM;
    }
    run->observe = run->stats || run->tl;
    return 0;
}

/* The run's outputs when it ends: the schedule record, the timeline, the
 * caller's statistics. A file that cannot be written is reported on
 * stderr; the spawn's result stands. */
static void finish_outputs(struct kb_run *run)
{
    int rc;
    if (run->record) {
        rc = kb_record_close(run->record);
        run->record = NULL;
        if (rc != 0)
            fprintf(stderr, "kbthreads: could not write the schedule record: %s\n", kb_strerror(rc));
    }
    if (run->tl && (rc = kb_tl_close(run)) != 0)
        fprintf(stderr, "kbthreads: could not write the trace: %s\n", kb_strerror(rc));
    if (run->stats)
        kb_stats_fill(run, run->stats);
}

static int check_spawn_args(const kb_ctx *ctx, kb_rank_fn fn, int nprocs, const kb_spawn_opts *opts)
{
    if (!ctx || !fn || nprocs < 0)
        return KB_EINVAL;
    if (opts) {
        if (opts->stack_size != 0 && opts->stack_size < (size_t)PTHREAD_STACK_MIN)
            return KB_EINVAL;
        if (opts->cancel_mode != KB_CANCEL_UNWIND && opts->cancel_mode != KB_CANCEL_RETURN)
            return KB_EINVAL;
        if (opts->affinity != 0 && opts->affinity != KB_AFFINITY_ONE_CPU &&
            opts->affinity != KB_AFFINITY_SPREAD)
            return KB_EINVAL;
        if (opts->affinity != 0 && !(kb_features() & KB_FEATURE_AFFINITY))
            return KB_ENOTSUP; /* no way to pin a thread on this system */
        if (opts->schedule != KB_SCHED_ROUND_ROBIN && opts->schedule != KB_SCHED_SEEDED &&
            opts->schedule != KB_SCHED_PCT && opts->schedule != KB_SCHED_EXHAUSTIVE)
            return KB_EINVAL;
        if (opts->schedule == KB_SCHED_PCT &&
            (opts->pct_depth < 1 || opts->pct_depth > KB_SCHED_PCT_MAX_DEPTH))
            return KB_EINVAL;
        if (opts->schedule == KB_SCHED_EXHAUSTIVE &&
            !exhaustive_ok(nprocs, opts->exhaustive_index, opts->exhaustive_limit))
            return KB_EINVAL;
    }
    return 0;
}

/* The checks every driver entry point makes, in the documented precedence
 * (KB_EINVAL was checked by the caller): KB_EPERM from a rank, KB_EBUSY
 * from an engine hook. */
static int check_driver_thread(void)
{
    if (kb_self())
        return KB_EPERM;
    if (kb_in_hook())
        return KB_EBUSY;
    return 0;
}

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
            kb_worker_end(run->ctx, w);
        else
            kb_worker_put(run->ctx, w);
    }
    run->holder = KB_DRIVER;
}

static void run_free(struct kb_run *run)
{
    if (run->errors)
        kb_rank_errors_free(run->errors, run->nerrors);
    if (run->record)
        kb_record_close(run->record);
    if (run->tl)
        kb_tl_close(run);
    kb_replay_free(run->replay);
    kb_order_free(run);
    free(run->live);
    free(run->stop_detail);
    free(run->order);
    free(run->cpus);
    free(run->rank_turns);
    free(run->rank_cpu_ns);
    free(run->ranks);
    free(run);
}

void kb_run_destroy(struct kb_run *run)
{
    kb_registry_remove(run);
    finish_outputs(run);
    kb_wait_nudges(run); /* a finished rank may still be nudging a slot */
    release_workers(run, 0);
    run_free(run);
}

/* Give rank i a worker named for it, with a signal stack if needed. */
static int assign_worker(struct kb_run *run, int i)
{
    struct kb_worker *w;
    int created;
    int rc = kb_worker_get(run->ctx, run->stack_size, &w, &created);
    if (rc != 0)
        return rc;
    w->fresh = created;
    w->rank = &run->ranks[i];
    w->cmd = KB_CMD_RUN;
    w->park_look_ns = run->park_look_ns;
    run->ranks[i].w = w;
    if (run->crash_report && !w->altstack) {
        w->altstack = kb_malloc(run->altstack_size);
        if (!w->altstack)
            return KB_ENOMEM;
        w->altstack_size = run->altstack_size;
    }
    if (w->named_rank != i) {
        /* "kb-rank-" + up to 7 digits fits the 15-byte limit; larger ranks
         * are cut to 15 bytes rather than refused (ERANGE) by the kernel. */
        char name[32];
        snprintf(name, sizeof name, "kb-rank-%d", i);
        kb_sys_name_thread(w->thread, name);
        w->named_rank = i;
    }
    return 0;
}

int kb_run_create(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                  struct kb_run **out)
{
    struct kb_run *run = aligned_zalloc(sizeof *run);
    if (!run)
        return KB_ENOMEM;
    run->ctx = ctx;
    run->fn = fn;
    run->arg = arg;
    run->nprocs = nprocs;
    run->cancel_mode = opts ? opts->cancel_mode : KB_CANCEL_UNWIND;
    run->stack_size = opts ? opts->stack_size : 0;
    resolve_debug_options(run, opts);
    run->holder = KB_DRIVER;
    run->nlive = nprocs;
    if (nprocs > 0) {
        run->ranks = kb_calloc((size_t)nprocs, sizeof *run->ranks);
        run->errors = kb_calloc((size_t)nprocs, sizeof *run->errors);
        run->order = kb_calloc((size_t)nprocs, sizeof *run->order);
        if (!run->ranks || !run->errors || !run->order) {
            run_free(run);
            return KB_ENOMEM;
        }
    }
    for (int i = 0; i < nprocs; i++) {
        struct kb_rank *rk = &run->ranks[i];
        rk->run = run;
        rk->index = i;
    }
    int rc = resolve_schedule_options(run, opts);
    if (rc == 0)
        rc = resolve_spread(run);
    if (rc != 0) {
        run_free(run);
        return rc;
    }
    kb_wait_policy_resolve(run);
    for (int i = 0; i < nprocs; i++) {
        rc = assign_worker(run, i);
        if (rc != 0) {
            /* No rank ran: pooled workers go back, new ones end. */
            release_workers(run, 1);
            run_free(run);
            return rc;
        }
    }
    for (int i = 0; i < nprocs; i++)
        run->ranks[i].w->fresh = 0;
    if (run->affinity == KB_AFFINITY_ONE_CPU)
        run->cpu = kb_sys_current_cpu();
    run->driver_tid = kb_sys_tid();
    kb_hb_sync_word(&run->join_due, sizeof run->join_due);
    if (run->stall_ms)
        kb_watch_setup(run);
    if (run->crash_report)
        kb_crash_report_install();
    kb_registry_add(run);
    /* Every rank exists; bind them all before any runs. */
    for (int i = 0; i < nprocs; i++)
        kb_engine_bind(ctx, i);
    *out = run;
    return 0;
}

/* KB_AFFINITY_ONE_CPU: the driving thread runs on run->cpu while it
 * drives rounds; its own mask is restored afterwards. */
struct driver_pin {
    int on;
    struct kb_cpumask saved;
};

static void pin_driver(const struct kb_run *run, struct driver_pin *p)
{
    p->on = 0;
    if (run->affinity != KB_AFFINITY_ONE_CPU || kb_sys_get_affinity(&p->saved) != 0)
        return;
    p->on = kb_sys_pin_self(run->cpu) == 0;
}

static void unpin_driver(const struct driver_pin *p)
{
    if (p->on)
        kb_sys_set_affinity(&p->saved);
}

int kb_spawn(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
             kb_spawn_error **err)
{
    if (err)
        *err = NULL;
    int rc = check_spawn_args(ctx, fn, nprocs, opts);
    if (rc == 0)
        rc = check_driver_thread();
    if (rc != 0 || (rc = kb_ctx_enter_idle(ctx)) != 0)
        return rc;
    struct kb_run *run;
    rc = kb_run_create(ctx, fn, arg, nprocs, opts, &run);
    if (rc != 0) {
        kb_ctx_exit(ctx);
        return rc;
    }
    ctx->run = run;
    struct driver_pin pin;
    pin_driver(run, &pin);
    while ((rc = kb_sched_round(run)) == 0)
        ;
    unpin_driver(&pin);
    if (rc != 1) { /* KB_ESPAWN, KB_ETIMEDOUT, KB_EDIVERGED */
        if (err)
            *err = kb_spawn_error_build(run);
    } else {
        rc = 0;
    }
    ctx->run = NULL;
    kb_run_destroy(run);
    kb_ctx_exit(ctx);
    return rc;
}

int kb_start(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
             kb_process_context **out)
{
    int rc = check_spawn_args(ctx, fn, nprocs, opts);
    if (rc == 0 && !out)
        rc = KB_EINVAL;
    if (rc == 0)
        rc = check_driver_thread();
    if (rc != 0)
        return rc;
    *out = NULL;
    if ((rc = kb_ctx_enter_idle(ctx)) != 0)
        return rc;
    kb_process_context *pc = kb_calloc(1, sizeof *pc);
    if (!pc) {
        kb_ctx_exit(ctx);
        return KB_ENOMEM;
    }
    struct kb_run *run;
    rc = kb_run_create(ctx, fn, arg, nprocs, opts, &run);
    if (rc != 0) {
        free(pc);
        kb_ctx_exit(ctx);
        return rc;
    }
    pc->ctx = ctx;
    pc->run = run;
    ctx->run = run;
    ctx->pc = pc;
    kb_ctx_exit(ctx);
    *out = pc;
    return 0;
}

static struct timespec deadline_after(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

int kb_join(kb_process_context *pc, long timeout_ms, kb_spawn_error **err)
{
    if (err)
        *err = NULL;
    if (!pc)
        return KB_EINVAL;
    int rc = check_driver_thread();
    if (rc != 0)
        return rc;
    kb_ctx *ctx = pc->ctx;
    if (kb_ctx_enter(ctx) != 0)
        return KB_EBUSY;
    struct kb_run *run = pc->run;
    if (!run) { /* finished earlier: the same result again */
        kb_ctx_exit(ctx);
        return pc->result;
    }
    run->driver_tid = kb_sys_tid();
    /* A timeout is checked after each round's drain, on the driver. Ranks
     * run round boundaries themselves meanwhile, as in kb_spawn, until the
     * driver raises join_due at the deadline (sched.c: driver_wait); a
     * zero timeout raises it at once: exactly one round. */
    run->join_timed = timeout_ms >= 0;
    if (run->join_timed)
        run->join_deadline = deadline_after(timeout_ms);
    ck_pr_store_int(&run->join_due, timeout_ms == 0);
    struct driver_pin pin;
    pin_driver(run, &pin);
    for (;;) {
        rc = kb_sched_round(run);
        if (rc != 0)
            break;
        if (run->join_timed && kb_time_passed(&run->join_deadline)) {
            run->join_timed = 0;
            unpin_driver(&pin);
            if (run->stats)
                kb_stats_fill(run, run->stats);
            kb_ctx_exit(ctx);
            return 0;
        }
    }
    run->join_timed = 0;
    unpin_driver(&pin);
    if (rc != 1 && err)
        *err = kb_spawn_error_build(run);
    pc->result = rc; /* 1, KB_ESPAWN, KB_ETIMEDOUT or KB_EDIVERGED */
    kb_stats_fill(run, &pc->final);
    pc->run = NULL;
    ctx->run = NULL;
    kb_run_destroy(run);
    kb_ctx_exit(ctx);
    return pc->result;
}

static _Noreturn void program_error(const char *what)
{
    fprintf(stderr, "kbthreads: %s; aborting\n", what);
    abort();
}

void kb_process_context_free(kb_process_context *pc)
{
    if (!pc)
        return;
    if (kb_self())
        program_error("kb_process_context_free() called from a rank");
    if (kb_in_hook())
        program_error("kb_process_context_free() called from an engine hook");
    kb_ctx *ctx = pc->ctx;
    if (kb_ctx_enter(ctx) != 0)
        program_error("kb_process_context_free() called while another thread uses its ctx");
    struct kb_run *run = pc->run;
    if (run) {
        /* Live ranks: cancel them in rank order, abort, clear. A run whose
         * ranks all finished (or nprocs 0) needs none of that. */
        if (run->nlive > 0) {
            if (run->record)
                kb_record_end(run->record, "freed");
            kb_sched_cancel_all(run, 1);
        }
        ctx->run = NULL;
        kb_run_destroy(run);
    }
    ctx->pc = NULL;
    kb_ctx_exit(ctx);
    free(pc);
}

int kb_process_context_stats(kb_process_context *pc, kb_spawn_stats *stats)
{
    if (!pc || !stats)
        return KB_EINVAL;
    if (kb_ctx_enter(pc->ctx) != 0)
        return KB_EBUSY;
    if (pc->run)
        kb_stats_fill(pc->run, stats);
    else
        *stats = (kb_spawn_stats){.rounds = pc->final.rounds,
                                  .turns = pc->final.turns,
                                  .handoffs = pc->final.handoffs,
                                  .drains = pc->final.drains,
                                  .engine_waits = pc->final.engine_waits,
                                  .collectives = pc->final.collectives,
                                  .wall_ns = pc->final.wall_ns,
                                  .rank_turns = stats->rank_turns,
                                  .rank_cpu_ns = stats->rank_cpu_ns,
                                  .rank_cap = stats->rank_cap};
    kb_ctx_exit(pc->ctx);
    return 0;
}
