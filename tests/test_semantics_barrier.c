/* SPDX-License-Identifier: MIT */
/*
 * Semantics: kb_barrier (kbthreads.h; docs/design.md, "Barrier"). C only:
 * the reference has no barrier. Every arrival yields at least once (the last
 * one too); the barrier opens when the last not-finished rank arrives, or
 * when a rank finishes and every remaining one has arrived. No rank returns
 * from it before the drain that ends the round in which it opened; in the
 * next round every waiter returns at its turn, so the code after the barrier
 * starts in that round's order (rank order, or a seeded or replayed order).
 * FE_BARRIER records 'barrier_done R' when kb_barrier returns 0; BAR
 * records 'bar_arrive R' before and 'bar_done R' after; a drain between
 * rounds shows where a round ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fake_engine.h"
#include "kbt_util.h"

/* A scratch directory for schedule files, made at the first use and
 * removed when the tests end. */
static char dir[] = "/tmp/kb-barrier-XXXXXX";
static int dir_made;

static const char *path(const char *name)
{
    static char buf[256];
    if (!dir_made)
        assert_non_null(mkdtemp(dir));
    dir_made = 1;
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static int logged_barrier(fe *f, int rank, const fe_act *a)
{
    (void)f;
    (void)a;
    tr_add("bar_arrive %d", rank);
    int rc = kb_barrier();
    if (rc == 0)
        tr_add("bar_done %d", rank);
    return rc;
}

#define BAR FE_CALL(logged_barrier, NULL)

/* All arrive in round 1; the last arrival yields too (the drain runs before
 * anyone passes); all pass in round 2 in rank order. */
static void test_barrier_every_arrival_yields_then_all_pass_in_rank_order(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("b:0"), FE_BARRIER, FE_END};
    static const fe_act p1[] = {FE_ENQ("b:1"), FE_BARRIER, FE_END};
    static const fe_act p2[] = {FE_ENQ("b:2"), FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {p0, p1, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "start 1\n"
              "step 1 0\n"
              "step 1 1\n"
              "start 2\n"
              "step 2 0\n"
              "step 2 1\n"
              "engine_wait b:0\n"
              "engine_wait b:1\n"
              "engine_wait b:2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "barrier_done 2\n"
              "end 2\n"
              "finally 2\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[b:0,b:1,b:2]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A single rank's barrier opens at its arrival but still yields once: the
 * rank passes in the next round, after the drain, each time. */
static void test_barrier_of_a_single_rank_yields_once(void **state)
{
    (void)state;
    static const fe_act p0[] = {FE_ENQ("b:0"), FE_BARRIER, FE_MARK("after"),
                                FE_ENQ("b:1"), FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {p0};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 1, NULL), 0);
    tr_assert("spawn_begin nprocs=1\n"
              "bind 0\n"
              "start 0\n"
              "step 0 0\n"
              "step 0 1\n"
              "engine_wait b:0\n"
              "barrier_done 0\n"
              "step 0 2\n"
              "after\n"
              "step 0 3\n"
              "step 0 4\n"
              "engine_wait b:1\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "spawn_return 0\n"
              "post ranks=[dead] pending_worker=[] pending_coll=[] completed=[b:0,b:1]\n"
              "spawn_end\n");
    fe_free(f);
}

/* The barrier opens when the last not-finished rank arrives (here rank 1 in
 * round 3): rank 2, whose turn comes later in that round, stays; all three
 * pass in round 4, in rank order. */
static void test_barrier_opens_when_the_last_rank_arrives_in_a_later_round(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_END};
    static const fe_act p1[] = {FE_Y, FE_Y, FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {pb, p1, pb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "step 1 1\n"
              "step 1 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "barrier_done 2\n"
              "end 2\n"
              "finally 2\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A rank that finishes without arriving opens the barrier when every
 * remaining rank has arrived; the waiters pass in the next round. */
static void test_barrier_opens_when_a_rank_finishes_and_the_rest_arrived(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_END};
    static const fe_act p2[] = {FE_Y, FE_Y, FE_END};
    static const fe_act *const plans[] = {pb, pb, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "step 2 1\n"
              "end 2\n"
              "finally 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* The same in the first round: rank 2 returns at once after ranks 0 and 1
 * arrived. */
static void test_barrier_opens_when_a_rank_returns_in_the_arrival_round(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_END};
    static const fe_act p2[] = {FE_END};
    static const fe_act *const plans[] = {pb, pb, p2};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "end 2\n"
              "finally 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A barrier can be used again and again. */
static void test_barrier_can_be_reused(void **state)
{
    (void)state;
    static const fe_act pb[] = {FE_BARRIER, FE_MARK("between"), FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {pb, pb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 2, NULL), 0);
    tr_assert("spawn_begin nprocs=2\n"
              "bind 0\n"
              "bind 1\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "barrier_done 0\n"
              "step 0 1\n"
              "between\n"
              "step 0 2\n"
              "barrier_done 1\n"
              "step 1 1\n"
              "between\n"
              "step 1 2\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* A rank that passes and arrives at the next barrier while the later
 * waiters of the round have not passed yet does not open the next barrier
 * early nor keep the others in the old one. Round 2: rank 1 opens the
 * first barrier and rank 2 stays; round 3: all pass and arrive again, rank 2
 * last (it opens the second); round 4: all pass. */
static void test_barrier_generations_do_not_mix(void **state)
{
    (void)state;
    static const fe_act pbb[] = {FE_BARRIER, FE_BARRIER, FE_END};
    static const fe_act p1[] = {FE_Y, FE_BARRIER, FE_BARRIER, FE_END};
    static const fe_act *const plans[] = {pbb, p1, pbb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "step 1 1\n"
              "barrier_done 0\n"
              "step 0 1\n"
              "barrier_done 1\n"
              "step 1 2\n"
              "barrier_done 2\n"
              "step 2 1\n"
              "barrier_done 0\n"
              "end 0\n"
              "finally 0\n"
              "barrier_done 1\n"
              "end 1\n"
              "finally 1\n"
              "barrier_done 2\n"
              "end 2\n"
              "finally 2\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* The example of the rule (4 ranks). Round 2: rank 1 arrives last and opens
 * the first barrier; rank 3, whose turn comes after it, stays. Round 3: the
 * waiters pass in rank order (0, 1, 3). The second barrier opens when rank 1
 * finishes (round 6); ranks 0 and 3 pass it in round 7 and arrive at the
 * third, which rank 3's arrival opens; they pass it in round 8. */
static const fe_act ex0[] = {BAR, BAR, BAR, FE_END};
static const fe_act ex1[] = {FE_Y, BAR, FE_Y, FE_Y, FE_Y, FE_END};
static const fe_act ex2[] = {FE_END};
static const fe_act *const example[] = {ex0, ex1, ex2, ex0};

#define EXAMPLE_RANK_LINES                                                                                   \
    "start 0\n"                                                                                              \
    "step 0 0\n"                                                                                             \
    "bar_arrive 0\n"                                                                                         \
    "start 1\n"                                                                                              \
    "step 1 0\n"                                                                                             \
    "start 2\n"                                                                                              \
    "end 2\n"                                                                                                \
    "finally 2\n"                                                                                            \
    "start 3\n"                                                                                              \
    "step 3 0\n"                                                                                             \
    "bar_arrive 3\n"                                                                                         \
    "step 1 1\n"                                                                                             \
    "bar_arrive 1\n"                                                                                         \
    "bar_done 0\n"                                                                                           \
    "step 0 1\n"                                                                                             \
    "bar_arrive 0\n"                                                                                         \
    "bar_done 1\n"                                                                                           \
    "step 1 2\n"                                                                                             \
    "bar_done 3\n"                                                                                           \
    "step 3 1\n"                                                                                             \
    "bar_arrive 3\n"                                                                                         \
    "step 1 3\n"                                                                                             \
    "step 1 4\n"                                                                                             \
    "end 1\n"                                                                                                \
    "finally 1\n"                                                                                            \
    "bar_done 0\n"                                                                                           \
    "step 0 2\n"                                                                                             \
    "bar_arrive 0\n"                                                                                         \
    "bar_done 3\n"                                                                                           \
    "step 3 2\n"                                                                                             \
    "bar_arrive 3\n"                                                                                         \
    "bar_done 0\n"                                                                                           \
    "end 0\n"                                                                                                \
    "finally 0\n"                                                                                            \
    "bar_done 3\n"                                                                                           \
    "end 3\n"                                                                                                \
    "finally 3\n"

static void test_barrier_waiters_leave_in_rank_order_in_the_round_after_it_opens(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, example, 4, NULL), 0);
    tr_assert("spawn_begin nprocs=4\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "bind 3\n" EXAMPLE_RANK_LINES "spawn_return 0\n"
              "post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* The rank lines of a trace (start, step, bar_*, end, finally, unwind),
 * without the driver's and the engine's: malloc'd. */
static char *rank_lines(const char *t)
{
    static const char *const keep[] = {"start ", "step ", "bar_", "end ", "finally ", "unwind "};
    char *out = calloc(strlen(t) + 1, 1);
    assert_non_null(out);
    for (const char *l = t; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) + 1 : strlen(l);
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
            if (strncmp(l, keep[k], strlen(keep[k])) == 0) {
                strncat(out, l, n);
                break;
            }
        l += n;
    }
    return out;
}

static void assert_example_rank_lines(void)
{
    char *got = rank_lines(tr_text());
    assert_string_equal(got, EXAMPLE_RANK_LINES);
    free(got);
}

/* The same order where the driver ends every round (a replay; kb_join
 * slices of one round each, timeout 0), in RETURN mode, and with the
 * affinity options (pinned to one CPU; spread, with nudges). */
static void test_barrier_order_is_the_same_on_every_scheduling_path(void **state)
{
    (void)state;
    fe *f = fe_new();
    const kb_spawn_opts variants[] = {
        {.record_path = path("example.sched")}, {.replay_path = path("example.sched")},
        {.affinity = KB_AFFINITY_ONE_CPU},      {.affinity = KB_AFFINITY_SPREAD},
        {.cancel_mode = KB_CANCEL_RETURN},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        tr_reset();
        if (variants[i].affinity && !(kb_features() & KB_FEATURE_AFFINITY)) {
            /* no affinity on this build (KB_PORTABLE): refused before any rank runs */
            assert_int_equal(fe_spawn_plans(f, example, 4, &variants[i]), KB_ENOTSUP);
            continue;
        }
        assert_int_equal(fe_spawn_plans(f, example, 4, &variants[i]), 0);
        assert_example_rank_lines();
    }
    kb_process_context *pc;
    tr_reset();
    assert_int_equal(fe_start_plans(f, example, 4, NULL, &pc), 0);
    int rounds = 0;
    while (fe_join(f, pc, 0) == 0) /* one round per call */
        rounds++;
    assert_int_equal(rounds, 7); /* the eighth round ends the run */
    assert_example_rank_lines();
    fe_pc_free(f, pc);
    fe_free(f);
}

/* A replayed (or seeded) round order is the order waiters leave in. The
 * recording forces round 1 = 2 0 1, round 2 = 1 2 0, round 3 = 0 2 1: rank
 * 1 opens the barrier first thing in round 2, ranks 2 and 0 stay, and all
 * three pass in round 3 in that round's order. */
static void test_barrier_waiters_leave_in_a_replayed_rounds_order(void **state)
{
    (void)state;
    static const fe_act pb[] = {BAR, FE_END};
    static const fe_act p1[] = {FE_Y, BAR, FE_END};
    static const fe_act *const plans[] = {pb, p1, pb};
    FILE *rec = fopen(path("forced.sched"), "w");
    assert_non_null(rec);
    fputs("kbthreads-schedule 1\nnprocs 3\nround 1 2 0 1\nround 2 1 2 0\nround 3 0 2 1\n", rec);
    fclose(rec);
    fe *f = fe_new();
    kb_spawn_opts o = {.replay_path = path("forced.sched")};
    assert_int_equal(fe_spawn_plans(f, plans, 3, &o), 0);
    char *got = rank_lines(tr_text());
    assert_string_equal(got, "start 2\n"
                             "step 2 0\n"
                             "bar_arrive 2\n"
                             "start 0\n"
                             "step 0 0\n"
                             "bar_arrive 0\n"
                             "start 1\n"
                             "step 1 0\n"
                             "step 1 1\n"
                             "bar_arrive 1\n"
                             "bar_done 0\n"
                             "end 0\n"
                             "finally 0\n"
                             "bar_done 2\n"
                             "end 2\n"
                             "finally 2\n"
                             "bar_done 1\n"
                             "end 1\n"
                             "finally 1\n");
    free(got);
    fe_free(f);
}

/* The ranks of round `round` in a recording, as "2 0 3 1" into buf. */
static void recorded_round(const char *file, int round, char *buf, size_t cap)
{
    FILE *in = fopen(file, "r");
    assert_non_null(in);
    char line[256], want[32];
    snprintf(want, sizeof want, "round %d ", round);
    buf[0] = '\0';
    while (fgets(line, sizeof line, in))
        if (strncmp(line, want, strlen(want)) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(buf, cap, "%s", line + strlen(want));
        }
    fclose(in);
}

/* The bar_done ranks of a trace after its line `from`, as "2 0 3 1". */
static void done_order_after(const char *t, const char *from, char *buf, size_t cap)
{
    const char *p = strstr(t, from);
    assert_non_null(p);
    size_t len = 0;
    buf[0] = '\0';
    int r;
    for (const char *l = p; (l = strstr(l, "\nbar_done ")) != NULL; l++)
        if (sscanf(l, "\nbar_done %d", &r) == 1)
            len += (size_t)snprintf(buf + len, cap - len, "%s%d", len ? " " : "", r);
}

/* Under a seed: ranks 0, 2, 3 arrive in round 1, rank 1 in round 2 (its
 * enqueue a:1 is the drain that ends that round); every waiter passes in
 * round 3, in round 3's order, and none before that drain. Over a few seeds
 * rank 1 is not last in round 2, so some rank stays a round at the opened
 * barrier. Replaying the recording gives the same trace. */
static void test_barrier_waiters_leave_in_the_next_rounds_seeded_order(void **state)
{
    (void)state;
    static const fe_act pb[] = {BAR, FE_END};
    static const fe_act p1[] = {FE_Y, FE_ENQ("a:1"), BAR, FE_END};
    static const fe_act *const plans[] = {pb, p1, pb, pb};
    int held = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        kb_spawn_opts o = {.schedule = KB_SCHED_SEEDED, .seed = seed, .record_path = path("seeded.sched")};
        fe *f = fe_new(); /* a fresh ctx each time: a:1 not completed yet */
        assert_int_equal(fe_spawn_plans(f, plans, 4, &o), 0);
        fe_free(f);
        const char *t = tr_text();
        char done[64], order[64], second[64];
        done_order_after(t, "engine_wait a:1\n", done, sizeof done);
        recorded_round(path("seeded.sched"), 3, order, sizeof order);
        assert_string_equal(done, order);
        assert_int_equal(strstr(t, "bar_done") > strstr(t, "engine_wait a:1\n"), 1);
        recorded_round(path("seeded.sched"), 2, second, sizeof second);
        held += second[strlen(second) - 1] != '1';
        char *seeded = strdup(t);
        assert_non_null(seeded);
        kb_spawn_opts rep = {.replay_path = path("seeded.sched")};
        f = fe_new();
        assert_int_equal(fe_spawn_plans(f, plans, 4, &rep), 0);
        assert_string_equal(tr_text(), seeded);
        fe_free(f);
        free(seeded);
    }
    assert_true(held > 0);
}

/* A rank that finishes opens the barrier the others wait at (round 2);
 * rank 2, whose turn comes after it, stays; ranks 0 and 2 pass in round 3. */
static void test_barrier_opened_by_a_finishing_rank_releases_the_waiters_in_the_next_round(void **state)
{
    (void)state;
    static const fe_act pb[] = {BAR, FE_MARK("after"), FE_END};
    static const fe_act p1[] = {FE_Y, FE_END};
    static const fe_act *const plans[] = {pb, p1, pb};
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, plans, 3, NULL), 0);
    tr_assert("spawn_begin nprocs=3\n"
              "bind 0\n"
              "bind 1\n"
              "bind 2\n"
              "start 0\n"
              "step 0 0\n"
              "bar_arrive 0\n"
              "start 1\n"
              "step 1 0\n"
              "start 2\n"
              "step 2 0\n"
              "bar_arrive 2\n"
              "end 1\n"
              "finally 1\n"
              "bar_done 0\n"
              "step 0 1\n"
              "after\n"
              "end 0\n"
              "finally 0\n"
              "bar_done 2\n"
              "step 2 1\n"
              "after\n"
              "end 2\n"
              "finally 2\n"
              "spawn_return 0\n"
              "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
              "spawn_end\n");
    fe_free(f);
}

/* Ranks 0 and 1 wait at a barrier that is not open when rank 2 fails in
 * round 2: they are cancelled there, in rank order, and never pass. */
static const fe_act fw_wait[] = {BAR, FE_MARK("passed"), FE_END};
static const fe_act fw_fail[] = {FE_Y, FE_RAISE(5, "r2 fails"), FE_END};
static const fe_act *const fail_while_waiting[] = {fw_wait, fw_wait, fw_fail};

#define FAIL_WHILE_WAITING_HEAD                                                                              \
    "spawn_begin nprocs=3\n"                                                                                 \
    "bind 0\n"                                                                                               \
    "bind 1\n"                                                                                               \
    "bind 2\n"                                                                                               \
    "start 0\n"                                                                                              \
    "step 0 0\n"                                                                                             \
    "bar_arrive 0\n"                                                                                         \
    "start 1\n"                                                                                              \
    "step 1 0\n"                                                                                             \
    "bar_arrive 1\n"                                                                                         \
    "start 2\n"                                                                                              \
    "step 2 0\n"                                                                                             \
    "step 2 1\n"                                                                                             \
    "unwind 2 raise\n"                                                                                       \
    "finally 2\n"                                                                                            \
    "unwind 0 cancel\n"                                                                                      \
    "finally 0\n"                                                                                            \
    "unwind 1 cancel\n"                                                                                      \
    "finally 1\n"

#define ONE_ROOT_CAUSE_TAIL                                                                                  \
    "barrier_reset pending_worker=[] pending_coll=[]\n"                                                      \
    "spawn_raised KB_ESPAWN\n"                                                                               \
    "error ranks=[2] first=2 code=5\n"                                                                       \
    "error_entry 2 code=5 msg=r2 fails\n"                                                                    \
    "error_msg spawn failed on ranks [2]: rank 2 raised code 5: r2 fails\n"                                  \
    "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"                           \
    "spawn_end\n"

/* UNWIND mode: the waiters' threads unwind from kb_barrier (cleanup runs). */
static void test_barrier_waiters_are_cancelled_when_a_sibling_fails(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, fail_while_waiting, 3, fe_unwind()), KB_ESPAWN);
    tr_assert(FAIL_WHILE_WAITING_HEAD ONE_ROOT_CAUSE_TAIL);
    fe_free(f);
}

/* RETURN mode: kb_barrier returns KB_ECANCELED to each waiter, in rank
 * order; the bodies return it (absorbed, not root causes). */
static void test_barrier_waiters_get_ECANCELED_when_a_sibling_fails_in_RETURN_mode(void **state)
{
    (void)state;
    fe *f = fe_new();
    assert_int_equal(fe_spawn_plans(f, fail_while_waiting, 3, fe_return()), KB_ESPAWN);
    tr_assert(FAIL_WHILE_WAITING_HEAD ONE_ROOT_CAUSE_TAIL);
    fe_free(f);
}

/* Rank 1 enqueues h:bad and opens the barrier in round 2; rank 2, after it
 * in that round, stays at the opened barrier. The drain that ends round 2
 * fails: all three are cancelled at the barrier, in rank order, and none
 * has passed it. */
static void drain_failure_after_the_barrier_opened(const kb_spawn_opts *o)
{
    static const fe_act pb[] = {BAR, FE_MARK("passed"), FE_END};
    static const fe_act p1[] = {FE_Y, FE_ENQ("h:bad"), BAR, FE_MARK("passed"), FE_END};
    static const fe_act *const plans[] = {pb, p1, pb};
    fe *f = fe_new();
    fe_fail_on(f, "h:bad", 42);
    assert_int_equal(fe_spawn_plans(f, plans, 3, o), KB_ESPAWN);
    tr_assert(
        "spawn_begin nprocs=3\n"
        "bind 0\n"
        "bind 1\n"
        "bind 2\n"
        "start 0\n"
        "step 0 0\n"
        "bar_arrive 0\n"
        "start 1\n"
        "step 1 0\n"
        "start 2\n"
        "step 2 0\n"
        "bar_arrive 2\n"
        "step 1 1\n"
        "step 1 2\n"
        "bar_arrive 1\n"
        "engine_wait h:bad\n"
        "unwind 0 cancel\n"
        "finally 0\n"
        "unwind 1 cancel\n"
        "finally 1\n"
        "unwind 2 cancel\n"
        "finally 2\n"
        "barrier_reset pending_worker=[] pending_coll=[]\n"
        "spawn_raised KB_ESPAWN\n"
        "error ranks=[] first=None code=None\n"
        "error_drain code=42 handle=h:bad\n"
        "error_msg spawn failed on ranks []: drain failed: engine wait for handle h:bad (pending worker "
        "wait) returned 42\n"
        "post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]\n"
        "spawn_end\n");
    fe_free(f);
}

static void test_a_failed_drain_after_the_barrier_opened_cancels_every_waiter_before_any_passes(void **state)
{
    (void)state;
    drain_failure_after_the_barrier_opened(fe_unwind());
}

static void test_a_failed_drain_after_the_barrier_opened_cancels_every_waiter_in_RETURN_mode(void **state)
{
    (void)state;
    drain_failure_after_the_barrier_opened(fe_return());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_every_arrival_yields_then_all_pass_in_rank_order),
        cmocka_unit_test(test_barrier_of_a_single_rank_yields_once),
        cmocka_unit_test(test_barrier_opens_when_the_last_rank_arrives_in_a_later_round),
        cmocka_unit_test(test_barrier_opens_when_a_rank_finishes_and_the_rest_arrived),
        cmocka_unit_test(test_barrier_opens_when_a_rank_returns_in_the_arrival_round),
        cmocka_unit_test(test_barrier_can_be_reused),
        cmocka_unit_test(test_barrier_generations_do_not_mix),
        cmocka_unit_test(test_barrier_waiters_leave_in_rank_order_in_the_round_after_it_opens),
        cmocka_unit_test(test_barrier_order_is_the_same_on_every_scheduling_path),
        cmocka_unit_test(test_barrier_waiters_leave_in_a_replayed_rounds_order),
        cmocka_unit_test(test_barrier_waiters_leave_in_the_next_rounds_seeded_order),
        cmocka_unit_test(test_barrier_opened_by_a_finishing_rank_releases_the_waiters_in_the_next_round),
        cmocka_unit_test(test_barrier_waiters_are_cancelled_when_a_sibling_fails),
        cmocka_unit_test(test_barrier_waiters_get_ECANCELED_when_a_sibling_fails_in_RETURN_mode),
        cmocka_unit_test(test_a_failed_drain_after_the_barrier_opened_cancels_every_waiter_before_any_passes),
        cmocka_unit_test(test_a_failed_drain_after_the_barrier_opened_cancels_every_waiter_in_RETURN_mode),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (dir_made && kbt_rm_rf(dir) != 0)
        failed++;
    return failed;
}
