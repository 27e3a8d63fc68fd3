/* SPDX-License-Identifier: MIT */
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
 * and no pointer, thread id or wall-clock value is printed. The model, the
 * command line and the report are in demo_common.c, shared with
 * kbdemo_cpp.cpp, the same rank program written with the C++ layer, which
 * prints the same bytes.
 *
 * Exit status: 0 success, 1 a kbthreads/engine failure or a wrong result,
 * 2 bad command line.
 */
#include <inttypes.h>
#include <stdio.h>

#include "demo_common.h"
#include "des_engine.h"
#include "kbthreads.h"

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
    char msg[160];
    if ((rc = demo_check(d, rank, msg, sizeof msg)) != 0) {
        int frc = kb_fail(rc, "%s", msg);
        if (frc != 0)
            fprintf(stderr, "kbdemo: rank %d: kb_fail: %s\n", rank, kb_strerror(frc));
        return rc;
    }
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

/* Everything after the command line; the exit status. */
static int run(demo *d, kb_ctx **ctx)
{
    if (!demo_setup(d))
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
    return demo_finish(d, *ctx, &st);
}

int main(int argc, char **argv)
{
    demo d;
    int status = demo_init(&d, "kbdemo", argc, argv);
    if (status >= 0)
        return status;
    kb_ctx *ctx = NULL;
    status = run(&d, &ctx);
    int rc = kb_ctx_destroy(ctx);
    if (rc != 0) {
        fprintf(stderr, "kbdemo: kb_ctx_destroy: %s\n", kb_strerror(rc));
        status = 1;
    }
    return demo_exit(&d, status);
}
