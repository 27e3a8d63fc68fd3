/* SPDX-License-Identifier: MIT */
/*
 * What a thread that does not hold the baton can learn of a live spawn, as
 * a binding's interrupt handler needs it (the Python binding's Ctrl-C):
 * kb_running_rank, the rank running its own code, and kb_ctx_dump, every
 * rank's state and frames.
 *
 * Rank functions never call cmocka's assertions: they record into plain
 * structs and the test asserts after the spawn returns.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kbthreads.h"
#include "kbt_util.h"

/* ---- kb_running_rank --------------------------------------------------- */

struct seen {
    kb_ctx *ctx;
    int in_rank[4];
    int in_hook;
    int from_thread;
};

static int seen_in_hook(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    (void)h;
    (void)meta;
    (void)origin;
    struct seen *s = self;
    s->in_hook = kb_running_rank(s->ctx);
    return 0;
}

static int running_rank_rank(int rank, void *arg)
{
    struct seen *s = arg;
    s->in_rank[rank] = kb_running_rank(s->ctx);
    kb_yield();
    return kb_wait(s->ctx, (kb_handle)(10 + rank)); /* the drain calls the hook */
}

static void test_running_rank_is_each_rank_in_its_turn_and_the_driver_in_a_hook(void **state)
{
    (void)state;
    struct seen s = {.in_hook = 99};
    kb_engine eng = {.self = &s, .wait = seen_in_hook, .bind = NULL, .abort = NULL};
    assert_int_equal(kb_ctx_create(&eng, &s.ctx), 0);
    assert_int_equal(kb_running_rank(s.ctx), -1);
    assert_int_equal(kb_spawn(s.ctx, running_rank_rank, &s, 4, NULL, NULL), 0);
    for (int r = 0; r < 4; r++)
        assert_int_equal(s.in_rank[r], r);
    assert_int_equal(s.in_hook, KB_RUNNING_DRIVER);
    assert_int_equal(kb_running_rank(s.ctx), -1); /* no spawn */
    assert_int_equal(kb_running_rank(NULL), KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(s.ctx), 0);
}

static void *read_running_rank(void *arg)
{
    struct seen *s = arg;
    s->from_thread = kb_running_rank(s->ctx);
    return NULL;
}

static int rank_asks_another_thread(int rank, void *arg)
{
    struct seen *s = arg;
    if (rank == 1) { /* holds the baton while the other thread looks */
        pthread_t t;
        if (pthread_create(&t, NULL, read_running_rank, s) != 0)
            return 1;
        pthread_join(t, NULL);
    }
    return kb_yield();
}

static void test_running_rank_seen_from_another_thread_while_a_rank_runs(void **state)
{
    (void)state;
    struct seen s = {.from_thread = 99};
    assert_int_equal(kb_ctx_create(NULL, &s.ctx), 0);
    assert_int_equal(kb_spawn(s.ctx, rank_asks_another_thread, &s, 3, NULL, NULL), 0);
    assert_int_equal(s.from_thread, 1);
    assert_int_equal(kb_ctx_destroy(s.ctx), 0);
}

/* ---- kb_ctx_dump -------------------------------------------------------- */

/* A frames writer that names the rank whose thread runs it (async-signal-safe). */
static void rank_frames_writer(int fd, int max_frames, void *arg)
{
    (void)max_frames;
    (void)arg;
    char line[] = "  frames of rank ?\n";
    line[sizeof line - 3] = (char)('0' + kb_rank());
    ssize_t w = write(fd, line, sizeof line - 1);
    (void)w;
}

struct dumping {
    kb_ctx *ctx;
    FILE *out;
    int rc;
    unsigned flags;
};

static void *dump_from_thread(void *arg)
{
    struct dumping *d = arg;
    d->rc = kb_ctx_dump(d->ctx, fileno(d->out), d->flags);
    return NULL;
}

/* Round 1: rank 0 finishes, rank 1 waits on handle 77, rank 2 dumps (itself,
 * or through another thread while it holds the baton), rank 3 has not
 * started. */
static int four_states(int rank, void *arg)
{
    struct dumping *d = arg;
    switch (rank) {
    case 0:
        return 0;
    case 1:
        return kb_wait(d->ctx, 77);
    case 2:
        if (d->flags & 0x100u) {
            pthread_t t;
            d->flags &= ~0x100u;
            if (pthread_create(&t, NULL, dump_from_thread, d) != 0)
                return 1;
            pthread_join(t, NULL);
        } else {
            dump_from_thread(d);
        }
        return 0;
    default:
        return kb_yield();
    }
}

static char *dump_of_four_states(unsigned flags)
{
    static char text[16384];
    assert_int_equal(kb_set_frames_writer(rank_frames_writer, NULL), 0);
    struct dumping d = {.out = tmpfile(), .rc = 99, .flags = flags};
    assert_non_null(d.out);
    assert_int_equal(kb_ctx_create(NULL, &d.ctx), 0);
    assert_int_equal(kb_spawn(d.ctx, four_states, &d, 4, NULL, NULL), 0);
    assert_int_equal(kb_ctx_destroy(d.ctx), 0);
    assert_int_equal(kb_set_frames_writer(NULL, NULL), 0);
    assert_int_equal(d.rc, 0);
    rewind(d.out);
    size_t n = fread(text, 1, sizeof text - 1, d.out);
    text[n] = '\0';
    fclose(d.out);
    return text;
}

/* The line of rank r (its LWP, if any, left out), and the lines under it. */
static const char *rank_block(const char *text, int r)
{
    char head[64];
    snprintf(head, sizeof head, "kbthreads: rank %d (kb-rank-%d", r, r);
    const char *p = strstr(text, head);
    return p ? strstr(p, "): ") + 3 : NULL;
}

static void assert_block(const char *text, int r, const char *state, const char *frames)
{
    const char *b = rank_block(text, r);
    if (!b)
        fail_msg("no line for rank %d in:\n%s", r, text);
    if (strncmp(b, state, strlen(state)) != 0)
        fail_msg("rank %d: want \"%s\" in:\n%s", r, state, text);
    const char *next = strstr(b, "kbthreads: rank ");
    const char *f = frames ? strstr(b, frames) : NULL;
    if (frames && (!f || (next && f > next)))
        fail_msg("rank %d: want \"%s\" under its line in:\n%s", r, frames, text);
    if (!frames) {
        const char *any = strstr(b, "  frames of rank");
        if (any && (!next || any < next))
            fail_msg("rank %d: frames under a rank with no thread running it in:\n%s", r, text);
    }
}

static void assert_four_states(const char *text)
{
    assert_non_null(strstr(text, "kbthreads: a spawn of 4 ranks; rank 2 holds the baton\n"));
    assert_block(text, 0, "finished\n", NULL);
    assert_block(text, 1, "suspended in kb_wait on handle 77\n", "  frames of rank 1\n");
    assert_block(text, 2, "holds the baton, running its own code\n", "  frames of rank 2\n");
    assert_block(text, 3, "not started\n", NULL);
}

static void test_dump_from_the_running_rank_gives_each_rank_its_state_and_frames(void **state)
{
    (void)state;
    assert_four_states(dump_of_four_states(0));
}

static void test_dump_from_another_thread_while_a_rank_holds_the_baton(void **state)
{
    (void)state;
    assert_four_states(dump_of_four_states(0x100u));
}

static void test_dump_with_holder_c_frames_adds_the_holders_backtrace_only(void **state)
{
    (void)state;
    const char *text = dump_of_four_states(KB_DUMP_HOLDER_C_FRAMES);
    assert_four_states(text);
    const char *c = strstr(text, "  C frames:\n");
    if (kb_features() & KB_FEATURE_BACKTRACE) {
        assert_non_null(c);
        assert_true(c > rank_block(text, 2) && c < rank_block(text, 3));
        assert_null(strstr(c + 1, "  C frames:\n")); /* rank 1 has none */
    }
}

static void test_dump_of_an_idle_ctx_says_no_spawn_runs(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(kb_ctx_dump(ctx, fileno(out), 0), 0);
    char text[256];
    rewind(out);
    text[fread(text, 1, sizeof text - 1, out)] = '\0';
    fclose(out);
    assert_string_equal(text, "kbthreads: no spawn runs on this ctx\n");
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_dump_bad_arguments_einval(void **state)
{
    (void)state;
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_ctx_dump(NULL, 2, 0), KB_EINVAL);
    assert_int_equal(kb_ctx_dump(ctx, -1, 0), KB_EINVAL);
    assert_int_equal(kb_ctx_dump(ctx, 2, 0x80u), KB_EINVAL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_running_rank_is_each_rank_in_its_turn_and_the_driver_in_a_hook),
        cmocka_unit_test(test_running_rank_seen_from_another_thread_while_a_rank_runs),
        cmocka_unit_test(test_dump_from_the_running_rank_gives_each_rank_its_state_and_frames),
        cmocka_unit_test(test_dump_from_another_thread_while_a_rank_holds_the_baton),
        cmocka_unit_test(test_dump_with_holder_c_frames_adds_the_holders_backtrace_only),
        cmocka_unit_test(test_dump_of_an_idle_ctx_says_no_spawn_runs),
        cmocka_unit_test(test_dump_bad_arguments_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
