/*
 * kbdemo - a data-parallel training step simulated on libkbthreads.
 *
 * Every rank (one kbthreads rank each) runs S compute steps (micro-batches
 * that accumulate gradients), a ring all-reduce of the gradients
 * (reduce-scatter then all-gather: 2*(N-1) steps of chunk send/recv with its
 * neighbours), an all-reduce of the loss submitted as a kbthreads
 * collective, a kb_barrier, a check of the reduced data, and an optimizer
 * step. After the spawn the driver writes a checkpoint (a driver-side wait).
 * Time comes from the discrete-event engine in des_engine.c; the payloads
 * are real, so the all-reduce result is verified, not just timed.
 *
 * The output is a function of --ranks and --steps only: times are simulated,
 * and no pointer, thread id or wall-clock value is printed.
 *
 * Exit status: 0 success, 1 a kbthreads/engine failure or a wrong result,
 * 2 bad command line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "des_engine.h"
#include "kbthreads.h"

/* ------------------------------------------------------------------------ */
/* The model (all times in simulated ns).                                   */
/* ------------------------------------------------------------------------ */

#define DEFAULT_RANKS 8
#define DEFAULT_STEPS 3
#define MAX_RANKS     64
#define MAX_STEPS     100

#define GRAD_BYTES          (UINT64_C(64) << 20) /* modelled gradient size: 64 MiB */
#define LINK_BYTES_PER_US   UINT64_C(25000)      /* 25 GB/s links */
#define LINK_LATENCY_NS     UINT64_C(2000)       /* 2 us per message */
#define REDUCE_BYTES_PER_NS UINT64_C(100)        /* summing chunks: 100 GB/s */
#define LOSS_BYTES          UINT64_C(8)          /* the loss all-reduce carries one int64 */
#define OPTIMIZER_NS        UINT64_C(400000)     /* 0.4 ms */
#define CHECKPOINT_NS       UINT64_C(1500000)    /* 1.5 ms, written by rank 0 */
#define ELEMS_PER_CHUNK     4                    /* real payload: int64 values per chunk */
#define CHUNK_LEN           (ELEMS_PER_CHUNK * sizeof(int64_t))

/* Rank failure codes (positive: library codes are negative). */
#define DEMO_EENGINE   100 /* an engine call refused to create an op */
#define DEMO_ECHECK    101 /* the all-reduce produced a wrong value */
#define DEMO_EIDENTITY 102 /* kb_rank/kb_world_size/kb_current_ctx disagree */

/* Micro-batch s (1-based) on rank r: 2 ms plus a rank- and step-dependent
 * imbalance of up to 0.72 ms, so the ring starts staggered. */
static uint64_t compute_ns(int r, int s)
{
    return 2000000ull + (uint64_t)((r * 5 + s * 3) % 7) * 120000ull;
}

/* Modelled size of chunk c: GRAD_BYTES split in n nearly equal parts. */
static uint64_t chunk_bytes(int n, int c)
{
    uint64_t base = GRAD_BYTES / (uint64_t)n, extra = GRAD_BYTES % (uint64_t)n;
    return base + ((uint64_t)c < extra ? 1u : 0u);
}

/* Real payload: rank r starts with value r*10+i at element i and adds
 * contribution(r, s, i) in micro-batch s. */
static int64_t initial_value(int r, size_t i)
{
    return (int64_t)r * 10 + (int64_t)i;
}
static int64_t contribution(int r, int s, size_t i)
{
    return (int64_t)(r + 1) * 1000003 + (int64_t)s * 101 + (int64_t)i * 7;
}
static int64_t loss_of(int r)
{
    return 1000 + 17 * (int64_t)r;
}

/* ------------------------------------------------------------------------ */
/* State. Each rank touches only its own rank_state, except the neighbour   */
/* check after the barrier (reads only); the baton serialises everything.   */
/* ------------------------------------------------------------------------ */

typedef struct demo_event {
    uint64_t start, end;
    int rank;
    unsigned seq; /* program order within the rank */
    char what[64];
} demo_event;

typedef struct rank_state {
    int64_t *grad;                /* nranks chunks of ELEMS_PER_CHUNK values */
    int64_t tmp[ELEMS_PER_CHUNK]; /* reduce-scatter receive buffer */
    int64_t loss;                 /* all-reduced in place */
    uint64_t busy_ns;             /* simulated time spent computing */
    demo_event *events;
    size_t nevents, cap_events;
} rank_state;

typedef struct demo {
    int nranks, steps;
    const char *trace; /* --trace FILE: a Chrome trace-event timeline of the scheduling */
    int stats;         /* --stats: print the scheduler's statistics */
    int seeded;        /* --seed N: visit ranks in a seeded order (results do not change) */
    unsigned long long seed;
    des_engine *eng;
    rank_state *rs;
} demo;

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static int64_t *chunk(rank_state *rs, int c)
{
    return rs->grad + (size_t)c * ELEMS_PER_CHUNK;
}

/* Append a timeline event of rank that started at start and ends now. */
static void record(demo *d, int rank, uint64_t start, const char *fmt, ...) KB_PRINTF_LIKE(4, 5);
static void record(demo *d, int rank, uint64_t start, const char *fmt, ...)
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
/* Rank failures: record with kb_fail, return the code from the rank.       */
/* ------------------------------------------------------------------------ */

static int fail_rank(demo *d, int rank, int code, const char *what)
{
    if (code == KB_ECANCELED) /* a cancelled rank: not a root cause */
        return code;
    const char *why = code < 0 ? kb_strerror(code) : des_strerror(code);
    const char *detail = code > 0 ? des_engine_error(d->eng) : "";
    int rc = kb_fail(code, "rank %d: %s: %s%s%s", rank, what, why, detail[0] ? ": " : "", detail);
    if (rc != 0)
        fprintf(stderr, "kbdemo: rank %d: kb_fail: %s\n", rank, kb_strerror(rc));
    return code;
}

/* An engine creation call returned handle 0. */
static int fail_engine(demo *d, int rank, const char *what)
{
    const char *why = des_engine_error(d->eng);
    int rc = kb_fail(DEMO_EENGINE, "rank %d: %s: %s", rank, what, why[0] ? why : "refused");
    if (rc != 0)
        fprintf(stderr, "kbdemo: rank %d: kb_fail: %s\n", rank, kb_strerror(rc));
    return DEMO_EENGINE;
}

/* ------------------------------------------------------------------------ */
/* The rank program.                                                        */
/* ------------------------------------------------------------------------ */

static int compute_steps(demo *d, kb_ctx *ctx, int rank)
{
    rank_state *rs = &d->rs[rank];
    size_t nelems = (size_t)d->nranks * ELEMS_PER_CHUNK;
    for (int s = 1; s <= d->steps; s++) {
        uint64_t t0 = des_clock(d->eng, rank), dur = compute_ns(rank, s);
        kb_handle h = des_compute(d->eng, rank, dur);
        if (h == 0)
            return fail_engine(d, rank, "des_compute");
        int rc = des_await(d->eng, ctx, rank, h);
        if (rc != 0)
            return fail_rank(d, rank, rc, "kb_wait (compute)");
        for (size_t i = 0; i < nelems; i++)
            rs->grad[i] += contribution(rank, s, i);
        rs->busy_ns += dur;
        record(d, rank, t0, "compute step %d/%d", s, d->steps);
    }
    return 0;
}

/* One ring exchange: send chunk send_c to the right neighbour, receive from
 * the left one into buf; both complete in one round (des_await_all). */
static int exchange(demo *d, kb_ctx *ctx, int rank, int send_c, int64_t *buf, const char *phase)
{
    int n = d->nranks, right = mod(rank + 1, n), left = mod(rank - 1, n);
    kb_handle hs[2];
    hs[0] = des_send(d->eng, rank, right, chunk_bytes(n, send_c), chunk(&d->rs[rank], send_c), CHUNK_LEN);
    if (hs[0] == 0)
        return fail_engine(d, rank, "des_send");
    hs[1] = des_recv(d->eng, rank, left, buf, CHUNK_LEN);
    if (hs[1] == 0)
        return fail_engine(d, rank, "des_recv");
    int rc = des_await_all(d->eng, ctx, rank, hs, 2);
    if (rc != 0)
        return fail_rank(d, rank, rc, phase);
    return 0;
}

/* Ring all-reduce. Reduce-scatter step k: send chunk rank-k, receive chunk
 * rank-k-1 and add it in; after N-1 steps rank r owns the full sum of chunk
 * r+1. All-gather step k: pass chunk rank+1-k on, receive chunk rank-k. */
static int ring_allreduce(demo *d, kb_ctx *ctx, int rank)
{
    int n = d->nranks, left = mod(rank - 1, n);
    rank_state *rs = &d->rs[rank];
    for (int k = 0; k < n - 1; k++) {
        int recv_c = mod(rank - k - 1, n);
        uint64_t t0 = des_clock(d->eng, rank);
        int rc = exchange(d, ctx, rank, mod(rank - k, n), rs->tmp, "kb_wait (reduce-scatter)");
        if (rc != 0)
            return rc;
        uint64_t dur = chunk_bytes(n, recv_c) / REDUCE_BYTES_PER_NS;
        kb_handle h = des_compute(d->eng, rank, dur);
        if (h == 0)
            return fail_engine(d, rank, "des_compute (reduce)");
        if ((rc = des_await(d->eng, ctx, rank, h)) != 0)
            return fail_rank(d, rank, rc, "kb_wait (reduce)");
        for (int i = 0; i < ELEMS_PER_CHUNK; i++)
            chunk(rs, recv_c)[i] += rs->tmp[i];
        rs->busy_ns += dur;
        record(d, rank, t0, "reduce-scatter %d/%d: chunk %d += rank %d", k + 1, n - 1, recv_c, left);
    }
    for (int k = 0; k < n - 1; k++) {
        int recv_c = mod(rank - k, n);
        uint64_t t0 = des_clock(d->eng, rank);
        int rc = exchange(d, ctx, rank, mod(rank + 1 - k, n), chunk(rs, recv_c), "kb_wait (all-gather)");
        if (rc != 0)
            return rc;
        record(d, rank, t0, "all-gather %d/%d: chunk %d from rank %d", k + 1, n - 1, recv_c, left);
    }
    return 0;
}

/* The loss all-reduce goes through the collective queue: submit, then yield
 * until drain phase (b) has completed it. */
static int loss_allreduce(demo *d, kb_ctx *ctx, int rank)
{
    rank_state *rs = &d->rs[rank];
    rs->loss = loss_of(rank);
    uint64_t t0 = des_clock(d->eng, rank);
    kb_handle h = des_allreduce_i64(d->eng, rank, LOSS_BYTES, &rs->loss);
    if (h == 0)
        return fail_engine(d, rank, "des_allreduce_i64");
    int rc = kb_collective_submit(ctx, h, rank, NULL);
    if (rc != 0)
        return fail_rank(d, rank, rc, "kb_collective_submit");
    int done;
    while ((done = kb_is_completed(ctx, h)) == 0)
        if ((rc = kb_yield()) != 0)
            return fail_rank(d, rank, rc, "kb_yield");
    if (done < 0)
        return fail_rank(d, rank, done, "kb_is_completed");
    if ((rc = des_await(d->eng, ctx, rank, h)) != 0) /* completed: just moves the clock */
        return fail_rank(d, rank, rc, "kb_wait (loss)");
    record(d, rank, t0, "all-reduce(loss) = %" PRId64, rs->loss);
    return 0;
}

/* After kb_barrier every rank finished its all-reduce: compare this rank's
 * result with the closed sum and with the left neighbour's copy. */
static int check_result(demo *d, int rank)
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
            int rc =
                kb_fail(DEMO_ECHECK,
                        "rank %d: element %zu is %" PRId64 " (left neighbour %" PRId64 "), expected %" PRId64,
                        rank, i, rs->grad[i], left->grad[i], want);
            if (rc != 0)
                fprintf(stderr, "kbdemo: rank %d: kb_fail: %s\n", rank, kb_strerror(rc));
            return DEMO_ECHECK;
        }
    }
    int64_t want_loss = 0;
    for (int r = 0; r < n; r++)
        want_loss += loss_of(r);
    if (rs->loss != want_loss) {
        int rc = kb_fail(DEMO_ECHECK, "rank %d: loss sum %" PRId64 ", expected %" PRId64, rank, rs->loss,
                         want_loss);
        if (rc != 0)
            fprintf(stderr, "kbdemo: rank %d: kb_fail: %s\n", rank, kb_strerror(rc));
        return DEMO_ECHECK;
    }
    return 0;
}

static int rank_main(int rank, void *arg)
{
    demo *d = arg;
    kb_ctx *ctx = kb_current_ctx();
    if (ctx == NULL || kb_rank() != rank || kb_world_size() != d->nranks) {
        int rc = kb_fail(DEMO_EIDENTITY, "rank %d: kb_rank() %d, kb_world_size() %d, ctx %s", rank, kb_rank(),
                         kb_world_size(), ctx ? "set" : "NULL");
        if (rc != 0)
            fprintf(stderr, "kbdemo: rank %d: kb_fail: %s\n", rank, kb_strerror(rc));
        return DEMO_EIDENTITY;
    }
    int rc;
    if ((rc = compute_steps(d, ctx, rank)) != 0 || (rc = ring_allreduce(d, ctx, rank)) != 0 ||
        (rc = loss_allreduce(d, ctx, rank)) != 0)
        return rc;
    if ((rc = kb_barrier()) != 0)
        return fail_rank(d, rank, rc, "kb_barrier");
    if ((rc = check_result(d, rank)) != 0)
        return rc;
    uint64_t t0 = des_clock(d->eng, rank);
    kb_handle h = des_compute(d->eng, rank, OPTIMIZER_NS);
    if (h == 0)
        return fail_engine(d, rank, "des_compute (optimizer)");
    if ((rc = des_await(d->eng, ctx, rank, h)) != 0)
        return fail_rank(d, rank, rc, "kb_wait (optimizer)");
    d->rs[rank].busy_ns += OPTIMIZER_NS;
    record(d, rank, t0, "optimizer step");
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
        fprintf(stderr, "kbdemo: out of memory\n");
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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kbdemo [--ranks N] [--steps S] [--trace FILE] [--stats] [--seed N] [--help]\n"
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
            MAX_RANKS, DEFAULT_RANKS, MAX_STEPS, DEFAULT_STEPS);
}

/* A decimal integer in [lo, hi]; 0 (with a message) otherwise. */
static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    if (s == NULL) {
        fprintf(stderr, "kbdemo: %s needs a value\n", opt);
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t' || s[0] == '+') {
        fprintf(stderr, "kbdemo: %s: '%s' is not a decimal integer\n", opt, s);
        return 0;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "kbdemo: %s: %s is out of range %d..%d\n", opt, s, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* "--opt VALUE" or "--opt=VALUE" for option name at argv[*i]: the value
 * (NULL with a message when missing), or NULL without a message when
 * argv[*i] is another option. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *matched)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    *matched = 0;
    if (strcmp(a, name) == 0) {
        *matched = 1;
        if (*i + 1 < argc)
            return argv[++*i];
        fprintf(stderr, "kbdemo: %s needs a value\n", name);
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
        const char *v = option_value(argc, argv, &i, "--trace", &matched);
        if (matched) {
            if (!v || !*v) {
                if (v)
                    fprintf(stderr, "kbdemo: --trace needs a file name\n");
                return -1;
            }
            d->trace = v;
            continue;
        }
        v = option_value(argc, argv, &i, "--seed", &matched);
        if (matched) {
            char *end;
            errno = 0;
            if (!v || !*v || (d->seed = strtoull(v, &end, 10), errno || *end || v[0] == '-')) {
                if (v)
                    fprintf(stderr, "kbdemo: --seed: '%s' is not a non-negative integer\n", v);
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
            fprintf(stderr, "kbdemo: unknown argument '%s'\n", a);
            return -1;
        }
        if (!parse_int(names[which], value, lo[which], hi[which], dest[which]))
            return -1;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Driver.                                                                  */
/* ------------------------------------------------------------------------ */

static void report_spawn_failure(int rc, const kb_spawn_error *err, const des_engine *eng)
{
    fprintf(stderr, "kbdemo: kb_spawn: %s\n", kb_strerror(rc));
    if (err != NULL) {
        fprintf(stderr, "kbdemo: %s\n", kb_spawn_error_message(err));
        int dc = kb_spawn_error_drain_code(err);
        if (dc != 0)
            fprintf(stderr, "kbdemo: drain failed on handle %" PRIu64 ": %s\n",
                    (uint64_t)kb_spawn_error_drain_handle(err), dc > 0 ? des_strerror(dc) : kb_strerror(dc));
        for (size_t i = 0; i < kb_spawn_error_count(err); i++) {
            const kb_rank_error *re = kb_spawn_error_get(err, i);
            if (re != NULL)
                fprintf(stderr, "kbdemo:   rank %d, code %d: %s\n", re->rank, re->code, re->message);
        }
    }
    if (des_engine_error(eng)[0] != '\0')
        fprintf(stderr, "kbdemo: engine: %s\n", des_engine_error(eng));
}

static void free_demo(demo *d)
{
    if (d->rs != NULL)
        for (int r = 0; r < d->nranks; r++) {
            free(d->rs[r].grad);
            free(d->rs[r].events);
        }
    free(d->rs);
    des_engine_destroy(d->eng);
}

/* Engine and rank state; on failure the caller's free_demo cleans up. */
static int setup(demo *d)
{
    des_config cfg = {
        .nranks = d->nranks, .link_latency_ns = LINK_LATENCY_NS, .link_bytes_per_us = LINK_BYTES_PER_US};
    int rc = des_engine_create(&cfg, &d->eng);
    if (rc != 0) {
        fprintf(stderr, "kbdemo: des_engine_create: %s\n", kb_strerror(rc));
        return 0;
    }
    d->rs = calloc((size_t)d->nranks, sizeof *d->rs);
    if (d->rs == NULL) {
        fprintf(stderr, "kbdemo: out of memory\n");
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
            fprintf(stderr, "kbdemo: out of memory\n");
            return 0;
        }
        rs->cap_events = cap;
        for (size_t i = 0; i < nelems; i++)
            rs->grad[i] = initial_value(r, i);
    }
    return 1;
}

/* Everything after the command line; the exit status. */
static int run(demo *d, kb_ctx **ctx)
{
    if (!setup(d))
        return 1;
    kb_engine hooks = des_engine_hooks(d->eng);
    int rc = kb_ctx_create(&hooks, ctx);
    if (rc != 0) {
        fprintf(stderr, "kbdemo: kb_ctx_create: %s\n", kb_strerror(rc));
        return 1;
    }
    kb_spawn_error *err = NULL;
    kb_spawn_stats st = {0};
    kb_spawn_opts opts = {.trace_path = d->trace,
                          .stats = &st,
                          .schedule = d->seeded ? KB_SCHED_SEEDED : KB_SCHED_ROUND_ROBIN,
                          .seed = d->seed};
    rc = kb_spawn(*ctx, rank_main, d, d->nranks, &opts, &err);
    if (rc != 0) {
        report_spawn_failure(rc, err, d->eng);
        kb_spawn_error_free(err);
        return 1;
    }

    /* The checkpoint: rank 0 writes the model once its optimizer step is
     * done; the driver waits for it itself (engine origin KB_WAIT_DRIVER). */
    uint64_t t0 = des_clock(d->eng, 0);
    kb_handle h = des_compute(d->eng, 0, CHECKPOINT_NS);
    if (h == 0) {
        fprintf(stderr, "kbdemo: des_compute (checkpoint): %s\n", des_engine_error(d->eng));
        return 1;
    }
    rc = des_await(d->eng, *ctx, 0, h);
    if (rc != 0) {
        fprintf(stderr, "kbdemo: kb_wait (checkpoint, driver side): %s%s%s\n",
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
               st.rounds, st.turns, st.handoffs, st.drains, st.engine_waits, st.collectives,
               st.wall_ns / 1e6);
    if (d->trace)
        fprintf(stderr, "kbdemo: timeline written to %s (open it in Perfetto or chrome://tracing)\n",
                d->trace);
    return status;
}

int main(int argc, char **argv)
{
    demo d = {.nranks = DEFAULT_RANKS, .steps = DEFAULT_STEPS};
    int pr = parse_args(argc, argv, &d);
    if (pr == 0) {
        usage(stdout);
        return 0;
    }
    if (pr < 0) {
        fprintf(stderr, "Try 'kbdemo --help'.\n");
        return 2;
    }
    kb_ctx *ctx = NULL;
    int status = run(&d, &ctx);
    int rc = kb_ctx_destroy(ctx);
    if (rc != 0) {
        fprintf(stderr, "kbdemo: kb_ctx_destroy: %s\n", kb_strerror(rc));
        status = 1;
    }
    free_demo(&d);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kbdemo: error writing the output\n");
        status = 1;
    }
    return status;
}
