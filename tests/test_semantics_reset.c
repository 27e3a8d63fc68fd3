/* SPDX-License-Identifier: MIT */
/*
 * kb_ctx_reset: a new simulation on a ctx that ran one. A spawn after a
 * reset waits for the handles it names as the first spawn did (the engine
 * sees the same waits in the same order); without a reset the completed
 * set of the first spawn answers them at once. Only between spawns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"

#define STEPS 3

/* What the engine was asked to wait for, in order, as text. */
struct trace {
    char text[1024];
    size_t len;
};

static void trace_add(struct trace *t, const char *what, unsigned long long a, unsigned long long b)
{
    int n = snprintf(t->text + t->len, sizeof t->text - t->len, "%s %llu %llu\n", what, a, b);
    if (n > 0 && (size_t)n < sizeof t->text - t->len)
        t->len += (size_t)n;
}

static int trace_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)meta;
    trace_add(self, "engine wait, origin", (unsigned long long)h, (unsigned long long)origin);
    return 0;
}

/* Each rank waits for the handles 100 * (step + 1) + rank, the same names
 * in every simulation, and yields between them. */
static int sim_rank(int rank, void *arg)
{
    struct trace *t = arg;
    kb_ctx *ctx = kb_current_ctx();
    for (int step = 0; step < STEPS; step++) {
        kb_handle h = (kb_handle)(100 * (step + 1) + rank);
        trace_add(t, "rank waits", (unsigned long long)rank, (unsigned long long)h);
        int rc = kb_wait(ctx, h);
        if (rc != 0)
            return rc;
        kb_yield();
    }
    return 0;
}

static void simulate(kb_ctx *ctx, struct trace *t)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(kb_spawn(ctx, sim_rank, t, 3, NULL, NULL), 0);
}

static kb_ctx *tracing_ctx(struct trace *engine_trace)
{
    memset(engine_trace, 0, sizeof *engine_trace);
    kb_engine eng = {.self = engine_trace, .wait = trace_wait, .bind = NULL, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    return ctx;
}

static void test_a_simulation_after_reset_waits_as_the_first_did(void **state)
{
    (void)state;
    struct trace engine, first, second;
    kb_ctx *ctx = tracing_ctx(&engine);
    simulate(ctx, &first);
    char first_engine[sizeof engine.text];
    memcpy(first_engine, engine.text, sizeof first_engine);
    assert_true(strstr(first_engine, "engine wait, origin 101 0") != NULL);

    memset(&engine, 0, sizeof engine);
    assert_int_equal(kb_ctx_reset(ctx), 0);
    simulate(ctx, &second);
    assert_string_equal(second.text, first.text);
    assert_string_equal(engine.text, first_engine);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_without_reset_the_second_simulation_finds_its_handles_completed(void **state)
{
    (void)state;
    struct trace engine, first, second;
    kb_ctx *ctx = tracing_ctx(&engine);
    simulate(ctx, &first);
    memset(&engine, 0, sizeof engine);
    simulate(ctx, &second);
    assert_string_equal(engine.text, ""); /* every wait took the fast path */
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_reset_empties_the_completed_set_and_both_queues(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_complete(ctx, 7), 0);
    assert_int_equal(kb_enqueue_wait(ctx, 8), 0);
    assert_int_equal(kb_collective_submit(ctx, 9, 1, NULL), 0);
    assert_int_equal(kb_ctx_reset(ctx), 0);
    assert_int_equal(kb_is_completed(ctx, 7), 0);
    assert_int_equal(kb_completed_handles(ctx, NULL, 0), 0);
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
    assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 0);
    assert_int_equal(kb_complete(ctx, 7), 0); /* usable as a new ctx */
    assert_int_equal(kb_is_completed(ctx, 7), 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_reset_null_einval(void **state)
{
    (void)state;
    assert_int_equal(kb_ctx_reset(NULL), KB_EINVAL);
}

static void test_reset_with_a_live_process_context_ebusy(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    kb_process_context *pc = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_complete(ctx, 7), 0);
    kb_spawn_opts o = {.cancel_mode = KB_CANCEL_RETURN};
    assert_int_equal(kb_start(ctx, sim_rank, &(struct trace){0}, 2, &o, &pc), 0);
    assert_int_equal(kb_ctx_reset(ctx), KB_EBUSY);
    kb_process_context_free(pc);
    assert_int_equal(kb_is_completed(ctx, 7), 1); /* the refused reset changed nothing */
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

struct inside {
    kb_ctx *ctx;
    int from_rank;
    int from_hook;
};

static int reset_from_rank(int rank, void *arg)
{
    (void)rank;
    ((struct inside *)arg)->from_rank = kb_ctx_reset(kb_current_ctx());
    return kb_wait(kb_current_ctx(), 5); /* the drain calls the hook below */
}

static int reset_in_hook(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    struct inside *in = self;
    in->from_hook = kb_ctx_reset(in->ctx);
    return 0;
}

static void test_reset_from_a_rank_eperm_and_from_an_engine_hook_ebusy(void **state)
{
    (void)state;
    struct inside in = {NULL, 0, 0};
    kb_engine eng = {.self = &in, .wait = reset_in_hook, .bind = NULL, .abort = NULL};
    assert_int_equal(kb_ctx_create(&eng, &in.ctx), 0);
    assert_int_equal(kb_spawn(in.ctx, reset_from_rank, &in, 1, NULL, NULL), 0);
    assert_int_equal(in.from_rank, KB_EPERM);
    assert_int_equal(in.from_hook, KB_EBUSY);
    assert_int_equal(kb_ctx_destroy(in.ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_simulation_after_reset_waits_as_the_first_did),
        cmocka_unit_test(test_without_reset_the_second_simulation_finds_its_handles_completed),
        cmocka_unit_test(test_reset_empties_the_completed_set_and_both_queues),
        cmocka_unit_test(test_reset_null_einval),
        cmocka_unit_test(test_reset_with_a_live_process_context_ebusy),
        cmocka_unit_test(test_reset_from_a_rank_eperm_and_from_an_engine_hook_ebusy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
