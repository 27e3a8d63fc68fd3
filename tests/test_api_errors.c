/* SPDX-License-Identifier: MIT */
/*
 * Bad input and wrong-thread calls: every case of the contract gets its
 * documented code, nothing crashes and (under memcheck) nothing leaks.
 *
 * Rank functions, foreign threads and engine hooks never call cmocka's
 * assertions (a longjmp out of them would corrupt the library's state): they
 * record results in plain structs (safe: one thread runs at a time) and the
 * test asserts after the spawn returns.
 */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

#define H_OK ((kb_handle)42)

/* ------------------------------------------------------------------------ */
/* Counting engine and rank                                                  */
/* ------------------------------------------------------------------------ */

struct counts {
    int fn_calls;
    int bind_calls;
    int wait_calls;
    int abort_calls;
};

static int count_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    ((struct counts *)self)->wait_calls++;
    return 0;
}

static void count_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    (void)rank;
    ((struct counts *)self)->bind_calls++;
}

static void count_abort(void *self, kb_ctx *ctx)
{
    (void)ctx;
    ((struct counts *)self)->abort_calls++;
}

static kb_ctx *counting_ctx(struct counts *c)
{
    kb_engine eng = {.self = c, .wait = count_wait, .bind = count_bind, .abort = count_abort};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    assert_non_null(ctx);
    return ctx;
}

static kb_ctx *plain_ctx(void)
{
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_non_null(ctx);
    return ctx;
}

/* arg: struct counts *. */
static int counting_rank(int rank, void *arg)
{
    (void)rank;
    ((struct counts *)arg)->fn_calls++;
    kb_yield();
    return 0;
}

static int never_rank(int rank, void *arg)
{
    (void)rank;
    if (arg)
        ((struct counts *)arg)->fn_calls++;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Programs errors that must abort(): run in a forked child.                 */
/* ------------------------------------------------------------------------ */

/* what: the offending call, which the diagnostic must name. */
static void assert_child_aborted_with_diagnostic(int (*fn)(void *), const char *what, const char *call)
{
    /* Fork while this process has no library thread (every earlier test
     * destroyed its ctxs), so the child starts from a clean state. */
    assert_true(kbt_settle_tasks(1, 2000) <= 1);
    struct kbt_child res;
    assert_int_equal(kbt_run_forked(fn, NULL, kbt_on_valgrind() ? 120000 : 20000, &res), 0);
    if (res.timed_out || !WIFSIGNALED(res.status) || WTERMSIG(res.status) != SIGABRT) {
        fprintf(stderr, "%s: child status 0x%x (timed out: %d), output:\n%s\n", what, res.status,
                res.timed_out, res.out);
        fail_msg("%s did not abort()", what);
    }
    if (res.out_len == 0)
        fail_msg("%s aborted without a diagnostic on stderr", what);
    /* A crash report alone (rank threads get one on SIGABRT) is not enough:
     * the diagnostic names the call that was misused. */
    if (!strstr(res.out, call)) {
        fprintf(stderr, "%s: stderr was:\n%s\n", what, res.out);
        fail_msg("%s: the diagnostic does not name %s", what, call);
    }
    if (getenv("KBT_SHOW_DIAGNOSTICS"))
        fprintf(stderr, "%s:\n%s", what, res.out);
}

static int pcfree_rank(int rank, void *arg)
{
    (void)rank;
    kb_process_context **pc = arg;
    kb_process_context_free(*pc);
    return 0;
}

static int child_pc_free_in_rank(void *unused)
{
    (void)unused;
    kb_ctx *ctx = NULL;
    kb_process_context *pc = NULL;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 10;
    if (kb_start(ctx, pcfree_rank, &pc, 1, NULL, &pc) != 0)
        return 11;
    kb_join(pc, -1, NULL);
    return 12; /* not reached when the library aborts */
}

static void test_process_context_free_from_rank_aborts(void **state)
{
    (void)state;
    assert_child_aborted_with_diagnostic(child_pc_free_in_rank, "kb_process_context_free from a rank",
                                         "kb_process_context_free");
}

static int pcfree_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    kb_process_context_free(*(kb_process_context **)self);
    return 0;
}

static int child_pc_free_in_hook(void *unused)
{
    (void)unused;
    kb_ctx *a = NULL, *b = NULL;
    kb_process_context *pc = NULL;
    if (kb_ctx_create(NULL, &a) != 0)
        return 10;
    if (kb_start(a, never_rank, NULL, 2, NULL, &pc) != 0)
        return 11;
    kb_engine eng = {.self = &pc, .wait = pcfree_wait, .bind = NULL, .abort = NULL};
    if (kb_ctx_create(&eng, &b) != 0)
        return 12;
    kb_wait(b, H_OK); /* driver-side wait: the hook frees pc */
    return 13;
}

static void test_process_context_free_from_engine_hook_aborts(void **state)
{
    (void)state;
    assert_child_aborted_with_diagnostic(child_pc_free_in_hook, "kb_process_context_free from an engine hook",
                                         "kb_process_context_free");
}

static int child_raise_outside_rank(void *unused)
{
    (void)unused;
    kb_raise(5, "raised outside a rank");
}

static void test_raise_outside_rank_aborts(void **state)
{
    (void)state;
    assert_child_aborted_with_diagnostic(child_raise_outside_rank, "kb_raise outside a rank", "kb_raise");
}

static void raise_again(void *unused)
{
    (void)unused;
    kb_raise(6, "second raise while unwinding");
}

static int raise_twice_rank(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    pthread_cleanup_push(raise_again, NULL);
    kb_raise(5, "first raise");
    pthread_cleanup_pop(0);
    return 0;
}

static int child_raise_while_unwinding(void *unused)
{
    (void)unused;
    kb_ctx *ctx = NULL;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 10;
    kb_spawn(ctx, raise_twice_rank, NULL, 1, NULL, NULL);
    return 11;
}

static void test_raise_while_unwinding_aborts(void **state)
{
    (void)state;
    assert_child_aborted_with_diagnostic(child_raise_while_unwinding,
                                         "kb_raise from a cleanup handler of an unwind", "kb_raise");
}

/* ------------------------------------------------------------------------ */
/* Constants and NULL-tolerant functions                                     */
/* ------------------------------------------------------------------------ */

static void test_strerror_names_every_code_distinctly(void **state)
{
    (void)state;
    const int codes[] = {0, KB_EINVAL, KB_ENOMEM, KB_EAGAIN, KB_EBUSY, KB_EPERM, KB_ECANCELED, KB_ESPAWN};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = kb_strerror(codes[i]);
        assert_non_null(s);
        assert_true(s[0] != '\0');
        for (size_t j = 0; j < i; j++)
            if (strcmp(s, kb_strerror(codes[j])) == 0)
                fail_msg("kb_strerror(%d) and kb_strerror(%d) are both \"%s\"", codes[i], codes[j], s);
    }
    /* Any other value still gets a string. */
    const int others[] = {-ENOENT, -EIO, 1, 12345, INT_MIN, INT_MAX, -9999, -10001};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        assert_non_null(kb_strerror(others[i]));
}

static void test_version_equals_header(void **state)
{
    (void)state;
    assert_non_null(kb_version());
    assert_string_equal(kb_version(), KB_VERSION_STRING);
    char buf[64];
    snprintf(buf, sizeof buf, "%d.%d.%d", KB_VERSION_MAJOR, KB_VERSION_MINOR, KB_VERSION_PATCH);
    assert_string_equal(kb_version(), buf);
}

static void test_ctx_destroy_null_returns_0(void **state)
{
    (void)state;
    assert_int_equal(kb_ctx_destroy(NULL), 0);
}

static void test_free_functions_accept_null(void **state)
{
    (void)state;
    kb_spawn_error_free(NULL);
    kb_process_context_free(NULL);
}

static void test_spawn_error_accessors_accept_null(void **state)
{
    (void)state;
    assert_int_equal(kb_spawn_error_count(NULL), 0);
    assert_null(kb_spawn_error_get(NULL, 0));
    assert_non_null(kb_spawn_error_message(NULL));
    assert_string_equal(kb_spawn_error_message(NULL), "");
}

static int fail_rank1(int rank, void *arg)
{
    (void)arg;
    kb_yield();
    return rank == 1 ? 7 : 0;
}

static void test_spawn_error_get_out_of_range_returns_null(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, fail_rank1, NULL, 3, NULL, &err), KB_ESPAWN);
    assert_non_null(err);
    assert_int_equal(kb_spawn_error_count(err), 1);
    assert_non_null(kb_spawn_error_get(err, 0));
    assert_null(kb_spawn_error_get(err, 1));
    assert_null(kb_spawn_error_get(err, 2));
    assert_null(kb_spawn_error_get(err, SIZE_MAX));
    kb_spawn_error_free(err);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* ------------------------------------------------------------------------ */
/* Bad arguments                                                             */
/* ------------------------------------------------------------------------ */

static void test_ctx_create_null_out_einval(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_engine eng = {.self = &c, .wait = count_wait, .bind = count_bind, .abort = count_abort};
    assert_int_equal(kb_ctx_create(NULL, NULL), KB_EINVAL);
    assert_int_equal(kb_ctx_create(&eng, NULL), KB_EINVAL);
}

static void test_spawn_null_ctx_or_fn_einval(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(NULL, counting_rank, &c, 2, NULL, &err), KB_EINVAL);
    assert_int_equal(kb_spawn(ctx, NULL, &c, 2, NULL, &err), KB_EINVAL);
    assert_int_equal(kb_spawn(NULL, NULL, &c, 2, NULL, NULL), KB_EINVAL);
    kb_spawn_error_free(err);
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_spawn_negative_nprocs_einval(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, -1, NULL, NULL), KB_EINVAL);
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, INT_MIN, NULL, NULL), KB_EINVAL);
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    /* The ctx was not left busy. */
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, 1, NULL, NULL), 0);
    assert_int_equal(c.fn_calls, 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_start_bad_arguments_einval(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_process_context *pc = NULL;
    assert_int_equal(kb_start(NULL, counting_rank, &c, 1, NULL, &pc), KB_EINVAL);
    assert_int_equal(kb_start(ctx, NULL, &c, 1, NULL, &pc), KB_EINVAL);
    assert_int_equal(kb_start(ctx, counting_rank, &c, 1, NULL, NULL), KB_EINVAL);
    assert_int_equal(kb_start(ctx, counting_rank, &c, -1, NULL, &pc), KB_EINVAL);
    assert_int_equal(kb_start(ctx, counting_rank, &c, INT_MIN, NULL, &pc), KB_EINVAL);
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    /* Nothing made the ctx busy. */
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_join_null_pc_einval(void **state)
{
    (void)state;
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_join(NULL, -1, &err), KB_EINVAL);
    assert_int_equal(kb_join(NULL, 0, NULL), KB_EINVAL);
    kb_spawn_error_free(err);
}

static void test_handle_calls_null_ctx_einval(void **state)
{
    (void)state;
    int meta = 0;
    kb_handle buf[4];
    kb_collective cbuf[4];
    assert_int_equal(kb_wait(NULL, H_OK), KB_EINVAL);
    assert_int_equal(kb_wait_meta(NULL, H_OK, &meta), KB_EINVAL);
    assert_int_equal(kb_enqueue_wait(NULL, H_OK), KB_EINVAL);
    assert_int_equal(kb_complete(NULL, H_OK), KB_EINVAL);
    assert_int_equal(kb_is_completed(NULL, H_OK), KB_EINVAL);
    assert_int_equal(kb_collective_submit(NULL, H_OK, 0, &meta), KB_EINVAL);
    assert_int_equal(kb_pending_waits(NULL, buf, 4), 0);
    assert_int_equal(kb_pending_collectives(NULL, cbuf, 4), 0);
    assert_int_equal(kb_completed_handles(NULL, buf, 4), 0);
}

/* Call every handle-taking function with both reserved handles; record the
 * results in r[12]. */
static void reserved_calls(kb_ctx *ctx, int r[12])
{
    static int meta;
    const kb_handle hs[2] = {KB_HANDLE_RESERVED_LOW, KB_HANDLE_RESERVED_HIGH};
    for (int i = 0; i < 2; i++) {
        r[i * 6 + 0] = kb_wait(ctx, hs[i]);
        r[i * 6 + 1] = kb_wait_meta(ctx, hs[i], &meta);
        r[i * 6 + 2] = kb_enqueue_wait(ctx, hs[i]);
        r[i * 6 + 3] = kb_complete(ctx, hs[i]);
        r[i * 6 + 4] = kb_is_completed(ctx, hs[i]);
        r[i * 6 + 5] = kb_collective_submit(ctx, hs[i], 3, &meta);
    }
}

static const char *const reserved_names[6] = {"kb_wait",     "kb_wait_meta",    "kb_enqueue_wait",
                                              "kb_complete", "kb_is_completed", "kb_collective_submit"};

static void assert_all_einval(const int r[12])
{
    for (int i = 0; i < 12; i++)
        if (r[i] != KB_EINVAL)
            fail_msg("%s(%s) returned %d, want KB_EINVAL", reserved_names[i % 6], i < 6 ? "0" : "UINT64_MAX",
                     r[i]);
}

static void test_reserved_handles_einval_on_driver_side(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    int r[12];
    reserved_calls(ctx, r);
    assert_all_einval(r);
    assert_int_equal(c.wait_calls, 0);
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 0);
    assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

struct reserved_in_rank {
    int r[12];
    size_t pending_w, pending_c;
    int ran;
};

static int reserved_rank(int rank, void *arg)
{
    (void)rank;
    struct reserved_in_rank *s = arg;
    kb_ctx *ctx = kb_current_ctx();
    reserved_calls(ctx, s->r);
    s->pending_w = kb_pending_waits(ctx, NULL, 0);
    s->pending_c = kb_pending_collectives(ctx, NULL, 0);
    s->ran = 1;
    return 0;
}

static void test_reserved_handles_einval_in_rank(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    struct reserved_in_rank s;
    memset(&s, 0, sizeof s);
    assert_int_equal(kb_spawn(ctx, reserved_rank, &s, 1, NULL, NULL), 0);
    assert_int_equal(s.ran, 1);
    assert_all_einval(s.r);
    assert_int_equal(s.pending_w, 0);
    assert_int_equal(s.pending_c, 0);
    assert_int_equal(c.wait_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_pending_null_out_with_cap_returns_0(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_enqueue_wait(ctx, 5), 0);
    assert_int_equal(kb_enqueue_wait(ctx, 6), 0);
    assert_int_equal(kb_collective_submit(ctx, 7, 1, NULL), 0);
    assert_int_equal(kb_pending_waits(ctx, NULL, 1), 0);
    assert_int_equal(kb_pending_collectives(ctx, NULL, 1), 0);
    /* cap 0 with NULL out is the documented way to count. */
    assert_int_equal(kb_pending_waits(ctx, NULL, 0), 2);
    assert_int_equal(kb_pending_collectives(ctx, NULL, 0), 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* kb_completed_handles: the count with a NULL out and cap 0, every handle
 * once (in no particular order), a short buffer filled to cap, 0 for a
 * NULL out with cap > 0. */
static void test_completed_handles_lists_every_completed_handle_once(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_completed_handles(ctx, NULL, 0), 0);
    for (kb_handle h = 1; h <= 100; h++)
        assert_int_equal(kb_complete(ctx, h * 7), 0);
    assert_int_equal(kb_complete(ctx, 7), 0); /* twice: still one */
    assert_int_equal(kb_completed_handles(ctx, NULL, 0), 100);
    assert_int_equal(kb_completed_handles(ctx, NULL, 1), 0);
    kb_handle all[128] = {0};
    assert_int_equal(kb_completed_handles(ctx, all, 128), 100);
    int seen[101] = {0};
    for (int i = 0; i < 100; i++) {
        assert_int_equal(all[i] % 7, 0);
        assert_true(all[i] / 7 >= 1 && all[i] / 7 <= 100);
        seen[all[i] / 7]++;
    }
    for (int h = 1; h <= 100; h++)
        assert_int_equal(seen[h], 1);
    kb_handle few[3] = {0};
    assert_int_equal(kb_completed_handles(ctx, few, 3), 100);
    for (int i = 0; i < 3; i++)
        assert_int_equal(few[i] % 7, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_stack_size_below_minimum_einval(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    const size_t sizes[] = {1, 4096, (size_t)PTHREAD_STACK_MIN - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        kb_spawn_opts o = {.stack_size = sizes[i], .cancel_mode = KB_CANCEL_UNWIND};
        kb_process_context *pc = NULL;
        assert_int_equal(kb_spawn(ctx, counting_rank, &c, 2, &o, NULL), KB_EINVAL);
        assert_int_equal(kb_start(ctx, counting_rank, &c, 2, &o, &pc), KB_EINVAL);
    }
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_stack_size_at_minimum_accepted(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_spawn_opts o = {.stack_size = (size_t)PTHREAD_STACK_MIN, .cancel_mode = KB_CANCEL_UNWIND};
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, 2, &o, NULL), 0);
    assert_int_equal(c.fn_calls, 2);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_unknown_cancel_mode_einval(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    const int modes[] = {2, 3, -1, INT_MAX};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        kb_spawn_opts o;
        memset(&o, 0, sizeof o);
        o.cancel_mode = (kb_cancel_mode)modes[i];
        kb_process_context *pc = NULL;
        assert_int_equal(kb_spawn(ctx, counting_rank, &c, 2, &o, NULL), KB_EINVAL);
        assert_int_equal(kb_start(ctx, counting_rank, &c, 2, &o, &pc), KB_EINVAL);
    }
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(c.bind_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

struct fail0 {
    int rc_null_fmt, rc_fmt;
};

static int fail0_rank(int rank, void *arg)
{
    (void)rank;
    struct fail0 *s = arg;
    s->rc_null_fmt = kb_fail(0, NULL);
    s->rc_fmt = kb_fail(0, "code %d", 0);
    return 0;
}

static void test_fail_code_0_in_rank_einval_and_not_recorded(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    struct fail0 s = {1, 1};
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, fail0_rank, &s, 1, NULL, &err), 0);
    assert_null(err);
    assert_int_equal(s.rc_null_fmt, KB_EINVAL);
    assert_int_equal(s.rc_fmt, KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* ------------------------------------------------------------------------ */
/* Rank-only calls outside a rank                                            */
/* ------------------------------------------------------------------------ */

static void test_rank_calls_outside_rank_eperm(void **state)
{
    (void)state;
    assert_int_equal(kb_yield(), KB_EPERM);
    assert_int_equal(kb_barrier(), KB_EPERM);
    assert_int_equal(kb_fail(5, "outside"), KB_EPERM);
    assert_int_equal(kb_fail(5, NULL), KB_EPERM);
}

static void test_rank_queries_outside_rank_give_defaults(void **state)
{
    (void)state;
    assert_int_equal(kb_rank(), -1);
    assert_int_equal(kb_world_size(), 0);
    assert_null(kb_current_ctx());
    assert_int_equal(kb_cancelled(), 0);
}

struct outside_probe {
    int yield_rc, barrier_rc, fail_rc, rank, world, cancelled;
    kb_ctx *cur;
    int done;
};

static void outside_probe_run(struct outside_probe *p)
{
    p->yield_rc = kb_yield();
    p->barrier_rc = kb_barrier();
    p->fail_rc = kb_fail(9, "not a rank");
    p->rank = kb_rank();
    p->world = kb_world_size();
    p->cur = kb_current_ctx();
    p->cancelled = kb_cancelled();
    p->done = 1;
}

static void assert_outside_probe(const struct outside_probe *p)
{
    assert_int_equal(p->done, 1);
    assert_int_equal(p->yield_rc, KB_EPERM);
    assert_int_equal(p->barrier_rc, KB_EPERM);
    assert_int_equal(p->fail_rc, KB_EPERM);
    assert_int_equal(p->rank, -1);
    assert_int_equal(p->world, 0);
    assert_null(p->cur);
    assert_int_equal(p->cancelled, 0);
}

static int outside_probe_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    struct outside_probe *p = self;
    if (origin == KB_WAIT_QUEUED && !p->done)
        outside_probe_run(p);
    return 0;
}

static int wait_once_rank(int rank, void *arg)
{
    (void)arg;
    kb_wait(kb_current_ctx(), (kb_handle)(100 + rank));
    return 0;
}

static void test_rank_calls_in_engine_hook_eperm(void **state)
{
    (void)state;
    struct outside_probe p;
    memset(&p, 0, sizeof p);
    kb_engine eng = {.self = &p, .wait = outside_probe_wait, .bind = NULL, .abort = NULL};
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(&eng, &ctx), 0);
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(ctx, wait_once_rank, NULL, 3, NULL, &err), 0);
    assert_null(err);
    assert_outside_probe(&p);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* ------------------------------------------------------------------------ */
/* Foreign threads (plain pthreads started inside a rank)                    */
/* ------------------------------------------------------------------------ */

struct foreign {
    kb_ctx *ctx;            /* the running ctx */
    kb_process_context *pc; /* for the second-joiner test */
    /* results */
    int r_wait, r_wait_meta, r_enqueue, r_complete, r_is_completed, r_submit;
    size_t pend_w, pend_c;
    int r_spawn, r_start, r_destroy, r_join;
    int r_reserved_wait, r_reserved_complete, r_null_fn_spawn;
    kb_process_context *leaked_pc;
    struct outside_probe outside;
    /* the rank's own view afterwards */
    size_t rank_pend_w, rank_pend_c;
    int rank_sees_foreign_completed;
    int rank_fn_calls_of_foreign_spawn;
    int ran;
};

#define H_FOREIGN      ((kb_handle)7001)
#define H_RANK_PENDING ((kb_handle)7002)
#define H_RANK_COLL    ((kb_handle)7003)

static void *foreign_handle_calls(void *arg)
{
    struct foreign *f = arg;
    static int meta;
    f->r_wait = kb_wait(f->ctx, H_FOREIGN);
    f->r_wait_meta = kb_wait_meta(f->ctx, H_FOREIGN, &meta);
    f->r_enqueue = kb_enqueue_wait(f->ctx, H_FOREIGN);
    f->r_complete = kb_complete(f->ctx, H_FOREIGN);
    f->r_is_completed = kb_is_completed(f->ctx, H_FOREIGN);
    f->r_submit = kb_collective_submit(f->ctx, H_FOREIGN, 1, &meta);
    f->pend_w = kb_pending_waits(f->ctx, NULL, 0);
    f->pend_c = kb_pending_collectives(f->ctx, NULL, 0);
    outside_probe_run(&f->outside);
    return NULL;
}

static void *foreign_driver_calls(void *arg)
{
    struct foreign *f = arg;
    kb_process_context *pc = NULL;
    f->r_spawn = kb_spawn(f->ctx, never_rank, &f->rank_fn_calls_of_foreign_spawn, 1, NULL, NULL);
    f->r_start = kb_start(f->ctx, never_rank, NULL, 1, NULL, &pc);
    if (f->r_start == 0)
        f->leaked_pc = pc;
    f->r_destroy = kb_ctx_destroy(f->ctx);
    return NULL;
}

static void *foreign_precedence_calls(void *arg)
{
    struct foreign *f = arg;
    f->r_reserved_wait = kb_wait(f->ctx, KB_HANDLE_RESERVED_LOW);
    f->r_reserved_complete = kb_complete(f->ctx, KB_HANDLE_RESERVED_HIGH);
    f->r_null_fn_spawn = kb_spawn(f->ctx, NULL, NULL, 1, NULL, NULL);
    return NULL;
}

static void *foreign_join(void *arg)
{
    struct foreign *f = arg;
    f->r_join = kb_join(f->pc, 0, NULL);
    return NULL;
}

static void run_foreign_thread(void *(*body)(void *), struct foreign *f)
{
    pthread_t t;
    if (pthread_create(&t, NULL, body, f) == 0)
        pthread_join(t, NULL);
}

/* Rank 0 queues one wait and one collective, runs the foreign thread while it
 * holds the baton, then looks at the ctx itself. arg: struct foreign with
 * foreign_fn stored in a file-scope variable. */
static void *(*foreign_body)(void *);

static int foreign_rank(int rank, void *arg)
{
    struct foreign *f = arg;
    if (rank == 0) {
        f->ctx = kb_current_ctx();
        kb_enqueue_wait(f->ctx, H_RANK_PENDING);
        kb_collective_submit(f->ctx, H_RANK_COLL, 0, NULL);
        run_foreign_thread(foreign_body, f);
        f->rank_pend_w = kb_pending_waits(f->ctx, NULL, 0);
        f->rank_pend_c = kb_pending_collectives(f->ctx, NULL, 0);
        f->rank_sees_foreign_completed = kb_is_completed(f->ctx, H_FOREIGN);
        f->ran = 1;
    }
    kb_yield();
    return 0;
}

static void test_foreign_thread_handle_calls_ebusy(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    struct foreign f;
    memset(&f, 0, sizeof f);
    foreign_body = foreign_handle_calls;
    assert_int_equal(kb_spawn(ctx, foreign_rank, &f, 2, NULL, NULL), 0);
    assert_int_equal(f.ran, 1);
    assert_int_equal(f.r_wait, KB_EBUSY);
    assert_int_equal(f.r_wait_meta, KB_EBUSY);
    assert_int_equal(f.r_enqueue, KB_EBUSY);
    assert_int_equal(f.r_complete, KB_EBUSY);
    assert_int_equal(f.r_is_completed, KB_EBUSY);
    assert_int_equal(f.r_submit, KB_EBUSY);
    /* "Returns 0 for ... a thread that may not touch ctx", though 1+1 are pending. */
    assert_int_equal(f.pend_w, 0);
    assert_int_equal(f.pend_c, 0);
    assert_int_equal(f.rank_pend_w, 1);
    assert_int_equal(f.rank_pend_c, 1);
    /* Nothing the foreign thread asked for happened. */
    assert_int_equal(f.rank_sees_foreign_completed, 0);
    assert_int_equal(kb_is_completed(ctx, H_FOREIGN), 0);
    assert_int_equal(kb_is_completed(ctx, H_RANK_PENDING), 1);
    assert_int_equal(kb_is_completed(ctx, H_RANK_COLL), 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_rank_calls_from_foreign_thread_eperm(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    struct foreign f;
    memset(&f, 0, sizeof f);
    foreign_body = foreign_handle_calls;
    assert_int_equal(kb_spawn(ctx, foreign_rank, &f, 2, NULL, NULL), 0);
    assert_outside_probe(&f.outside);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_foreign_thread_driver_calls_on_running_ctx_ebusy(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    struct foreign f;
    memset(&f, 0, sizeof f);
    foreign_body = foreign_driver_calls;
    assert_int_equal(kb_spawn(ctx, foreign_rank, &f, 2, NULL, NULL), 0);
    assert_int_equal(f.ran, 1);
    assert_int_equal(f.r_spawn, KB_EBUSY);
    assert_int_equal(f.r_start, KB_EBUSY);
    assert_int_equal(f.r_destroy, KB_EBUSY);
    assert_int_equal(f.rank_fn_calls_of_foreign_spawn, 0);
    kb_process_context_free(f.leaked_pc);
    assert_int_equal(c.bind_calls, 2);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static int join_probe_rank(int rank, void *arg)
{
    struct foreign *f = arg;
    if (rank == 0) {
        run_foreign_thread(foreign_join, f);
        f->ran = 1;
    }
    kb_yield();
    return 0;
}

static void test_second_joiner_ebusy(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    struct foreign f;
    memset(&f, 0, sizeof f);
    f.r_join = 12345;
    assert_int_equal(kb_start(ctx, join_probe_rank, &f, 2, NULL, &f.pc), 0);
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_join(f.pc, -1, &err), 1);
    assert_null(err);
    assert_int_equal(f.ran, 1);
    assert_int_equal(f.r_join, KB_EBUSY);
    kb_process_context_free(f.pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* ------------------------------------------------------------------------ */
/* Driver-only calls inside a rank                                           */
/* ------------------------------------------------------------------------ */

struct in_rank {
    kb_ctx *other;      /* an idle ctx */
    kb_ctx *busy_other; /* a ctx with a live process context */
    kb_process_context *pc_other;
    kb_process_context *own_pc; /* set when the rank runs under kb_start */
    struct counts other_counts;
    int r_spawn_own, r_spawn_other, r_start_own, r_start_other, r_join_other, r_join_own, r_destroy_own;
    kb_process_context *leaked[2];
    /* handle calls on another ctx */
    int r_wait, r_wait_meta, r_enqueue, r_complete, r_is_completed, r_submit;
    size_t pend_w_other, pend_c_other;
    /* precedence */
    int p_spawn_null_fn, p_spawn_neg, p_start_bad_mode, p_start_null_out, p_join_null, p_wait_other_reserved,
        p_enqueue_null_ctx, p_enqueue_busy_other, p_spawn_other_bad_stack;
    int ran;
};

static int driver_calls_rank(int rank, void *arg)
{
    struct in_rank *s = arg;
    if (rank == 0) {
        kb_ctx *own = kb_current_ctx();
        kb_process_context *pc = NULL;
        s->r_spawn_own = kb_spawn(own, never_rank, &s->other_counts, 1, NULL, NULL);
        s->r_spawn_other = kb_spawn(s->other, never_rank, &s->other_counts, 1, NULL, NULL);
        s->r_start_own = kb_start(own, never_rank, &s->other_counts, 1, NULL, &pc);
        if (s->r_start_own == 0)
            s->leaked[0] = pc;
        pc = NULL;
        s->r_start_other = kb_start(s->other, never_rank, &s->other_counts, 1, NULL, &pc);
        if (s->r_start_other == 0)
            s->leaked[1] = pc;
        s->r_join_other = s->pc_other ? kb_join(s->pc_other, 0, NULL) : 0;
        s->r_join_own = s->own_pc ? kb_join(s->own_pc, 0, NULL) : 0;
        s->r_destroy_own = kb_ctx_destroy(own);
        s->ran = 1;
    }
    kb_yield();
    return 0;
}

static void in_rank_setup(struct in_rank *s)
{
    memset(s, 0, sizeof *s);
    s->other = counting_ctx(&s->other_counts);
    s->busy_other = plain_ctx();
    assert_int_equal(kb_start(s->busy_other, never_rank, &s->other_counts, 1, NULL, &s->pc_other), 0);
}

static void in_rank_teardown(struct in_rank *s)
{
    kb_process_context_free(s->leaked[0]);
    kb_process_context_free(s->leaked[1]);
    kb_process_context_free(s->pc_other);
    assert_int_equal(kb_ctx_destroy(s->busy_other), 0);
    assert_int_equal(kb_ctx_destroy(s->other), 0);
}

static void test_spawn_in_rank_eperm(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_spawn(ctx, driver_calls_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.r_spawn_own, KB_EPERM);
    assert_int_equal(s.r_spawn_other, KB_EPERM);
    assert_int_equal(s.other_counts.fn_calls, 0);
    assert_int_equal(s.other_counts.bind_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

static void test_start_in_rank_eperm(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_spawn(ctx, driver_calls_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.r_start_own, KB_EPERM);
    assert_int_equal(s.r_start_other, KB_EPERM);
    assert_int_equal(s.other_counts.bind_calls, 0);
    /* The idle ctx was not made busy. */
    assert_int_equal(kb_spawn(s.other, never_rank, NULL, 1, NULL, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

static void test_join_in_rank_eperm(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_start(ctx, driver_calls_rank, &s, 2, NULL, &s.own_pc), 0);
    assert_int_equal(kb_join(s.own_pc, -1, NULL), 1);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.r_join_other, KB_EPERM);
    assert_int_equal(s.r_join_own, KB_EPERM);
    /* The other process context's rank never ran. */
    assert_int_equal(s.other_counts.fn_calls, 0);
    kb_process_context_free(s.own_pc);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

static void test_ctx_destroy_own_ctx_in_rank_eperm(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_spawn(ctx, driver_calls_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.r_destroy_own, KB_EPERM);
    /* Still usable. */
    assert_int_equal(kb_spawn(ctx, never_rank, NULL, 2, NULL, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

#define H_OTHER_PENDING ((kb_handle)8001)
#define H_OTHER_PROBE   ((kb_handle)8002)

static int other_ctx_rank(int rank, void *arg)
{
    struct in_rank *s = arg;
    static int meta;
    if (rank == 0) {
        s->r_wait = kb_wait(s->other, H_OTHER_PROBE);
        s->r_wait_meta = kb_wait_meta(s->other, H_OTHER_PROBE, &meta);
        s->r_enqueue = kb_enqueue_wait(s->other, H_OTHER_PROBE);
        s->r_complete = kb_complete(s->other, H_OTHER_PROBE);
        s->r_is_completed = kb_is_completed(s->other, H_OTHER_PROBE);
        s->r_submit = kb_collective_submit(s->other, H_OTHER_PROBE, 2, &meta);
        s->pend_w_other = kb_pending_waits(s->other, NULL, 0);
        s->pend_c_other = kb_pending_collectives(s->other, NULL, 0);
        s->ran = 1;
    }
    kb_yield();
    return 0;
}

static void test_rank_calls_on_other_ctx_eperm(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    assert_int_equal(kb_enqueue_wait(s.other, H_OTHER_PENDING), 0);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_spawn(ctx, other_ctx_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.r_wait, KB_EPERM);
    assert_int_equal(s.r_wait_meta, KB_EPERM);
    assert_int_equal(s.r_enqueue, KB_EPERM);
    assert_int_equal(s.r_complete, KB_EPERM);
    assert_int_equal(s.r_is_completed, KB_EPERM);
    assert_int_equal(s.r_submit, KB_EPERM);
    assert_int_equal(s.pend_w_other, 0); /* not allowed to look, though 1 is pending */
    assert_int_equal(s.pend_c_other, 0);
    /* The other ctx is untouched. */
    kb_handle buf[4] = {0};
    assert_int_equal(kb_pending_waits(s.other, buf, 4), 1);
    assert_int_equal(buf[0], H_OTHER_PENDING);
    assert_int_equal(kb_pending_collectives(s.other, NULL, 0), 0);
    assert_int_equal(kb_is_completed(s.other, H_OTHER_PROBE), 0);
    assert_int_equal(s.other_counts.wait_calls, 0);
    assert_int_equal(kb_is_completed(ctx, H_OTHER_PROBE), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

/* ------------------------------------------------------------------------ */
/* Driver calls from engine hooks                                            */
/* ------------------------------------------------------------------------ */

enum probe_where { AT_BIND, AT_DRAIN_WAIT, AT_DRIVER_WAIT, AT_ABORT };

struct probe {
    enum probe_where where;
    kb_ctx *driven;
    kb_process_context *driven_pc; /* when driven by kb_start/kb_join */
    kb_ctx *idle, *idle2, *third;
    kb_process_context *third_pc;
    struct counts idle_counts, third_counts;
    int done;
    /* results */
    int spawn_driven, spawn_idle, start_driven, start_idle, join_third, join_driven, destroy_driven,
        destroy_idle;
    kb_process_context *leaked[2];
    int idle2_destroyed;
    /* precedence */
    int p_spawn_null_fn, p_start_null_out, p_spawn_bad_stack, p_join_null, p_start_neg;
    struct outside_probe outside;
};

static void probe_now(struct probe *p)
{
    if (p->done)
        return;
    p->done = 1;
    kb_process_context *pc = NULL;
    p->spawn_driven = kb_spawn(p->driven, never_rank, &p->idle_counts, 1, NULL, NULL);
    p->spawn_idle = kb_spawn(p->idle, never_rank, &p->idle_counts, 1, NULL, NULL);
    p->start_driven = kb_start(p->driven, never_rank, &p->idle_counts, 1, NULL, &pc);
    if (p->start_driven == 0)
        p->leaked[0] = pc;
    pc = NULL;
    p->start_idle = kb_start(p->idle, never_rank, &p->idle_counts, 1, NULL, &pc);
    if (p->start_idle == 0)
        p->leaked[1] = pc;
    p->join_third = kb_join(p->third_pc, 0, NULL);
    p->join_driven = p->driven_pc ? kb_join(p->driven_pc, 0, NULL) : KB_EBUSY;
    p->destroy_driven = kb_ctx_destroy(p->driven);
    p->destroy_idle = kb_ctx_destroy(p->idle2);
    p->idle2_destroyed = p->destroy_idle == 0;
    /* precedence: bad arguments win over "from a hook" */
    kb_spawn_opts bad = {.stack_size = 1, .cancel_mode = KB_CANCEL_UNWIND};
    p->p_spawn_null_fn = kb_spawn(p->idle, NULL, NULL, 1, NULL, NULL);
    p->p_start_null_out = kb_start(p->idle, never_rank, NULL, 1, NULL, NULL);
    p->p_spawn_bad_stack = kb_spawn(p->driven, never_rank, NULL, 1, &bad, NULL);
    p->p_start_neg = kb_start(p->idle, never_rank, NULL, -3, NULL, &pc);
    p->p_join_null = kb_join(NULL, 0, NULL);
    outside_probe_run(&p->outside);
}

static int probe_wait(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    struct probe *p = self;
    if ((p->where == AT_DRAIN_WAIT && origin == KB_WAIT_QUEUED) ||
        (p->where == AT_DRIVER_WAIT && origin == KB_WAIT_DRIVER))
        probe_now(p);
    return 0;
}

static void probe_bind(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    struct probe *p = self;
    if (p->where == AT_BIND && rank == 1)
        probe_now(p);
}

static void probe_abort(void *self, kb_ctx *ctx)
{
    (void)ctx;
    struct probe *p = self;
    if (p->where == AT_ABORT)
        probe_now(p);
}

static void probe_setup(struct probe *p, enum probe_where where)
{
    memset(p, 0, sizeof *p);
    p->where = where;
    kb_engine eng = {.self = p, .wait = probe_wait, .bind = probe_bind, .abort = probe_abort};
    assert_int_equal(kb_ctx_create(&eng, &p->driven), 0);
    p->idle = counting_ctx(&p->idle_counts);
    p->idle2 = plain_ctx();
    p->third = plain_ctx();
    assert_int_equal(kb_start(p->third, never_rank, &p->third_counts, 1, NULL, &p->third_pc), 0);
}

static void probe_assert_busy(const struct probe *p)
{
    assert_int_equal(p->done, 1);
    assert_int_equal(p->spawn_driven, KB_EBUSY);
    assert_int_equal(p->spawn_idle, KB_EBUSY);
    assert_int_equal(p->start_driven, KB_EBUSY);
    assert_int_equal(p->start_idle, KB_EBUSY);
    assert_int_equal(p->join_third, KB_EBUSY);
    assert_int_equal(p->join_driven, KB_EBUSY);
    assert_int_equal(p->destroy_driven, KB_EBUSY);
    assert_int_equal(p->destroy_idle, KB_EBUSY);
    /* Nothing those calls would have done happened. */
    assert_int_equal(p->idle_counts.fn_calls, 0);
    assert_int_equal(p->idle_counts.bind_calls, 0);
    assert_int_equal(p->third_counts.fn_calls, 0);
}

static void probe_teardown(struct probe *p)
{
    kb_process_context_free(p->leaked[0]);
    kb_process_context_free(p->leaked[1]);
    kb_process_context_free(p->third_pc);
    assert_int_equal(kb_ctx_destroy(p->third), 0);
    if (!p->idle2_destroyed)
        assert_int_equal(kb_ctx_destroy(p->idle2), 0);
    assert_int_equal(kb_ctx_destroy(p->idle), 0);
    assert_int_equal(kb_ctx_destroy(p->driven), 0);
}

static int yield_wait_rank(int rank, void *arg)
{
    (void)arg;
    kb_yield();
    kb_wait(kb_current_ctx(), (kb_handle)(500 + rank));
    return 0;
}

static int yield_fail_rank(int rank, void *arg)
{
    (void)arg;
    kb_yield();
    if (rank == 0)
        return 3;
    kb_yield();
    return 0;
}

static void test_driver_calls_in_bind_hook_ebusy(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_BIND);
    assert_int_equal(kb_spawn(p.driven, yield_wait_rank, NULL, 2, NULL, NULL), 0);
    probe_assert_busy(&p);
    probe_teardown(&p);
}

static void test_driver_calls_in_drain_wait_hook_ebusy(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_DRAIN_WAIT);
    assert_int_equal(kb_spawn(p.driven, yield_wait_rank, NULL, 2, NULL, NULL), 0);
    probe_assert_busy(&p);
    probe_teardown(&p);
}

static void test_driver_calls_in_driver_side_wait_hook_ebusy(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_DRIVER_WAIT);
    assert_int_equal(kb_wait(p.driven, H_OK), 0);
    assert_int_equal(kb_is_completed(p.driven, H_OK), 1);
    probe_assert_busy(&p);
    probe_teardown(&p);
}

static void test_driver_calls_in_abort_hook_ebusy(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_ABORT);
    kb_spawn_error *err = NULL;
    assert_int_equal(kb_spawn(p.driven, yield_fail_rank, NULL, 3, NULL, &err), KB_ESPAWN);
    kb_spawn_error_free(err);
    probe_assert_busy(&p);
    probe_teardown(&p);
}

static void test_driver_calls_in_bind_hook_of_start_ebusy(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_BIND);
    kb_process_context *pc = NULL;
    assert_int_equal(kb_start(p.driven, yield_wait_rank, NULL, 2, NULL, &pc), 0);
    assert_int_equal(p.done, 1);
    assert_int_equal(kb_join(pc, -1, NULL), 1);
    kb_process_context_free(pc);
    probe_assert_busy(&p);
    probe_teardown(&p);
}

static void test_driver_calls_in_wait_hook_of_join_ebusy(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_DRAIN_WAIT);
    assert_int_equal(kb_start(p.driven, yield_wait_rank, NULL, 2, NULL, &p.driven_pc), 0);
    assert_int_equal(kb_join(p.driven_pc, -1, NULL), 1);
    kb_process_context_free(p.driven_pc);
    probe_assert_busy(&p);
    probe_teardown(&p);
}

/* ------------------------------------------------------------------------ */
/* A second driver on a busy ctx                                             */
/* ------------------------------------------------------------------------ */

static void assert_ctx_busy(kb_ctx *ctx, struct counts *c)
{
    kb_process_context *pc2 = NULL;
    int before = c->fn_calls;
    assert_int_equal(kb_spawn(ctx, counting_rank, c, 1, NULL, NULL), KB_EBUSY);
    assert_int_equal(kb_start(ctx, counting_rank, c, 1, NULL, &pc2), KB_EBUSY);
    assert_int_equal(kb_ctx_destroy(ctx), KB_EBUSY);
    assert_int_equal(c->fn_calls, before);
}

static void test_live_process_context_makes_ctx_busy(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_process_context *pc = NULL;
    assert_int_equal(kb_start(ctx, counting_rank, &c, 2, NULL, &pc), 0);
    assert_int_equal(c.bind_calls, 2);
    assert_ctx_busy(ctx, &c);
    /* Between kb_join calls (not finished) it stays busy. */
    assert_int_equal(kb_join(pc, 0, NULL), 0);
    assert_ctx_busy(ctx, &c);
    assert_int_equal(kb_join(pc, -1, NULL), 1);
    assert_int_equal(c.fn_calls, 2);
    /* Finished but not freed: still busy. */
    assert_ctx_busy(ctx, &c);
    assert_int_equal(c.bind_calls, 2);
    kb_process_context_free(pc);
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, 2, NULL, NULL), 0);
    assert_int_equal(c.fn_calls, 4);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_process_context_with_0_ranks_keeps_ctx_busy(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_process_context *pc = NULL;
    assert_int_equal(kb_start(ctx, counting_rank, &c, 0, NULL, &pc), 0);
    assert_ctx_busy(ctx, &c);
    assert_int_equal(kb_join(pc, -1, NULL), 1);
    assert_ctx_busy(ctx, &c);
    kb_process_context_free(pc);
    assert_int_equal(c.abort_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_unjoined_process_context_makes_ctx_busy_until_freed(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_process_context *pc = NULL;
    assert_int_equal(kb_start(ctx, counting_rank, &c, 3, NULL, &pc), 0);
    assert_ctx_busy(ctx, &c);
    kb_process_context_free(pc); /* never joined: no rank ever runs */
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

/* ------------------------------------------------------------------------ */
/* Error precedence                                                          */
/* ------------------------------------------------------------------------ */

static int precedence_rank(int rank, void *arg)
{
    struct in_rank *s = arg;
    if (rank == 0) {
        kb_ctx *own = kb_current_ctx();
        kb_process_context *pc = NULL;
        kb_spawn_opts bad_mode = {.stack_size = 0, .cancel_mode = (kb_cancel_mode)7};
        kb_spawn_opts bad_stack = {.stack_size = 1, .cancel_mode = KB_CANCEL_UNWIND};
        s->p_spawn_null_fn = kb_spawn(own, NULL, NULL, 1, NULL, NULL);
        s->p_spawn_neg = kb_spawn(own, never_rank, NULL, -1, NULL, NULL);
        s->p_start_bad_mode = kb_start(own, never_rank, NULL, 1, &bad_mode, &pc);
        s->p_start_null_out = kb_start(s->other, never_rank, NULL, 1, NULL, NULL);
        s->p_join_null = kb_join(NULL, 0, NULL);
        s->p_wait_other_reserved = kb_wait(s->other, KB_HANDLE_RESERVED_LOW);
        s->p_enqueue_null_ctx = kb_enqueue_wait(NULL, H_OK);
        s->p_spawn_other_bad_stack = kb_spawn(s->busy_other, never_rank, NULL, 1, &bad_stack, NULL);
        /* EPERM before EBUSY: own ctx is busy, busy_other has a live pc */
        s->r_spawn_own = kb_spawn(own, never_rank, NULL, 1, NULL, NULL);
        s->r_destroy_own = kb_ctx_destroy(own);
        s->p_enqueue_busy_other = kb_enqueue_wait(s->busy_other, H_OK);
        s->r_spawn_other = kb_spawn(s->busy_other, never_rank, NULL, 1, NULL, NULL);
        s->r_join_own = s->own_pc ? kb_join(s->own_pc, 0, NULL) : KB_EPERM;
        s->ran = 1;
    }
    kb_yield();
    return 0;
}

static void test_precedence_einval_before_eperm_in_rank(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_spawn(ctx, precedence_rank, &s, 2, NULL, NULL), 0);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.p_spawn_null_fn, KB_EINVAL);
    assert_int_equal(s.p_spawn_neg, KB_EINVAL);
    assert_int_equal(s.p_start_bad_mode, KB_EINVAL);
    assert_int_equal(s.p_start_null_out, KB_EINVAL);
    assert_int_equal(s.p_join_null, KB_EINVAL);
    assert_int_equal(s.p_wait_other_reserved, KB_EINVAL);
    assert_int_equal(s.p_enqueue_null_ctx, KB_EINVAL);
    assert_int_equal(s.p_spawn_other_bad_stack, KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

static void test_precedence_eperm_before_ebusy_in_rank(void **state)
{
    (void)state;
    struct in_rank s;
    in_rank_setup(&s);
    kb_ctx *ctx = plain_ctx();
    assert_int_equal(kb_start(ctx, precedence_rank, &s, 2, NULL, &s.own_pc), 0);
    /* The rank calls kb_join on its own pc while this thread is joining it. */
    assert_int_equal(kb_join(s.own_pc, -1, NULL), 1);
    kb_process_context_free(s.own_pc);
    assert_int_equal(s.ran, 1);
    assert_int_equal(s.r_spawn_own, KB_EPERM);
    assert_int_equal(s.r_destroy_own, KB_EPERM);
    assert_int_equal(s.p_enqueue_busy_other, KB_EPERM);
    assert_int_equal(s.r_spawn_other, KB_EPERM);
    assert_int_equal(s.r_join_own, KB_EPERM);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    in_rank_teardown(&s);
}

static void test_precedence_einval_before_ebusy_in_hook(void **state)
{
    (void)state;
    struct probe p;
    probe_setup(&p, AT_DRAIN_WAIT);
    assert_int_equal(kb_spawn(p.driven, yield_wait_rank, NULL, 2, NULL, NULL), 0);
    assert_int_equal(p.done, 1);
    assert_int_equal(p.p_spawn_null_fn, KB_EINVAL);
    assert_int_equal(p.p_start_null_out, KB_EINVAL);
    assert_int_equal(p.p_spawn_bad_stack, KB_EINVAL);
    assert_int_equal(p.p_start_neg, KB_EINVAL);
    assert_int_equal(p.p_join_null, KB_EINVAL);
    probe_teardown(&p);
}

static void test_precedence_einval_before_ebusy_on_busy_ctx(void **state)
{
    (void)state;
    struct counts c = {0};
    kb_ctx *ctx = counting_ctx(&c);
    kb_process_context *pc = NULL, *pc2 = NULL;
    assert_int_equal(kb_start(ctx, counting_rank, &c, 1, NULL, &pc), 0);
    kb_spawn_opts bad_stack = {.stack_size = 1, .cancel_mode = KB_CANCEL_UNWIND};
    kb_spawn_opts bad_mode = {.stack_size = 0, .cancel_mode = (kb_cancel_mode)9};
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, 1, &bad_stack, NULL), KB_EINVAL);
    assert_int_equal(kb_spawn(ctx, NULL, &c, 1, NULL, NULL), KB_EINVAL);
    assert_int_equal(kb_spawn(ctx, counting_rank, &c, -1, NULL, NULL), KB_EINVAL);
    assert_int_equal(kb_start(ctx, counting_rank, &c, 1, &bad_mode, &pc2), KB_EINVAL);
    assert_int_equal(kb_start(ctx, counting_rank, &c, 1, NULL, NULL), KB_EINVAL);
    kb_process_context_free(pc);
    assert_int_equal(c.fn_calls, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_precedence_einval_before_ebusy_for_foreign_thread(void **state)
{
    (void)state;
    kb_ctx *ctx = plain_ctx();
    struct foreign f;
    memset(&f, 0, sizeof f);
    foreign_body = foreign_precedence_calls;
    assert_int_equal(kb_spawn(ctx, foreign_rank, &f, 2, NULL, NULL), 0);
    assert_int_equal(f.ran, 1);
    assert_int_equal(f.r_reserved_wait, KB_EINVAL);
    assert_int_equal(f.r_reserved_complete, KB_EINVAL);
    assert_int_equal(f.r_null_fn_spawn, KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_fail_code_0_outside_rank_einval(void **state)
{
    (void)state;
    assert_int_equal(kb_fail(0, NULL), KB_EINVAL);
    assert_int_equal(kb_fail(0, "zero"), KB_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* forking tests first: no library thread exists yet */
        cmocka_unit_test(test_process_context_free_from_rank_aborts),
        cmocka_unit_test(test_process_context_free_from_engine_hook_aborts),
        cmocka_unit_test(test_raise_outside_rank_aborts),
        cmocka_unit_test(test_raise_while_unwinding_aborts),
        cmocka_unit_test(test_strerror_names_every_code_distinctly),
        cmocka_unit_test(test_version_equals_header),
        cmocka_unit_test(test_ctx_destroy_null_returns_0),
        cmocka_unit_test(test_free_functions_accept_null),
        cmocka_unit_test(test_spawn_error_accessors_accept_null),
        cmocka_unit_test(test_spawn_error_get_out_of_range_returns_null),
        cmocka_unit_test(test_ctx_create_null_out_einval),
        cmocka_unit_test(test_spawn_null_ctx_or_fn_einval),
        cmocka_unit_test(test_spawn_negative_nprocs_einval),
        cmocka_unit_test(test_start_bad_arguments_einval),
        cmocka_unit_test(test_join_null_pc_einval),
        cmocka_unit_test(test_handle_calls_null_ctx_einval),
        cmocka_unit_test(test_reserved_handles_einval_on_driver_side),
        cmocka_unit_test(test_reserved_handles_einval_in_rank),
        cmocka_unit_test(test_pending_null_out_with_cap_returns_0),
        cmocka_unit_test(test_completed_handles_lists_every_completed_handle_once),
        cmocka_unit_test(test_stack_size_below_minimum_einval),
        cmocka_unit_test(test_stack_size_at_minimum_accepted),
        cmocka_unit_test(test_unknown_cancel_mode_einval),
        cmocka_unit_test(test_fail_code_0_in_rank_einval_and_not_recorded),
        cmocka_unit_test(test_fail_code_0_outside_rank_einval),
        cmocka_unit_test(test_rank_calls_outside_rank_eperm),
        cmocka_unit_test(test_rank_queries_outside_rank_give_defaults),
        cmocka_unit_test(test_rank_calls_in_engine_hook_eperm),
        cmocka_unit_test(test_rank_calls_from_foreign_thread_eperm),
        cmocka_unit_test(test_foreign_thread_handle_calls_ebusy),
        cmocka_unit_test(test_foreign_thread_driver_calls_on_running_ctx_ebusy),
        cmocka_unit_test(test_second_joiner_ebusy),
        cmocka_unit_test(test_spawn_in_rank_eperm),
        cmocka_unit_test(test_start_in_rank_eperm),
        cmocka_unit_test(test_join_in_rank_eperm),
        cmocka_unit_test(test_ctx_destroy_own_ctx_in_rank_eperm),
        cmocka_unit_test(test_rank_calls_on_other_ctx_eperm),
        cmocka_unit_test(test_driver_calls_in_bind_hook_ebusy),
        cmocka_unit_test(test_driver_calls_in_drain_wait_hook_ebusy),
        cmocka_unit_test(test_driver_calls_in_driver_side_wait_hook_ebusy),
        cmocka_unit_test(test_driver_calls_in_abort_hook_ebusy),
        cmocka_unit_test(test_driver_calls_in_bind_hook_of_start_ebusy),
        cmocka_unit_test(test_driver_calls_in_wait_hook_of_join_ebusy),
        cmocka_unit_test(test_live_process_context_makes_ctx_busy),
        cmocka_unit_test(test_process_context_with_0_ranks_keeps_ctx_busy),
        cmocka_unit_test(test_unjoined_process_context_makes_ctx_busy_until_freed),
        cmocka_unit_test(test_precedence_einval_before_eperm_in_rank),
        cmocka_unit_test(test_precedence_eperm_before_ebusy_in_rank),
        cmocka_unit_test(test_precedence_einval_before_ebusy_in_hook),
        cmocka_unit_test(test_precedence_einval_before_ebusy_on_busy_ctx),
        cmocka_unit_test(test_precedence_einval_before_ebusy_for_foreign_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
