/* SPDX-License-Identifier: MIT */
/*
 * The simulation-shaped job (issue 20) in C: per step every rank launches
 * 4 kernels on a heap-based engine and waits for each (the engine's wait
 * hook pops the heap in simulated-time order, ties by launch order, until
 * the awaited kernel is completed), then arrives at an all-reduce, submits
 * it (kb_collective_submit) and waits for it (the engine completes it only
 * when every rank arrived), then yields once. Operations per rank and step:
 * 4 waits + 1 collective + 1 yield.
 *
 * bench/python/sim_model.py is the same model in Python (py_bench.py sim,
 * peer_greenlet.py sim): same local ids, durations and checksum, so equal
 * checksums mean an equal event order. Keep the two in step.
 *
 * Timing as in the loops of kb_bench.c: step 0 is a warm-up, rank 0 stamps
 * the clock (and the process's CPU time) before step 1, the last rank after
 * step M; one rank runs at a time, so those are the earliest and the latest
 * stamps.
 */
#include "kb_sim.h"

#include <inttypes.h>
#include <stdlib.h>

#define SIM_KERNELS      4
#define SIM_OPS_PER_STEP (SIM_KERNELS + 2)
#define FNV_OFFSET       UINT64_C(0xCBF29CE484222325)
#define FNV_PRIME        UINT64_C(0x100000001B3)

enum { SIM_ERR_NEVER_LAUNCHED = 1, SIM_ERR_EARLY_COLLECTIVE = 2 };

struct sim_event {
    uint64_t t, seq, lid;
};

/* The engine. Handles of a repetition: base + 1 + local id; kernel (s, r, k):
 * (s * n + r) * 4 + k; the all-reduce of step s: kernels + s. Touched by the
 * ranks (launch, arrive) and by the driver (the wait hook), never at once:
 * one thread holds the baton. */
struct sim {
    long n, steps; /* steps: M + 1 (the warm-up step 0) */
    uint64_t kernels;
    kb_handle base;
    struct sim_event *heap;
    size_t heap_len;
    uint64_t now, seq, checksum, events;
    unsigned char *done; /* kernels + steps flags */
    long *arrivals;      /* per step */
    kb_ctx *ctx;
    uint64_t *t_first, *t_last, cpu_first, cpu_last;
};

static uint64_t kernel_duration(uint64_t step, uint64_t rank, uint64_t k)
{
    uint32_t x = (uint32_t)(step * UINT64_C(2654435761) + rank * UINT64_C(40503) + k * UINT64_C(2246822519) +
                            UINT64_C(12345));
    x ^= x >> 13;
    x *= UINT32_C(1274126177);
    x ^= x >> 16;
    return 1 + x % 1000;
}

static int event_before(const struct sim_event *a, const struct sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(struct sim *s, struct sim_event e)
{
    size_t i = s->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!event_before(&e, &s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = e;
}

static struct sim_event heap_pop(struct sim *s)
{
    struct sim_event top = s->heap[0], last = s->heap[--s->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len && event_before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!event_before(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_len)
        s->heap[i] = last;
    return top;
}

static void record(struct sim *s, uint64_t lid, uint64_t t)
{
    s->done[lid] = 1;
    s->checksum = ((s->checksum ^ lid) * FNV_PRIME ^ t) * FNV_PRIME;
    s->events++;
}

static int sim_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)meta;
    (void)origin;
    struct sim *s = self;
    uint64_t lid = h - s->base - 1;
    if (s->done[lid])
        return 0;
    if (lid < s->kernels) {
        while (!s->done[lid]) {
            if (s->heap_len == 0)
                return SIM_ERR_NEVER_LAUNCHED;
            struct sim_event e = heap_pop(s);
            s->now = e.t;
            record(s, e.lid, e.t);
        }
        return 0;
    }
    uint64_t step = lid - s->kernels;
    if (s->arrivals[step] != s->n)
        return SIM_ERR_EARLY_COLLECTIVE;
    s->now += 100 + (uint64_t)s->n; /* an all-reduce over n ranks */
    record(s, lid, s->now);
    return 0;
}

static void sim_reset(struct sim *s, kb_handle base)
{
    s->base = base;
    s->heap_len = 0;
    s->now = s->seq = s->events = 0;
    s->checksum = FNV_OFFSET;
    for (uint64_t i = 0; i < s->kernels + (uint64_t)s->steps; i++)
        s->done[i] = 0;
    for (long i = 0; i < s->steps; i++)
        s->arrivals[i] = 0;
}

static int sim_step(struct sim *s, int rank, long step)
{
    uint64_t first = ((uint64_t)step * (uint64_t)s->n + (uint64_t)rank) * SIM_KERNELS;
    for (uint64_t k = 0; k < SIM_KERNELS; k++)
        heap_push(s, (struct sim_event){s->now + kernel_duration((uint64_t)step, (uint64_t)rank, k), s->seq++,
                                        first + k});
    for (uint64_t k = 0; k < SIM_KERNELS; k++) {
        int rc = kb_wait(s->ctx, s->base + 1 + first + k);
        if (rc)
            return rc;
    }
    s->arrivals[step]++;
    kb_handle coll = s->base + 1 + s->kernels + (uint64_t)step;
    int rc = kb_collective_submit(s->ctx, coll, rank, NULL);
    if (!rc)
        rc = kb_wait(s->ctx, coll);
    return rc ? rc : kb_yield();
}

static int sim_rank(int rank, void *p)
{
    struct sim *s = p;
    int rc = sim_step(s, rank, 0);
    if (rc)
        return rc;
    if (rank == 0)
        s->cpu_first = bench_cpu_ns();
    s->t_first[rank] = bench_now_ns();
    for (long step = 1; step < s->steps && !rc; step++)
        rc = sim_step(s, rank, step);
    s->t_last[rank] = bench_now_ns();
    if (rank == s->n - 1)
        s->cpu_last = bench_cpu_ns();
    return rc;
}

void run_sim(const struct bench_opts *o, const kb_spawn_opts *so, const char *impl)
{
    struct sim s = {.n = o->n, .steps = o->m + 1};
    s.kernels = (uint64_t)s.steps * (uint64_t)s.n * SIM_KERNELS;
    s.heap = malloc((size_t)s.n * SIM_KERNELS * sizeof *s.heap);
    s.done = malloc((size_t)(s.kernels + (uint64_t)s.steps));
    s.arrivals = malloc((size_t)s.steps * sizeof *s.arrivals);
    s.t_first = calloc((size_t)s.n, sizeof *s.t_first);
    s.t_last = calloc((size_t)s.n, sizeof *s.t_last);
    if (!s.heap || !s.done || !s.arrivals || !s.t_first || !s.t_last)
        bench_die("out of memory");
    const kb_engine engine = {.self = &s, .wait = sim_wait};
    int rc = kb_ctx_create(&engine, &s.ctx);
    if (rc)
        bench_die("kb_ctx_create: %s", kb_strerror(rc));
    uint64_t first_sum = 0;
    kb_handle base = 0;
    for (int rep = -1; rep < o->reps; rep++) {
        sim_reset(&s, base);
        kb_spawn_error *err = NULL;
        rc = kb_spawn(s.ctx, sim_rank, &s, (int)s.n, so, &err);
        if (rc) {
            fprintf(stderr, "kb_bench: sim: kb_spawn(%ld ranks): %s%s%s\n", s.n, kb_strerror(rc),
                    err ? ": " : "", err ? kb_spawn_error_message(err) : "");
            exit(3);
        }
        base += s.kernels + (uint64_t)s.steps;
        if (s.events != s.kernels + (uint64_t)s.steps) {
            fprintf(stderr, "kb_bench: sim: %" PRIu64 " completions, expected %" PRIu64 "\n", s.events,
                    s.kernels + (uint64_t)s.steps);
            exit(3);
        }
        if (rep == -1)
            first_sum = s.checksum;
        else if (s.checksum != first_sum) {
            fprintf(stderr,
                    "kb_bench: sim: the event order changed between repetitions (%016" PRIx64
                    ", then %016" PRIx64 ")\n",
                    first_sum, s.checksum);
            exit(3);
        }
        if (rep < 0)
            continue;
        uint64_t first = UINT64_MAX, last = 0;
        for (long r = 0; r < s.n; r++) {
            first = s.t_first[r] < first ? s.t_first[r] : first;
            last = s.t_last[r] > last ? s.t_last[r] : last;
        }
        uint64_t ops = (uint64_t)s.n * (uint64_t)o->m * SIM_OPS_PER_STEP;
        bench_emit("sim", impl, o->pin, s.n, rep, (double)(last - first) / (double)ops, "ns", ops);
        bench_emit("sim_cpu", impl, o->pin, s.n, rep, (double)(s.cpu_last - s.cpu_first) / (double)ops, "ns",
                   ops);
    }
    char buf[96];
    snprintf(buf, sizeof buf, "%ld:%ld:%016" PRIx64 ":%" PRIu64, s.n, o->m, first_sum, s.events);
    bench_info("sim_checksum", buf);
    rc = kb_ctx_destroy(s.ctx);
    if (rc)
        bench_die("kb_ctx_destroy: %s", kb_strerror(rc));
    free(s.heap);
    free(s.done);
    free(s.arrivals);
    free(s.t_first);
    free(s.t_last);
}
