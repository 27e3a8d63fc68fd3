/* SPDX-License-Identifier: MIT */
/*
 * libkbthreads benchmarks, all through the public API (kb_spawn).
 *
 *   kb_bench yield      --n N --m M --reps R [--pin|--spread]   ns per kb_yield
 *   kb_bench wait       --n N --m M --reps R [--pin|--spread]   ns per kb_wait on a fresh handle (a drain
 *                                                                per round)
 *   kb_bench collective --n N --m M --reps R [--pin|--spread]   ns per collective submit + wait
 *   kb_bench yield|wait|collective ... --work NS                 each rank works NS ns before every call
 *                                                                (bench_work.h; figures yield_wNS, ...: the
 *                                                                work is in them)
 *   kb_bench yield|wait|collective ... --join MS                 the same loops driven by kb_start and
 *                                                                kb_join(pc, MS) slices until it returns 1
 *                                                                (impl kbthreads_join), as the Python binding
 *                                                                drives a spawn
 *   kb_bench spawn      --n N --k K --reps R [--pin|--spread]   ns per rank: cold (fresh ctx) and repeated
 *                                                                (one ctx)
 *   kb_bench mem        --n N [--stack BYTES]                   KiB per rank: resident while idle, and peak
 *   kb_bench maxn       --n N [--stack BYTES]                   does a spawn of N ranks (one yield each)
 *                                                                run? exit 0/3
 *   kb_bench sim        --n N --m M --reps R [--pin|--spread]   ns per operation of the simulation-shaped
 *                                                                job (bench/handoff/kb_sim.c), M steps
 *
 * The loops and sim also report the process's CPU time per operation over
 * the same interval (figures yield_cpu, wait_cpu, collective_cpu, sim_cpu).
 * After the timed repetitions a loop makes one more spawn of the same
 * shape with kb_spawn_opts.stats (which times every turn, so it is not
 * timed itself) and reports the wait mode it ended in and the reactive
 * policy's figures (ns per handoff, 0 = not measured):
 * KBI,wait_end,<mode>:<reactive>:<switches>:sleep=<ns>/look=<ns>/nudge=<ns>/spin=<ns>
 *
 * Timing of the loops: every rank makes one warm-up call (its first turn
 * also starts its thread's function), stamps the clock, makes M calls and
 * stamps it again. Only one rank runs at a time, so from the earliest first
 * stamp (rank 0, round 2) to the latest last stamp (rank N-1, round M+2)
 * exactly M whole rounds pass: N * M calls, N * M + M handoffs and M drains.
 * Thread creation, binding and teardown are outside the interval. A warm-up
 * repetition (not reported) comes first; repetitions share one ctx.
 *
 * --pin runs every rank and the driver on the CPU the driver is on: with the
 * library's KB_AFFINITY_ONE_CPU spawn option when the header has it,
 * otherwise by pinning the driver before the first spawn (rank threads
 * inherit its affinity). The KBI line pin_method says which.
 *
 * --spread spawns with the KB_AFFINITY_SPREAD option (rank r on the r-th
 * CPU the driver may use, the driver unpinned, the holder after next woken
 * ahead). Its figures are reported as impl "kbthreads_spread" with pin 0:
 * they compare with the unpinned floors, the threads not sharing one CPU.
 */
#include <kbthreads.h>

#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_work.h"
#include "kb_sim.h"

enum loop_kind { LOOP_YIELD, LOOP_WAIT, LOOP_COLLECTIVE };

struct loop_arg {
    kb_ctx *ctx;
    enum loop_kind kind;
    long n, m;
    uint64_t work;  /* bench_work iterations before each call */
    kb_handle base; /* handles of this repetition: base + 1 + step * n + rank */
    uint64_t *t_first, *t_last;
    uint64_t cpu_first, cpu_last; /* process CPU time at rank 0's first and rank n-1's last stamp */
};

static int loop_step(struct loop_arg *a, int rank, long step)
{
    if (a->work)
        bench_work(a->work);
    kb_handle h = a->base + 1 + (kb_handle)step * (kb_handle)a->n + (kb_handle)rank;
    switch (a->kind) {
    case LOOP_YIELD:
        return kb_yield();
    case LOOP_WAIT:
        return kb_wait(a->ctx, h);
    case LOOP_COLLECTIVE: {
        int rc = kb_collective_submit(a->ctx, h, rank, NULL);
        return rc ? rc : kb_wait(a->ctx, h);
    }
    }
    return KB_EINVAL;
}

static int loop_rank(int rank, void *p)
{
    struct loop_arg *a = p;
    int rc = loop_step(a, rank, 0);
    if (rc)
        return rc;
    if (rank == 0)
        a->cpu_first = bench_cpu_ns();
    a->t_first[rank] = bench_now_ns();
    for (long s = 1; s <= a->m; s++) {
        rc = loop_step(a, rank, s);
        if (rc)
            return rc;
    }
    a->t_last[rank] = bench_now_ns();
    if (rank == a->n - 1)
        a->cpu_last = bench_cpu_ns();
    return 0;
}

/* The engine: every wait completes at once; counted so the hook is real. */
static int count_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    ++*(uint64_t *)self;
    return 0;
}

static uint64_t engine_waits;
static const kb_engine counting_engine = {.self = &engine_waits, .wait = count_wait};

static void spawn_or_die(kb_ctx *ctx, kb_rank_fn fn, void *arg, long n, const kb_spawn_opts *opts)
{
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, fn, arg, (int)n, opts, &err);
    if (rc != 0)
        bench_die("kb_spawn(%ld ranks): %s%s%s", n, kb_strerror(rc), err ? ": " : "",
                  err ? kb_spawn_error_message(err) : "");
}

/* --join: kb_start, then kb_join(pc, ms) until it returns 1. */
static void join_or_die(kb_ctx *ctx, kb_rank_fn fn, void *arg, long n, const kb_spawn_opts *opts, long ms)
{
    kb_process_context *pc;
    int rc = kb_start(ctx, fn, arg, (int)n, opts, &pc);
    if (rc != 0)
        bench_die("kb_start(%ld ranks): %s", n, kb_strerror(rc));
    kb_spawn_error *err = NULL;
    while ((rc = kb_join(pc, ms, &err)) == 0)
        ;
    if (rc != 1)
        bench_die("kb_join(%ld ranks): %s%s%s", n, kb_strerror(rc), err ? ": " : "",
                  err ? kb_spawn_error_message(err) : "");
    kb_process_context_free(pc);
}

static kb_ctx *ctx_or_die(void)
{
    kb_ctx *ctx;
    int rc = kb_ctx_create(&counting_engine, &ctx);
    if (rc)
        bench_die("kb_ctx_create: %s", kb_strerror(rc));
    return ctx;
}

/* The impl name of the loop and spawn figures: kbthreads[_spread][_join]
 * for the futex baton, kbthreads_condvar[...] for a library built with
 * KB_BATON=condvar (bench/bench.mk's second build). */
static const char *affinity_impl(const struct bench_opts *o)
{
    static const char *const names[2][2][2] = {
        {{"kbthreads", "kbthreads_join"}, {"kbthreads_spread", "kbthreads_spread_join"}},
        {{"kbthreads_condvar", "kbthreads_condvar_join"},
         {"kbthreads_condvar_spread", "kbthreads_condvar_spread_join"}},
    };
    int condvar = strcmp(kb_baton_name(), "condvar") == 0;
    return names[condvar][o->spread != 0][o->join_ms >= 0];
}

static void set_pinning(const struct bench_opts *o, kb_spawn_opts *so)
{
    if (o->spread) {
#ifdef KB_AFFINITY_SPREAD
        so->affinity = KB_AFFINITY_SPREAD;
        bench_info("spread_method", "option");
        return;
#else
        bench_die("--spread: this libkbthreads has no KB_AFFINITY_SPREAD");
#endif
    }
    if (!o->pin)
        return;
#ifdef KB_AFFINITY_ONE_CPU
    so->affinity = KB_AFFINITY_ONE_CPU;
    bench_info("pin_method", "option");
#else
    (void)so;
    bench_pin_here();
    bench_info("pin_method", "inherited");
#endif
}

/* One more spawn of the loop, with stats: the wait mode it ends in (a
 * library older than kb_wait_mode, measured as a baseline, has none). */
static void report_wait_end(struct loop_arg *a, const struct bench_opts *o, kb_spawn_opts so)
{
#ifndef KB_WAIT_MODES
    (void)a;
    (void)o;
    (void)so;
#else
    kb_spawn_stats st = {0};
    so.stats = &st;
    if (o->join_ms >= 0)
        join_or_die(a->ctx, loop_rank, a, o->n, &so, o->join_ms);
    else
        spawn_or_die(a->ctx, loop_rank, a, o->n, &so);
    a->base += (kb_handle)(o->m + 1) * (kb_handle)o->n;
    char buf[192];
    int len = snprintf(buf, sizeof buf, "%s:%d:%llu:", kb_wait_mode_name(st.wait_mode), st.wait_reactive,
                       (unsigned long long)st.wait_switches);
    for (int m = 0; m < KB_WAIT_MODES && len > 0 && (size_t)len < sizeof buf; m++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%s=%llu", m ? "/" : "", kb_wait_mode_name(m),
                        (unsigned long long)st.wait_ns[m]);
    bench_info("wait_end", buf);
#endif
}

static void run_loop(const struct bench_opts *o, enum loop_kind kind, const char *base_name)
{
    kb_spawn_opts so = {0};
    set_pinning(o, &so);
    char name[48];
    if (o->work_ns >= 0)
        snprintf(name, sizeof name, "%s_w%ld", base_name, o->work_ns);
    else
        snprintf(name, sizeof name, "%s", base_name);
    struct loop_arg a = {.kind = kind, .n = o->n, .m = o->m, .work = bench_work_iterations(o->work_ns)};
    a.t_first = calloc((size_t)o->n, sizeof *a.t_first);
    a.t_last = calloc((size_t)o->n, sizeof *a.t_last);
    if (!a.t_first || !a.t_last)
        bench_die("out of memory");
    a.ctx = ctx_or_die();
    for (int rep = -1; rep < o->reps; rep++) {
        if (o->join_ms >= 0)
            join_or_die(a.ctx, loop_rank, &a, o->n, &so, o->join_ms);
        else
            spawn_or_die(a.ctx, loop_rank, &a, o->n, &so);
        uint64_t first = UINT64_MAX, last = 0;
        for (long r = 0; r < o->n; r++) {
            first = a.t_first[r] < first ? a.t_first[r] : first;
            last = a.t_last[r] > last ? a.t_last[r] : last;
        }
        a.base += (kb_handle)(o->m + 1) * (kb_handle)o->n;
        uint64_t ops = (uint64_t)o->n * (uint64_t)o->m;
        if (rep >= 0) {
            char cpu_name[64];
            snprintf(cpu_name, sizeof cpu_name, "%s_cpu", name);
            bench_emit(name, affinity_impl(o), o->pin, o->n, rep, (double)(last - first) / (double)ops, "ns",
                       ops);
            bench_emit(cpu_name, affinity_impl(o), o->pin, o->n, rep,
                       (double)(a.cpu_last - a.cpu_first) / (double)ops, "ns", ops);
        }
    }
    report_wait_end(&a, o, so);
    int rc = kb_ctx_destroy(a.ctx);
    if (rc)
        bench_die("kb_ctx_destroy: %s", kb_strerror(rc));
    free(a.t_first);
    free(a.t_last);
}

static int return_at_once(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    return 0;
}

static void run_spawn(const struct bench_opts *o)
{
    kb_spawn_opts so = {0};
    set_pinning(o, &so);
    /* Cold: K spawns per repetition, each on a fresh ctx that is destroyed
     * (its threads joined) in the interval. */
    uint64_t ops = (uint64_t)o->n * (uint64_t)o->k;
    for (int rep = -1; rep < o->reps; rep++) {
        uint64_t t0 = bench_now_ns();
        for (long k = 0; k < o->k; k++) {
            kb_ctx *ctx = ctx_or_die();
            spawn_or_die(ctx, return_at_once, NULL, o->n, &so);
            kb_ctx_destroy(ctx);
        }
        uint64_t t1 = bench_now_ns();
        if (rep >= 0)
            bench_emit("spawn_cold", affinity_impl(o), o->pin, o->n, rep, (double)(t1 - t0) / (double)ops,
                       "ns", ops);
    }
    /* Repeated: K spawns per repetition on one ctx, after a first one. */
    kb_ctx *ctx = ctx_or_die();
    spawn_or_die(ctx, return_at_once, NULL, o->n, &so);
    for (int rep = 0; rep < o->reps; rep++) {
        uint64_t t0 = bench_now_ns();
        for (long k = 0; k < o->k; k++)
            spawn_or_die(ctx, return_at_once, NULL, o->n, &so);
        uint64_t t1 = bench_now_ns();
        bench_emit("spawn_repeat", affinity_impl(o), o->pin, o->n, rep, (double)(t1 - t0) / (double)ops, "ns",
                   ops);
    }
    kb_ctx_destroy(ctx);
}

static long idle_rss_kib = -1, idle_kstack_kib = -1;

/* Rank 0 reads the resident size at its second turn: every other rank has
 * run once and is suspended in kb_yield (idle). */
static int yield_once(int rank, void *arg)
{
    int measure = arg != NULL;
    int rc = kb_yield();
    if (rank == 0 && measure) {
        idle_rss_kib = bench_status_kib("VmRSS");
        idle_kstack_kib = bench_proc_kib("/proc/meminfo", "KernelStack");
    }
    return rc;
}

static const char *impl_name(long stack, char *buf, size_t cap)
{
    if (stack == 0)
        return "kbthreads";
    snprintf(buf, cap, "kbthreads-stack%ldk", stack / 1024);
    return buf;
}

/* Resident memory of idle ranks (user pages: the process's VmRSS), its peak
 * (VmHWM) and, for scale, the kernel stacks they pin (KernelStack in
 * /proc/meminfo: system-wide, so other activity on the machine adds noise),
 * all as deltas from before the spawn, per rank. */
static void run_mem(const struct bench_opts *o)
{
    kb_spawn_opts so = {.stack_size = (size_t)o->stack};
    char buf[64];
    const char *impl = impl_name(o->stack, buf, sizeof buf);
    long base = bench_status_kib("VmRSS");
    long kbase = bench_proc_kib("/proc/meminfo", "KernelStack");
    kb_ctx *ctx = ctx_or_die();
    spawn_or_die(ctx, yield_once, &idle_rss_kib, o->n, &so);
    long hwm = bench_status_kib("VmHWM");
    kb_ctx_destroy(ctx);
    if (base < 0 || hwm < 0 || idle_rss_kib < 0)
        bench_die("cannot read /proc/self/status");
    if (hwm < idle_rss_kib)
        hwm = idle_rss_kib; /* the high-water mark is updated lazily */
    double n = (double)o->n;
    bench_emit("mem_idle", impl, 0, o->n, 0, (double)(idle_rss_kib - base) / n, "KiB", (uint64_t)o->n);
    bench_emit("mem_peak", impl, 0, o->n, 0, (double)(hwm - base) / n, "KiB", (uint64_t)o->n);
    if (kbase >= 0 && idle_kstack_kib >= 0)
        bench_emit("mem_kstack", impl, 0, o->n, 0, (double)(idle_kstack_kib - kbase) / n, "KiB",
                   (uint64_t)o->n);
}

static int run_maxn(const struct bench_opts *o)
{
    kb_spawn_opts so = {.stack_size = (size_t)o->stack};
    kb_ctx *ctx = ctx_or_die();
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, yield_once, NULL, (int)o->n, &so, &err);
    char buf[256];
    snprintf(buf, sizeof buf, "%ld:%d:%s", o->n, rc, kb_strerror(rc));
    bench_info("maxn_try", buf);
    kb_spawn_error_free(err);
    kb_ctx_destroy(ctx);
    return rc == 0 ? 0 : 3;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    if (!o.mode)
        bench_die(
            "usage: kb_bench yield|wait|collective|spawn|mem|maxn|sim [--n N] [--m M] [--k K] [--reps R] "
            "[--pin | --spread] [--join MS] [--work NS] [--stack BYTES]");
    if (o.join_ms >= 0 && strcmp(o.mode, "yield") != 0 && strcmp(o.mode, "wait") != 0 &&
        strcmp(o.mode, "collective") != 0)
        bench_die("--join applies to yield, wait and collective, not %s", o.mode);
    if (o.work_ns >= 0 && strcmp(o.mode, "yield") != 0 && strcmp(o.mode, "wait") != 0 &&
        strcmp(o.mode, "collective") != 0)
        bench_die("--work applies to yield, wait and collective, not %s", o.mode);
    if (o.spread && (strcmp(o.mode, "mem") == 0 || strcmp(o.mode, "maxn") == 0))
        bench_die("--spread applies to yield, wait, collective and spawn, not %s", o.mode);
    bench_info("kb_version", kb_version());
    if (strcmp(o.mode, "yield") == 0)
        run_loop(&o, LOOP_YIELD, "yield");
    else if (strcmp(o.mode, "wait") == 0)
        run_loop(&o, LOOP_WAIT, "wait");
    else if (strcmp(o.mode, "collective") == 0)
        run_loop(&o, LOOP_COLLECTIVE, "collective");
    else if (strcmp(o.mode, "spawn") == 0)
        run_spawn(&o);
    else if (strcmp(o.mode, "mem") == 0)
        run_mem(&o);
    else if (strcmp(o.mode, "maxn") == 0)
        return run_maxn(&o);
    else if (strcmp(o.mode, "sim") == 0) {
        kb_spawn_opts so = {0};
        set_pinning(&o, &so);
        run_sim(&o, &so, affinity_impl(&o));
    } else
        bench_die("unknown mode %s", o.mode);
    return 0;
}
