/* SPDX-License-Identifier: MIT */
/*
 * demo_common.c - what kbdemo (C API) and kbdemo_cpp (C++ layer) share: the
 * model, the timeline, the result check, the command line, the checkpoint
 * and the report. See demo_common.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_common.h"

/* ------------------------------------------------------------------------ */
/* The model.                                                               */
/* ------------------------------------------------------------------------ */

uint64_t compute_ns(int r, int s)
{
    return 2000000ull + (uint64_t)((r * 5 + s * 3) % 7) * 120000ull;
}

uint64_t chunk_bytes(int n, int c)
{
    uint64_t base = GRAD_BYTES / (uint64_t)n, extra = GRAD_BYTES % (uint64_t)n;
    return base + ((uint64_t)c < extra ? 1u : 0u);
}

static int64_t initial_value(int r, size_t i)
{
    return (int64_t)r * 10 + (int64_t)i;
}
int64_t contribution(int r, int s, size_t i)
{
    return (int64_t)(r + 1) * 1000003 + (int64_t)s * 101 + (int64_t)i * 7;
}
int64_t loss_of(int r)
{
    return 1000 + 17 * (int64_t)r;
}

void record(demo *d, int rank, uint64_t start, const char *fmt, ...)
{
    rank_state *rs = &d->rs[rank];
    if (rs->nevents == rs->cap_events) /* sized for the whole program up front */
        return;
    demo_event *ev = &rs->events[rs->nevents];
    ev->start = start;
    ev->end = des_clock(d->eng, rank);
    ev->rank = rank;
    ev->seq = (unsigned)rs->nevents++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev->what, sizeof ev->what, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* The result check and the output.                                         */
/* ------------------------------------------------------------------------ */

/* After the barrier every rank finished its all-reduce: compare this rank's
 * result with the closed sum and with the left neighbour's copy. */
int demo_check(const demo *d, int rank, char *msg, size_t cap)
{
    int n = d->nranks;
    const rank_state *rs = &d->rs[rank], *left = &d->rs[mod(rank - 1, n)];
    size_t nelems = (size_t)n * ELEMS_PER_CHUNK;
    for (size_t i = 0; i < nelems; i++) {
        int64_t want = 0;
        for (int r = 0; r < n; r++) {
            want += initial_value(r, i);
            for (int s = 1; s <= d->steps; s++)
                want += contribution(r, s, i);
        }
        if (rs->grad[i] != want || left->grad[i] != want) {
            snprintf(msg, cap,
                     "rank %d: element %zu is %" PRId64 " (left neighbour %" PRId64 "), expected %" PRId64,
                     rank, i, rs->grad[i], left->grad[i], want);
            return DEMO_ECHECK;
        }
    }
    int64_t want_loss = 0;
    for (int r = 0; r < n; r++)
        want_loss += loss_of(r);
    if (rs->loss != want_loss) {
        snprintf(msg, cap, "rank %d: loss sum %" PRId64 ", expected %" PRId64, rank, rs->loss, want_loss);
        return DEMO_ECHECK;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Output.                                                                  */
/* ------------------------------------------------------------------------ */

/* ns as microseconds with three decimals, from integers only. */
static const char *us(char buf[32], uint64_t ns)
{
    snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, ns / 1000u, ns % 1000u);
    return buf;
}

static int event_order(const void *pa, const void *pb)
{
    const demo_event *a = pa, *b = pb;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int print_report(const demo *d)
{
    int n = d->nranks;
    size_t total = 0;
    for (int r = 0; r < n; r++)
        total += d->rs[r].nevents;
    demo_event *all = malloc((total ? total : 1) * sizeof *all);
    if (all == NULL) {
        fprintf(stderr, "%s: out of memory\n", d->prog);
        return 1;
    }
    size_t k = 0;
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < d->rs[r].nevents; i++)
            all[k++] = d->rs[r].events[i];
    qsort(all, total, sizeof *all, event_order);

    char b1[32], b2[32], b3[32];
    printf("kbdemo: ring all-reduce over %d rank%s after %d compute step%s\n", n, n == 1 ? "" : "s", d->steps,
           d->steps == 1 ? "" : "s");
    printf("model: %" PRIu64 " MiB of gradients in %d chunk%s; links %" PRIu64
           " GB/s, %s us latency; reductions at %" PRIu64 " GB/s\n",
           GRAD_BYTES >> 20, n, n == 1 ? "" : "s", LINK_BYTES_PER_US / 1000u, us(b1, LINK_LATENCY_NS),
           REDUCE_BYTES_PER_NS);
    printf("\ntimeline (simulated microseconds; ordered by end time, then rank)\n");
    printf("%12s %12s  %4s  %s\n", "start", "end", "rank", "event");
    for (size_t i = 0; i < total; i++)
        printf("%12s %12s  %4d  %s\n", us(b1, all[i].start), us(b2, all[i].end), all[i].rank, all[i].what);
    free(all);

    printf("\nper rank (simulated microseconds)\n");
    printf("%4s %12s %12s %12s\n", "rank", "busy", "comm+idle", "finish");
    for (int r = 0; r < n; r++) {
        uint64_t fin = des_clock(d->eng, r), busy = d->rs[r].busy_ns;
        printf("%4d %12s %12s %12s\n", r, us(b1, busy), us(b2, fin - busy), us(b3, fin));
    }

    des_stats st;
    des_engine_stats(d->eng, &st);
    printf("\ncheck: every rank holds the same %zu reduced gradient values; loss sum %" PRId64 "\n",
           (size_t)n * ELEMS_PER_CHUNK, d->rs[0].loss);
    printf("engine: %" PRIu64 " ops, %" PRIu64 " completions; wait hook calls: %" PRIu64 " queued, %" PRIu64
           " collective, %" PRIu64 " driver; %" PRIu64 " completed while waiting for another\n",
           st.ops, st.events, st.waits[KB_WAIT_QUEUED], st.waits[KB_WAIT_COLLECTIVE],
           st.waits[KB_WAIT_DRIVER], st.completed_early);
    printf("total simulated time: %s us\n", us(b1, des_makespan(d->eng)));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Command line.                                                            */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [--ranks N] [--steps S] [--trace FILE] [--stats] [--seed N] [--help]\n"
            "Simulate S compute steps, a ring all-reduce of the gradients and a loss\n"
            "all-reduce over N ranks on libkbthreads, and print the simulated timeline.\n"
            "  --ranks N     number of ranks, 1..%d (default %d)\n"
            "  --steps S     compute steps before the all-reduce, 0..%d (default %d)\n"
            "  --trace FILE  write the scheduling timeline as Chrome trace-event JSON\n"
            "                (open it in Perfetto or chrome://tracing)\n"
            "  --stats       print the scheduler's statistics (wall and CPU times vary)\n"
            "  --seed N      visit the ranks of each round in an order drawn from N;\n"
            "                the simulated results are the same (only the engine's\n"
            "                wait-hook call counts differ)\n"
            "  --help        show this help\n",
            prog, MAX_RANKS, DEFAULT_RANKS, MAX_STEPS, DEFAULT_STEPS);
}

/* A decimal integer in [lo, hi]; 0 (with a message) otherwise. */
static int parse_int(const char *prog, const char *opt, const char *s, int lo, int hi, int *out)
{
    if (s == NULL) {
        fprintf(stderr, "%s: %s needs a value\n", prog, opt);
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t' || s[0] == '+') {
        fprintf(stderr, "%s: %s: '%s' is not a decimal integer\n", prog, opt, s);
        return 0;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "%s: %s: %s is out of range %d..%d\n", prog, opt, s, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* "--opt VALUE" or "--opt=VALUE" for option name at argv[*i]: the value
 * (NULL with a message when missing), or NULL without a message when
 * argv[*i] is another option. */
static const char *option_value(const char *prog, int argc, char **argv, int *i, const char *name,
                                int *matched)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    *matched = 0;
    if (strcmp(a, name) == 0) {
        *matched = 1;
        if (*i + 1 < argc)
            return argv[++*i];
        fprintf(stderr, "%s: %s needs a value\n", prog, name);
        return NULL;
    }
    if (strncmp(a, name, len) == 0 && a[len] == '=') {
        *matched = 1;
        return a + len + 1;
    }
    return NULL;
}

/* Accepts "--opt VALUE" and "--opt=VALUE". 1 parsed, 0 help, -1 error. */
static int parse_args(int argc, char **argv, demo *d)
{
    int *ranks = &d->nranks, *steps = &d->steps;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 0;
        if (strcmp(a, "--stats") == 0) {
            d->stats = 1;
            continue;
        }
        int matched;
        const char *v = option_value(d->prog, argc, argv, &i, "--trace", &matched);
        if (matched) {
            if (!v || !*v) {
                if (v)
                    fprintf(stderr, "%s: --trace needs a file name\n", d->prog);
                return -1;
            }
            d->trace = v;
            continue;
        }
        v = option_value(d->prog, argc, argv, &i, "--seed", &matched);
        if (matched) {
            char *end;
            errno = 0;
            if (!v || !*v || (d->seed = strtoull(v, &end, 10), errno || *end || v[0] == '-')) {
                if (v)
                    fprintf(stderr, "%s: --seed: '%s' is not a non-negative integer\n", d->prog, v);
                return -1;
            }
            d->seeded = 1;
            continue;
        }
        const char *names[2] = {"--ranks", "--steps"};
        int *dest[2] = {ranks, steps}, lo[2] = {1, 0}, hi[2] = {MAX_RANKS, MAX_STEPS};
        int which = -1;
        const char *value = NULL;
        for (int o = 0; o < 2; o++) {
            size_t len = strlen(names[o]);
            if (strcmp(a, names[o]) == 0) {
                which = o;
                value = i + 1 < argc ? argv[++i] : NULL;
            } else if (strncmp(a, names[o], len) == 0 && a[len] == '=') {
                which = o;
                value = a + len + 1;
            }
        }
        if (which < 0) {
            fprintf(stderr, "%s: unknown argument '%s'\n", d->prog, a);
            return -1;
        }
        if (!parse_int(d->prog, names[which], value, lo[which], hi[which], dest[which]))
            return -1;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Set-up, the checkpoint, the end.                                         */
/* ------------------------------------------------------------------------ */

void demo_free(demo *d)
{
    if (d->rs != NULL)
        for (int r = 0; r < d->nranks; r++) {
            free(d->rs[r].grad);
            free(d->rs[r].events);
        }
    free(d->rs);
    des_engine_destroy(d->eng);
}

/* Engine and rank state; on failure the caller's demo_free cleans up. */
int demo_setup(demo *d)
{
    des_config cfg = {
        .nranks = d->nranks, .link_latency_ns = LINK_LATENCY_NS, .link_bytes_per_us = LINK_BYTES_PER_US};
    int rc = des_engine_create(&cfg, &d->eng);
    if (rc != 0) {
        fprintf(stderr, "%s: des_engine_create: %s\n", d->prog, kb_strerror(rc));
        return 0;
    }
    d->rs = calloc((size_t)d->nranks, sizeof *d->rs);
    if (d->rs == NULL) {
        fprintf(stderr, "%s: out of memory\n", d->prog);
        return 0;
    }
    size_t nelems = (size_t)d->nranks * ELEMS_PER_CHUNK;
    /* compute steps, 2(N-1) ring steps, loss, optimizer, checkpoint */
    size_t cap = (size_t)d->steps + 2 * (size_t)(d->nranks - 1) + 3;
    for (int r = 0; r < d->nranks; r++) {
        rank_state *rs = &d->rs[r];
        rs->grad = malloc(nelems * sizeof *rs->grad);
        rs->events = malloc(cap * sizeof *rs->events);
        if (rs->grad == NULL || rs->events == NULL) {
            fprintf(stderr, "%s: out of memory\n", d->prog);
            return 0;
        }
        rs->cap_events = cap;
        for (size_t i = 0; i < nelems; i++)
            rs->grad[i] = initial_value(r, i);
    }
    return 1;
}

int demo_init(demo *d, const char *prog, int argc, char **argv)
{
    memset(d, 0, sizeof *d);
    d->prog = prog;
    d->nranks = DEFAULT_RANKS;
    d->steps = DEFAULT_STEPS;
    int pr = parse_args(argc, argv, d);
    if (pr == 0) {
        usage(stdout, prog);
        return 0;
    }
    if (pr < 0) {
        fprintf(stderr, "Try '%s --help'.\n", prog);
        return 2;
    }
    return -1;
}

/* The checkpoint: rank 0 writes the model once its optimizer step is done;
 * the driver waits for it itself (engine origin KB_WAIT_DRIVER). */
int demo_finish(demo *d, kb_ctx *ctx, const kb_spawn_stats *st)
{
    uint64_t t0 = des_clock(d->eng, 0);
    kb_handle h = des_compute(d->eng, 0, CHECKPOINT_NS);
    if (h == 0) {
        fprintf(stderr, "%s: des_compute (checkpoint): %s\n", d->prog, des_engine_error(d->eng));
        return 1;
    }
    int rc = des_await(d->eng, ctx, 0, h);
    if (rc != 0) {
        fprintf(stderr, "%s: kb_wait (checkpoint, driver side): %s%s%s\n", d->prog,
                rc < 0 ? kb_strerror(rc) : des_strerror(rc), rc > 0 ? ": " : "",
                rc > 0 ? des_engine_error(d->eng) : "");
        return 1;
    }
    d->rs[0].busy_ns += CHECKPOINT_NS;
    record(d, 0, t0, "checkpoint written (driver-side wait)");
    int status = print_report(d);
    if (d->stats)
        printf("\nscheduler: %" PRIu64 " rounds, %" PRIu64 " turns, %" PRIu64 " handoffs, %" PRIu64
               " drains, %" PRIu64 " engine waits, %" PRIu64 " collectives; wall %.3f ms\n",
               st->rounds, st->turns, st->handoffs, st->drains, st->engine_waits, st->collectives,
               st->wall_ns / 1e6);
    if (d->trace)
        fprintf(stderr, "%s: timeline written to %s (open it in Perfetto or chrome://tracing)\n", d->prog,
                d->trace);
    return status;
}

int demo_exit(demo *d, int status)
{
    demo_free(d);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: error writing the output\n", d->prog);
        status = 1;
    }
    return status;
}
