/* SPDX-License-Identifier: MIT */
/*
 * A spawn's options and the environment variables that stand in for them
 * (spawn_options.h).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "run.h"
#include "sched_delays.h"
#include "spawn_options.h"
#include "strategy.h"
#include "system.h"

#define KB_STR_(x) #x
#define KB_STR(x)  KB_STR_(x)

/* KB_SCHED_EXHAUSTIVE's index and limit for nprocs ranks. */
static int exhaustive_ok(int nprocs, uint64_t index, uint64_t limit)
{
    unsigned k;
    uint64_t count;
    kb__exhaustive_span(nprocs, limit, &k, &count);
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
    run->opt.stall_ms = opts ? opts->stall_ms : 0;
    if (!run->opt.stall_ms && (n = env_number("KB_STALL_MS")) > 0)
        run->opt.stall_ms = (unsigned)n;
    run->opt.stall_abort = opts ? opts->stall_abort : 0;
    if (!run->opt.stall_abort && env_number("KB_STALL_ABORT") > 0)
        run->opt.stall_abort = 1;
    run->opt.affinity = opts ? opts->affinity : 0;
    run->opt.crash_report = opts ? opts->crash_report : 0;
    if (!run->opt.crash_report && env_number("KB_CRASH_REPORT") > 0)
        run->opt.crash_report = 1;
    /* POSIX's SIGSTKSZ (glibc 2.34+ with _GNU_SOURCE reads the kernel's
     * figure through sysconf; elsewhere a constant). */
    size_t min = (size_t)SIGSTKSZ;
    run->opt.altstack_size = min > 65536 ? min : 65536;
}

/* KB_AFFINITY_SPREAD: the CPUs the driver may run on, in order, which
 * rank r's thread is pinned to round-robin (rank r on cpus[r % ncpus]).
 * 0 or KB_ENOMEM. */
static int resolve_spread(struct kb_run *run)
{
    if (run->opt.affinity != KB_AFFINITY_SPREAD)
        return 0;
    struct kb_cpumask mask;
    int n = kb__sys_get_affinity(&mask) == 0 ? kb__sys_mask_count(&mask) : 0;
    run->opt.cpus = kb__calloc(n > 0 ? (size_t)n : 1, sizeof *run->opt.cpus);
    if (!run->opt.cpus)
        return KB_ENOMEM;
    if (n > 0)
        run->opt.ncpus = kb__sys_mask_cpus(&mask, run->opt.cpus, n);
    else
        run->opt.cpus[run->opt.ncpus++] = kb__sys_current_cpu();
    return 0;
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

/* The environment's schedule variables, in the order they are tried. */
static const struct {
    const char *name;
    int kind;         /* kb_schedule */
    int most;         /* numbers it holds at most */
    const char *form; /* what a well-formed value is, for the warning */
} schedule_vars[] = {
    {"KB_SCHED_SEED", KB_SCHED_SEEDED, 1, "an integer"},
    {"KB_SCHED_PCT", KB_SCHED_PCT, 3,
     "seed:depth[:rounds], depth 1.." KB_STR(KB_SCHED_PCT_MAX_DEPTH) ", rounds >= 1"},
    {"KB_SCHED_EXHAUSTIVE", KB_SCHED_EXHAUSTIVE, 2, "index:limit, limit >= 1"},
    /* read by take_env_delays, not parse_numbers */
    {"KB_SCHED_DELAYS", KB_SCHED_DELAYS, 0,
     "turn numbers from 1 in ascending order, comma-separated, one list per spawn separated by /"},
};

/* Is x[0..n) a well-formed value of a variable for this kind? */
static int schedule_value_ok(int kind, const uint64_t *x, int n)
{
    if (kind == KB_SCHED_SEEDED)
        return n == 1;
    if (kind == KB_SCHED_PCT)
        return n >= 2 && x[1] >= 1 && x[1] <= KB_SCHED_PCT_MAX_DEPTH && (n == 2 || x[2] >= 1);
    return n == 2 && x[1] >= 1;
}

/* Take a well-formed value x as the run's strategy. */
static void schedule_take(struct kb_run *run, int kind, const uint64_t *x)
{
    struct kb_strategy *st = &run->strategy;
    st->kind = kind;
    if (kind != KB_SCHED_EXHAUSTIVE) {
        st->seed = x[0];
        st->pct_depth = (unsigned)x[1];
        st->pct_rounds = x[2];
        return;
    }
    /* modulo the count: one index serves spawns of every size */
    unsigned k;
    uint64_t count;
    kb__exhaustive_span(run->nprocs, x[1], &k, &count);
    st->ex_index = x[0] % count;
    st->ex_limit = x[1];
}

/* KB_SCHED_DELAYS=v as the run's strategy, with the list of the spawn's
 * number among those that read v: 1 taken, 0 malformed (ignored with a
 * warning; the spawn is not counted), or KB_ENOMEM. */
static int take_env_delays(struct kb_run *run, const char *name, const char *v, const char *form)
{
    char why[160];
    uint64_t *turns;
    size_t n;
    int rc = kb__delays_parse(v, 1, &turns, &n, why, sizeof why); /* checks every list */
    if (rc == 0) {
        free(turns);
        rc = kb__delays_parse(v, kb__delays_env_spawn(v), &turns, &n, why, sizeof why);
    }
    if (rc == KB_EINVAL) {
        fprintf(stderr, "kbthreads: ignoring %s=%s (%s; want %s)\n", name, v, why, form);
        return 0;
    }
    if (rc != 0)
        return rc;
    run->strategy.kind = KB_SCHED_DELAYS;
    run->strategy.dl_turns = turns;
    run->strategy.dl_n = n;
    return 1;
}

/* The schedule from the environment, when the code left it round-robin:
 * the first of KB_SCHED_SEED, KB_SCHED_PCT, KB_SCHED_EXHAUSTIVE,
 * KB_SCHED_DELAYS that is set and well formed. The others are ignored with
 * a warning. 0 or KB_ENOMEM. */
static int schedule_from_env(struct kb_run *run)
{
    const char *chosen = NULL;
    for (size_t i = 0; i < sizeof schedule_vars / sizeof schedule_vars[0]; i++) {
        const char *name = schedule_vars[i].name, *v = getenv(name);
        if (!v || !*v)
            continue;
        if (chosen) {
            fprintf(stderr, "kbthreads: ignoring %s=%s (%s is set)\n", name, v, chosen);
            continue;
        }
        if (schedule_vars[i].kind == KB_SCHED_DELAYS) {
            int rc = take_env_delays(run, name, v, schedule_vars[i].form);
            if (rc < 0)
                return rc;
            if (rc == 1)
                chosen = name;
            continue;
        }
        uint64_t x[3] = {0, 0, 0};
        int n = parse_numbers(v, x, schedule_vars[i].most);
        if (!schedule_value_ok(schedule_vars[i].kind, x, n)) {
            fprintf(stderr, "kbthreads: ignoring %s=%s (not %s)\n", name, v, schedule_vars[i].form);
            continue;
        }
        chosen = name;
        schedule_take(run, schedule_vars[i].kind, x);
    }
    return 0;
}

/* kb_spawn_opts.delays (checked by kb__spawn_args_check), copied: the
 * caller's array need not outlive kb_spawn / kb_start. 0 or KB_ENOMEM. */
static int take_opts_delays(struct kb_strategy *st, const kb_spawn_opts *opts)
{
    st->dl_n = opts->ndelays;
    if (st->dl_n == 0)
        return 0;
    st->dl_turns = kb__malloc(st->dl_n * sizeof *st->dl_turns);
    if (!st->dl_turns)
        return KB_ENOMEM;
    memcpy(st->dl_turns, opts->delays, st->dl_n * sizeof *st->dl_turns);
    return 0;
}

/* The strategy: the options', else the environment's when the code left
 * it round-robin; then its draws. 0 or KB_ENOMEM. */
static int resolve_strategy(struct kb_run *run, const kb_spawn_opts *opts)
{
    struct kb_strategy *st = &run->strategy;
    st->kind = opts ? (int)opts->schedule : KB_SCHED_ROUND_ROBIN;
    st->seed = opts ? opts->seed : 0;
    st->pct_depth = opts ? opts->pct_depth : 0;
    st->pct_rounds = opts ? opts->pct_rounds : 0;
    st->ex_index = opts ? opts->exhaustive_index : 0;
    st->ex_limit = opts ? opts->exhaustive_limit : 0;
    int rc = st->kind == KB_SCHED_DELAYS ? take_opts_delays(st, opts) : 0;
    if (rc == 0 && st->kind == KB_SCHED_ROUND_ROBIN)
        rc = schedule_from_env(run);
    if (rc != 0)
        return rc;
    if (st->kind == KB_SCHED_PCT && !st->pct_rounds)
        st->pct_rounds = run->nprocs > 0 ? 2 * (uint64_t)run->nprocs : 1;
    st->rng = st->seed;
    return kb__order_setup(run);
}

int kb__run_options_resolve(struct kb_run *run, const kb_spawn_opts *opts)
{
    resolve_debug_options(run, opts);
    int rc = resolve_strategy(run, opts);
    if (rc != 0)
        return rc;
    long n;
    run->opt.max_rounds = opts ? opts->max_rounds : 0;
    if (!run->opt.max_rounds && (n = env_number("KB_MAX_ROUNDS")) > 0)
        run->opt.max_rounds = (uint64_t)n;
    run->opt.stats = opts ? opts->stats : NULL;
    return resolve_spread(run);
}

int kb__spawn_args_check(const kb_ctx *ctx, kb_rank_fn fn, int nprocs, const kb_spawn_opts *opts)
{
    if (!ctx || !fn)
        return KB_EINVAL;
    return kb__spawn_opts_check(nprocs, opts);
}

int kb__spawn_opts_check(int nprocs, const kb_spawn_opts *opts)
{
    if (nprocs < 0)
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
            opts->schedule != KB_SCHED_PCT && opts->schedule != KB_SCHED_EXHAUSTIVE &&
            opts->schedule != KB_SCHED_DELAYS)
            return KB_EINVAL;
        if (opts->schedule == KB_SCHED_PCT &&
            (opts->pct_depth < 1 || opts->pct_depth > KB_SCHED_PCT_MAX_DEPTH))
            return KB_EINVAL;
        if (opts->schedule == KB_SCHED_EXHAUSTIVE &&
            !exhaustive_ok(nprocs, opts->exhaustive_index, opts->exhaustive_limit))
            return KB_EINVAL;
        if (opts->schedule == KB_SCHED_DELAYS && !kb__delays_ok(opts->delays, opts->ndelays))
            return KB_EINVAL;
    }
    return 0;
}
