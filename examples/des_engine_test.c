/* SPDX-License-Identifier: MIT */
/*
 * des_engine_test - checks of the discrete-event engine used by kbdemo.
 *
 * Scenarios with hand-computed simulated times (1 byte/ns links, 1 us
 * latency), the release order of the event heap, argument checks, and the
 * engine failing a drain (a recv whose send is never posted) as seen through
 * kb_spawn's error report. Prints "N passed, M failed" and exits 1 on any
 * failure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "des_engine.h"
#include "kbthreads.h"

static int passed, failed;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (cond) {                                                                                          \
            passed++;                                                                                        \
        } else {                                                                                             \
            failed++;                                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                         \
        }                                                                                                    \
    } while (0)

#define CHECK_EQ_U64(got, want)                                                                              \
    do {                                                                                                     \
        uint64_t got_ = (got), want_ = (want);                                                               \
        if (got_ == want_) {                                                                                 \
            passed++;                                                                                        \
        } else {                                                                                             \
            failed++;                                                                                        \
            fprintf(stderr, "%s:%d: %s is %" PRIu64 ", expected %" PRIu64 "\n", __FILE__, __LINE__, #got,    \
                    got_, want_);                                                                            \
        }                                                                                                    \
    } while (0)

/* A fresh engine of n ranks with 1 byte/ns links and 1 us latency, and a ctx
 * driving it; driver-side des_await then runs the engine's wait hook. */
static int setup(int n, des_engine **e, kb_ctx **ctx)
{
    des_config cfg = {.nranks = n, .link_latency_ns = 1000, .link_bytes_per_us = 1000};
    int rc = des_engine_create(&cfg, e);
    if (rc != 0) {
        fprintf(stderr, "des_engine_create: %s\n", kb_strerror(rc));
        return 0;
    }
    kb_engine hooks = des_engine_hooks(*e);
    rc = kb_ctx_create(&hooks, ctx);
    if (rc != 0) {
        fprintf(stderr, "kb_ctx_create: %s\n", kb_strerror(rc));
        des_engine_destroy(*e);
        return 0;
    }
    return 1;
}

static void teardown(des_engine *e, kb_ctx *ctx)
{
    int rc = kb_ctx_destroy(ctx);
    if (rc != 0)
        fprintf(stderr, "kb_ctx_destroy: %s\n", kb_strerror(rc));
    CHECK(rc == 0);
    des_engine_destroy(e);
}

static void test_point_to_point(void)
{
    des_engine *e;
    kb_ctx *ctx;
    if (!setup(3, &e, &ctx)) {
        failed++;
        return;
    }
    /* Compute queues on the compute unit even without awaiting. */
    kb_handle c1 = des_compute(e, 0, 500), c2 = des_compute(e, 0, 300);
    CHECK(c1 == 1 && c2 == 2); /* handles count from 1 */
    /* Sends serialise on the 0->1 link: [0,2000) then [2000,3000). */
    const char msg1[] = "first", msg2[] = "second";
    kb_handle s1 = des_send(e, 0, 1, 2000, msg1, sizeof msg1);
    kb_handle s2 = des_send(e, 0, 1, 1000, msg2, sizeof msg2);
    char b1[sizeof msg1] = {0}, b2[sizeof msg2] = {0};
    kb_handle r1 = des_recv(e, 1, 0, b1, sizeof b1); /* arrives 2000 + 1000 */
    CHECK(s1 != 0 && s2 != 0 && r1 != 0);

    CHECK(des_await(e, ctx, 1, r1) == 0);
    CHECK_EQ_U64(des_clock(e, 1), 3000);
    CHECK(strcmp(b1, "first") == 0);
    des_stats st;
    des_engine_stats(e, &st);
    /* c1 (500), c2 (800), s1 (2000), s2 (3000, created before r1), r1 (3000) */
    CHECK_EQ_U64(st.events, 5);
    CHECK_EQ_U64(st.completed_early, 4);
    CHECK_EQ_U64(st.waits[KB_WAIT_DRIVER], 1);

    /* Posted at 3000 after s2 arrived at 4000: ends at the arrival. */
    kb_handle r2 = des_recv(e, 1, 0, b2, sizeof b2);
    CHECK(des_await(e, ctx, 1, r2) == 0);
    CHECK_EQ_U64(des_clock(e, 1), 4000);
    CHECK(strcmp(b2, "second") == 0);

    /* Awaiting ops the clock already released moves the clock too. */
    CHECK(des_await(e, ctx, 0, c2) == 0);
    CHECK_EQ_U64(des_clock(e, 0), 800);
    /* A compute issued now starts at the rank clock (800), not at 0. */
    kb_handle c3 = des_compute(e, 0, 100);
    CHECK(des_await(e, ctx, 0, c3) == 0);
    CHECK_EQ_U64(des_clock(e, 0), 900);
    /* A recv posted (at 4000) after its message arrived (1010) ends at the
     * post; the 2->1 link was idle, so the send ended at 10. */
    kb_handle s3 = des_send(e, 2, 1, 10, NULL, 0);
    kb_handle r3 = des_recv(e, 1, 2, NULL, 0);
    CHECK(des_await(e, ctx, 1, r3) == 0);
    CHECK_EQ_U64(des_clock(e, 1), 4000);
    CHECK(des_await(e, ctx, 2, s3) == 0);
    CHECK_EQ_U64(des_clock(e, 2), 10);
    CHECK_EQ_U64(des_makespan(e), 4000);
    CHECK(des_engine_error(e)[0] == '\0');
    teardown(e, ctx);
}

static void test_allreduce(void)
{
    des_engine *e;
    kb_ctx *ctx;
    if (!setup(3, &e, &ctx)) {
        failed++;
        return;
    }
    /* Rank 1 joins at 700; 2 rounds of (1000 ns latency + 1000 ns wire). */
    kb_handle c = des_compute(e, 1, 700);
    CHECK(des_await(e, ctx, 1, c) == 0);
    int64_t v[3] = {5, -7, 40};
    kb_handle h[3];
    for (int r = 0; r < 3; r++)
        h[r] = des_allreduce_i64(e, r, 1000, &v[r]);
    CHECK(h[0] != 0 && h[1] != 0 && h[2] != 0);
    CHECK(des_await_all(e, ctx, 2, h, 3) == 0);
    CHECK_EQ_U64(des_clock(e, 2), 700 + 2 * 2000);
    CHECK(v[0] == 38 && v[1] == 38 && v[2] == 38);
    teardown(e, ctx);
}

/* The heap releases exactly the ops ordered before the waited one by
 * (end time, creation order), whatever the order of creation. */
static void test_release_order(void)
{
    des_engine *e;
    kb_ctx *ctx;
    if (!setup(4, &e, &ctx)) {
        failed++;
        return;
    }
    enum { N = 200 };
    uint64_t end[N], cpu[4] = {0}, x = 12345;
    kb_handle h[N];
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        int r = (int)(x >> 62);
        uint64_t d = (x >> 33) % 50; /* many ties, some zero durations */
        h[i] = des_compute(e, r, d);
        cpu[r] += d;
        end[i] = cpu[r];
        CHECK_EQ_U64(h[i], (uint64_t)i + 1);
    }
    int target = 137;
    uint64_t before = 0;
    for (int i = 0; i < N; i++)
        before += end[i] < end[target] || (end[i] == end[target] && i <= target);
    CHECK(des_await(e, ctx, 0, h[target]) == 0);
    des_stats st;
    des_engine_stats(e, &st);
    CHECK_EQ_U64(st.events, before);
    CHECK_EQ_U64(st.horizon_ns, end[target]);
    teardown(e, ctx);
}

static void test_errors(void)
{
    des_engine *e;
    kb_ctx *ctx;
    if (!setup(2, &e, &ctx)) {
        failed++;
        return;
    }
    CHECK(des_compute(e, 2, 1) == 0);
    CHECK(strstr(des_engine_error(e), "out of range") != NULL);
    CHECK(des_compute(e, -1, 1) == 0);
    CHECK(des_send(e, 0, 0, 1, NULL, 0) == 0); /* to itself */
    CHECK(des_send(e, 0, 1, 1, NULL, 4) == 0); /* NULL payload */
    CHECK(des_compute(e, 0, UINT64_MAX) != 0); /* ends at UINT64_MAX */
    CHECK(des_compute(e, 0, 1) == 0);          /* would overflow */
    CHECK(des_send(e, 0, 1, UINT64_MAX / 999, NULL, 0) == 0);
    CHECK(des_allreduce_i64(e, 0, 1, NULL) == 0);

    /* Payload lengths must match. */
    char a[4] = "abc", b[8];
    CHECK(des_send(e, 1, 0, 1, a, sizeof a) != 0);
    CHECK(des_recv(e, 0, 1, b, sizeof b) == 0);

    /* A recv nobody sends to: the wait hook reports a deadlock, and the
     * handle stays open in the library. */
    kb_handle r = des_recv(e, 1, 0, NULL, 0);
    CHECK(r != 0);
    CHECK(des_await(e, ctx, 1, r) == DES_EDEADLOCK);
    CHECK(kb_is_completed(ctx, r) == 0);
    CHECK(des_await(e, ctx, 1, 9999) == DES_EUNKNOWN);
    CHECK(des_await(e, ctx, 1, 0) == DES_EUNKNOWN);
    CHECK(des_await(e, ctx, 5, r) == KB_EINVAL);
    CHECK(strcmp(des_strerror(DES_EDEADLOCK), des_strerror(12345)) != 0);
    teardown(e, ctx);
}

/* Failure through the library: rank 0 waits for a message rank 1 never
 * sends. The drain's engine wait fails, kb_spawn reports the engine code and
 * the handle, and the abort hook ran. */
typedef struct stuck_arg {
    des_engine *e;
    kb_handle recv;
} stuck_arg;

static int stuck_rank(int rank, void *arg)
{
    stuck_arg *a = arg;
    if (rank != 0)
        return 0;
    a->recv = des_recv(a->e, 0, 1, NULL, 0);
    if (a->recv == 0)
        return 1;
    return des_await(a->e, kb_current_ctx(), 0, a->recv);
}

static void test_drain_failure(void)
{
    des_engine *e;
    kb_ctx *ctx;
    if (!setup(2, &e, &ctx)) {
        failed++;
        return;
    }
    stuck_arg a = {.e = e};
    kb_spawn_error *err = NULL;
    int rc = kb_spawn(ctx, stuck_rank, &a, 2, NULL, &err);
    CHECK(rc == KB_ESPAWN);
    CHECK(err != NULL);
    if (err != NULL) {
        CHECK(kb_spawn_error_drain_code(err) == DES_EDEADLOCK);
        CHECK(kb_spawn_error_drain_handle(err) == a.recv);
        CHECK(kb_spawn_error_message(err)[0] != '\0');
    }
    kb_spawn_error_free(err);
    CHECK(strstr(des_engine_error(e), "rank 0's recv from rank 1") != NULL);
    /* The abort hook ran: the engine refuses new work. */
    CHECK(des_compute(e, 0, 1) == 0);
    teardown(e, ctx);
}

int main(void)
{
    test_point_to_point();
    test_allreduce();
    test_release_order();
    test_errors();
    test_drain_failure();
    printf("des_engine_test: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
