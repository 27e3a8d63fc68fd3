/* SPDX-License-Identifier: MIT */
/*
 * The wait policy (src/wait_policy.h), driven through its interface only:
 * a policy made for a shape (the CPUs it counts given, so that 1, 2, 4
 * and 64 CPUs are checked on any machine), round boundaries told to it
 * with a clock of the test's own, and what it tells the ranks (how to wait,
 * where to move) read back. The simulated spawn below charges each handoff
 * what the test says the mode in use costs, so the decisions are exact.
 * That no choice changes the order is tested by the differential runs
 * under each policy (tests/reliability, test_rel_differential/wait=*).
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"
#include "wait_policy.h"

#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND 0
#endif

static uint64_t sim_now;

static uint64_t sim_clock(void)
{
    return sim_now;
}

/* The ctx's record the policies made below read and leave (NULL: none). */
static struct kb_wait_memory **memory;

static struct kb_wait_policy *make(int nprocs, int ncpu, int affinity)
{
    struct kb_wait_setup s = {.nprocs = nprocs,
                              .affinity = affinity,
                              .spread_ncpus = ncpu,
                              .ncpu = ncpu,
                              .clock = sim_clock,
                              .memory = memory};
    struct kb_wait_policy *p = NULL;
    assert_int_equal(kb__wait_policy_create(&s, &p), 0);
    return p;
}

/* The mode a budget is. */
static int mode_of(const struct kb_wait_budget *b)
{
    if (b->spin_ns && !b->look_ns)
        return KB_WAIT_SPIN;
    if (b->look_ns)
        return KB_WAIT_LOOK;
    if (b->watch)
        return KB_WAIT_NUDGE;
    return KB_WAIT_SLEEP;
}

/* What a rank is told now: rank 0's (the simulation's observer: the
 * seating tests look at the others). */
static struct kb_wait_budget told(struct kb_wait_policy *p)
{
    struct kb_wait_budget b;
    kb__wait_next_turn(p, 0, &b);
    return b;
}

/* A simulated spawn: the mode ranks wait in costs cost[mode] ns per
 * handoff; each round is nprocs handoffs. in_mode[m] sums the time spent
 * in mode m. */
struct sim {
    struct kb_wait_policy *p;
    int nprocs;
    uint64_t cost[KB_WAIT_MODES];
    uint64_t h;
    uint64_t in_mode[KB_WAIT_MODES];
};

static void sim_rounds(struct sim *s, int rounds)
{
    for (int r = 0; r < rounds; r++) {
        kb__wait_round(s->p, s->h, 0);
        struct kb_wait_budget b = told(s->p);
        int m = mode_of(&b);
        uint64_t t = (uint64_t)s->nprocs * s->cost[m];
        sim_now += t;
        s->in_mode[m] += t;
        s->h += (uint64_t)s->nprocs;
    }
}

static struct sim simulate(int nprocs, int ncpu, uint64_t sleep, uint64_t look, uint64_t nudge, uint64_t spin)
{
    struct sim s = {.p = make(nprocs, ncpu, 0), .nprocs = nprocs, .cost = {sleep, look, nudge, spin}};
    return s;
}

static kb_spawn_stats report(const struct kb_wait_policy *p)
{
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    kb__wait_report(p, &st);
    return st;
}

/* KB_TEST_CPUS and KB_WAIT_POLICY as the program found them. */
static char *given_policy;

static int setup(void **state)
{
    (void)state;
    const char *v = getenv("KB_WAIT_POLICY");
    given_policy = v ? strdup(v) : NULL;
    unsetenv("KB_WAIT_POLICY");
    sim_now = 1000000;
    memory = NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (given_policy)
        setenv("KB_WAIT_POLICY", given_policy, 1);
    else
        unsetenv("KB_WAIT_POLICY");
    free(given_policy);
    return 0;
}

/* The adapting tests: under Valgrind every wait sleeps and nothing adapts. */
static int adapting_here(struct kb_wait_policy *p)
{
    if (!UNDER_VALGRIND)
        return 1;
    struct kb_wait_budget b = told(p);
    assert_int_equal(mode_of(&b), KB_WAIT_SLEEP);
    assert_int_equal(report(p).wait_reactive, 0);
    kb__wait_policy_destroy(p);
    return 0;
}

/* ---- the choice from the counts (KB_WAIT_POLICY=static keeps it) ---- */

static int static_mode(int nprocs, int ncpu)
{
    setenv("KB_WAIT_POLICY", "static", 1);
    struct kb_wait_policy *p = make(nprocs, ncpu, 0);
    struct kb_wait_budget b = told(p);
    kb__wait_policy_destroy(p);
    unsetenv("KB_WAIT_POLICY");
    return UNDER_VALGRIND ? KB_WAIT_LOOK : mode_of(&b); /* (Valgrind: sleeps; checked below) */
}

static void test_on_one_cpu_ranks_look_at_any_count(void **state)
{
    (void)state;
    for (int n = 1; n <= 4096; n *= 8)
        assert_int_equal(static_mode(n, 1), KB_WAIT_LOOK);
}

static void test_up_to_four_ranks_per_cpu_ranks_look_and_beyond_they_nudge(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    static const int cpus[] = {2, 4, 64};
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
        assert_int_equal(static_mode(1, cpus[i]), KB_WAIT_LOOK);
        assert_int_equal(static_mode(4 * cpus[i], cpus[i]), KB_WAIT_LOOK);
        assert_int_equal(static_mode(4 * cpus[i] + 1, cpus[i]), KB_WAIT_NUDGE);
    }
}

/* What a rank is told after a round begun by the driver (1) or a rank (0). */
static struct kb_wait_budget told_after_round(struct kb_wait_policy *p, int driver)
{
    kb__wait_round(p, 0, driver);
    return told(p);
}

static void
test_with_as_many_ranks_as_cpus_a_look_spins_briefly_first_while_the_driver_is_left_out(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    static const int shape[][2] = {{2, 2}, {4, 4}, {1, 2}, {3, 2}, {8, 2}, {1, 1}};
    static const char *const policy[] = {NULL, "static"};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
            if (policy[k])
                setenv("KB_WAIT_POLICY", policy[k], 1);
            struct kb_wait_policy *p = make(shape[i][0], shape[i][1], 0);
            struct kb_wait_budget out = told_after_round(p, 0), in = told_after_round(p, 1);
            assert_int_equal(out.look_ns, KB_WAIT_LOOK_NS);
            if (shape[i][0] == shape[i][1] && shape[i][1] >= 2)
                assert_true(out.spin_ns > 0 && out.spin_ns < out.look_ns / 10); /* a turn's worth */
            else
                assert_int_equal(out.spin_ns, 0);
            assert_int_equal(in.spin_ns, 0); /* spinners would keep a draining driver off the CPUs */
            assert_int_equal(told_after_round(p, 0).spin_ns, out.spin_ns);
            kb__wait_policy_destroy(p);
            unsetenv("KB_WAIT_POLICY");
        }
    setenv("KB_WAIT_POLICY", "look", 1); /* a forced look is only a look */
    struct kb_wait_policy *p = make(2, 2, 0);
    assert_int_equal(told_after_round(p, 0).spin_ns, 0);
    kb__wait_policy_destroy(p);
}

static void test_a_nudged_rank_watches_yielding_unpinned(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "nudge", 1);
    struct kb_wait_policy *p = make(64, 2, 0);
    struct kb_wait_budget b = told(p);
    if (!UNDER_VALGRIND) {
        assert_true(b.watch & KB_WATCH_YIELD);
        assert_int_equal(b.watch & KB_WATCH_NS, KB_WAIT_LOOK_NS);
        assert_int_equal(b.spin_ns + b.look_ns, 0);
        assert_true(kb__wait_nudging(p));
    }
    kb__wait_policy_destroy(p);
}

static void test_the_driver_looks_before_it_sleeps_unpinned(void **state)
{
    (void)state;
    struct kb_wait_policy *p = make(8, 2, 0);
    assert_int_equal(kb__wait_park_ns(p), UNDER_VALGRIND ? 0 : KB_WAIT_LOOK_NS);
    kb__wait_policy_destroy(p);
}

static void test_kb_wait_policy_forces_each_mode_and_nothing_adapts(void **state)
{
    (void)state;
    static const char *const names[KB_WAIT_MODES] = {"sleep", "look", "nudge", "spin"};
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        setenv("KB_WAIT_POLICY", names[m], 1);
        struct sim s = simulate(8, 2, 9000, 9000, 9000, 9000);
        sim_rounds(&s, 2000);
        struct kb_wait_budget b = told(s.p);
        assert_int_equal(mode_of(&b), UNDER_VALGRIND ? KB_WAIT_SLEEP : m);
        kb_spawn_stats st = report(s.p);
        assert_int_equal(st.wait_reactive, 0);
        assert_int_equal(st.wait_mode, UNDER_VALGRIND ? KB_WAIT_SLEEP : m);
        assert_int_equal(st.wait_switches, 0);
        kb__wait_policy_destroy(s.p);
    }
}

static void test_a_malformed_kb_wait_policy_is_ignored(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "fastest", 1);
    struct kb_wait_policy *p = make(2, 2, 0);
    assert_int_equal(report(p).wait_reactive, !UNDER_VALGRIND); /* the default */
    kb__wait_policy_destroy(p);
}

static void test_one_cpu_affinity_sleeps_at_once_whatever_kb_wait_policy_says(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "spin", 1);
    struct kb_wait_policy *p = make(8, 2, KB_AFFINITY_ONE_CPU);
    struct kb_wait_budget b = told(p);
    assert_int_equal(mode_of(&b), KB_WAIT_SLEEP);
    assert_false(kb__wait_nudging(p));
    assert_int_equal(report(p).wait_mode, KB_WAIT_SLEEP);
    kb__wait_policy_destroy(p);
    p = make(4096, 2, KB_AFFINITY_ONE_CPU); /* beyond 512 ranks the driver sleeps at once too */
    assert_int_equal(kb__wait_park_ns(p), 0);
    kb__wait_policy_destroy(p);
}

static void test_spread_affinity_spins_with_a_cpu_per_rank_and_nudges_with_pausing_watches(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    struct kb_wait_policy *p = make(2, 2, KB_AFFINITY_SPREAD);
    assert_int_equal(report(p).wait_mode, KB_WAIT_SPIN);
    kb__wait_policy_destroy(p);
    p = make(8, 2, KB_AFFINITY_SPREAD);
    struct kb_wait_budget b = told(p);
    assert_int_equal(report(p).wait_mode, KB_WAIT_NUDGE);
    assert_int_equal(b.watch, KB_WAIT_LOOK_NS); /* pausing: pinned apart from the holder */
    kb__wait_policy_destroy(p);
}

/* ---- adapting ---- */

static void test_it_starts_in_the_choice_from_the_counts(void **state)
{
    (void)state;
    struct kb_wait_policy *p = make(64, 2, 0);
    if (!adapting_here(p))
        return;
    struct kb_wait_budget b = told(p);
    assert_int_equal(mode_of(&b), KB_WAIT_NUDGE);
    kb_spawn_stats st = report(p);
    assert_int_equal(st.wait_reactive, 1);
    assert_int_equal(st.wait_mode, KB_WAIT_NUDGE);
    kb__wait_policy_destroy(p);
}

static void test_it_moves_to_a_mode_that_measures_faster(void **state)
{
    (void)state;
    struct sim s = simulate(64, 2, 20000, 2000, 8000, 0); /* look is 4x faster than nudges */
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 400);
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_mode, KB_WAIT_LOOK);
    assert_int_equal(st.wait_switches, 1);
    assert_int_equal(st.wait_ns[KB_WAIT_LOOK], 2000);
    assert_int_equal(st.wait_ns[KB_WAIT_NUDGE], 8000);
    assert_int_equal(st.wait_ns[KB_WAIT_SPIN], 0); /* not a candidate with more ranks than CPUs */
    struct kb_wait_budget b = told(s.p);
    assert_int_equal(mode_of(&b), KB_WAIT_LOOK);
    kb__wait_policy_destroy(s.p);
}

static void test_it_keeps_its_mode_when_another_is_faster_by_less_than_an_eighth(void **state)
{
    (void)state;
    struct sim s = simulate(64, 2, 20000, 7200, 8000, 0); /* look 10% faster */
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 2000);
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_mode, KB_WAIT_NUDGE);
    assert_int_equal(st.wait_switches, 0);
    assert_int_equal(st.wait_ns[KB_WAIT_LOOK], 7200); /* tried */
    kb__wait_policy_destroy(s.p);
}

static void test_a_spawn_too_short_to_measure_keeps_its_first_mode(void **state)
{
    (void)state;
    struct sim s = simulate(8, 2, 100, 100, 9000, 100);
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 30); /* 240 handoffs: less than a window */
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_mode, KB_WAIT_LOOK);
    for (int m = 0; m < KB_WAIT_MODES; m++)
        assert_int_equal(st.wait_ns[m], 0);
    kb__wait_policy_destroy(s.p);
}

static void test_tries_take_at_most_a_thirty_second_of_the_time(void **state)
{
    (void)state;
    struct sim s = simulate(8, 2, 50000, 2000, 30000, 0); /* every other mode far slower */
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 200000);
    uint64_t total = 0;
    for (int m = 0; m < KB_WAIT_MODES; m++)
        total += s.in_mode[m];
    uint64_t trying = total - s.in_mode[KB_WAIT_LOOK];
    assert_true(trying > 0);
    /* at most a 32nd, and the try that passed it (the slowest: its
     * settling round, a window and the settling round after it) */
    assert_true(trying <= total / 32 + (8 + 256 + 8) * 50000ull);
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_LOOK);
    kb__wait_policy_destroy(s.p);
}

static void test_a_mode_that_lost_is_tried_less_and_less_often(void **state)
{
    (void)state;
    struct sim s = simulate(8, 2, 3000, 2000, 3000, 0);
    if (!adapting_here(s.p))
        return;
    /* When each try of nudges (which lose) starts. */
    uint64_t start[6];
    int n = 0, was = KB_WAIT_LOOK;
    while (n < 6 && sim_now < 100000000000ull) {
        sim_rounds(&s, 1);
        struct kb_wait_budget b = told(s.p);
        int m = mode_of(&b);
        if (m == KB_WAIT_NUDGE && was != KB_WAIT_NUDGE)
            start[n++] = sim_now;
        was = m;
    }
    assert_int_equal(n, 6);
    /* The gaps grow until the longest back-off, 8 times the first one (4
     * and 32 periods; each may wait up to a slot more for a slot's start). */
    uint64_t slot = 9 * (1ull << 19); /* a try waits up to a slot for a slot's start */
    for (int i = 2; i < 6; i++)
        assert_true(start[i] - start[i - 1] + slot >= start[i - 1] - start[i - 2]);
    assert_true(start[5] - start[4] >= 6 * (start[1] - start[0]));
    kb__wait_policy_destroy(s.p);
}

static void test_tries_begin_at_the_starts_of_slots_of_the_clock(void **state)
{
    (void)state;
    struct sim s = simulate(8, 2, 3000, 2000, 3000, 0);
    if (!adapting_here(s.p))
        return;
    uint64_t slot = (8 + 1) * (1ull << 19); /* a function of the shape alone */
    int tries = 0, was = KB_WAIT_LOOK;
    while (tries < 4 && sim_now < 100000000000ull) {
        uint64_t at = sim_now; /* the round boundary's clock */
        sim_rounds(&s, 1);
        struct kb_wait_budget b = told(s.p);
        int m = mode_of(&b);
        if (m != KB_WAIT_LOOK && was == KB_WAIT_LOOK) {
            tries++;
            assert_true(at % slot < 8 * 2000); /* the first boundary of the slot */
        }
        was = m;
    }
    assert_int_equal(tries, 4);
    kb__wait_policy_destroy(s.p);
}

static void test_a_change_of_load_is_noticed_and_it_moves(void **state)
{
    (void)state;
    struct sim s = simulate(8, 2, 50000, 2000, 3000, 0);
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 100000); /* long enough for nudges to back off fully */
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_LOOK);
    s.cost[KB_WAIT_LOOK] = 9000; /* looks got slow: a hog came */
    uint64_t t0 = sim_now;
    while (report(s.p).wait_mode != KB_WAIT_NUDGE && sim_now - t0 < 60000000000ull)
        sim_rounds(&s, 100);
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_NUDGE);
    /* looks' first slow window makes nudges, which measured faster, due at
     * once, whatever their back-off: two windows, a slot and a try */
    assert_true(sim_now - t0 < 2 * 256 * 9000 + 9 * (1ull << 19) + 2 * 264 * 3000 + 100000);
    kb__wait_policy_destroy(s.p);
}

static void test_it_tries_other_modes_at_any_rank_count(void **state)
{
    (void)state;
    struct sim s = simulate(4096, 2, 9000, 2000, 8000, 0);
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 200); /* the try waits for a slot's start: 2.1 s at 4096 ranks */
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_mode, KB_WAIT_LOOK);
    assert_int_equal(st.wait_ns[KB_WAIT_NUDGE], 8000);
    kb__wait_policy_destroy(s.p);
}

static void test_spin_is_a_candidate_only_where_every_rank_has_a_cpu(void **state)
{
    (void)state;
    static const int shape[][2] = {{1, 2}, {2, 2}, {3, 4}, {3, 2}, {64, 64}};
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        struct sim s = simulate(shape[i][0], shape[i][1], 9000, 2000, 9000, 500);
        if (!adapting_here(s.p))
            return;
        sim_rounds(&s, 20000);
        int candidate = shape[i][0] <= shape[i][1];
        assert_int_equal(report(s.p).wait_mode, candidate ? KB_WAIT_SPIN : KB_WAIT_LOOK);
        assert_int_equal(report(s.p).wait_ns[KB_WAIT_SPIN], candidate ? 500 : 0);
        kb__wait_policy_destroy(s.p);
    }
}

static void test_a_try_far_slower_than_home_is_cut_short(void **state)
{
    (void)state;
    struct sim s = simulate(8, 2, 60000, 2000, 60000, 0); /* nudges 30x slower */
    if (!adapting_here(s.p))
        return;
    while (s.in_mode[KB_WAIT_NUDGE] == 0)
        sim_rounds(&s, 1);
    while (told(s.p).watch) /* the try's rounds */
        sim_rounds(&s, 1);
    /* more than 4 times slower: cut at the first round boundary after 16
     * handoffs of it (the settling round before and after it in nudges
     * too), not a whole window of nudges (15 ms) */
    assert_true(s.in_mode[KB_WAIT_NUDGE] <= (8 + 16 + 8) * 60000);
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_LOOK);
    kb__wait_policy_destroy(s.p);
}

static void test_a_try_is_not_judged_on_its_first_handoffs(void **state)
{
    (void)state;
    struct sim s = simulate(2, 2, 9000, 2000, 9000, 500);
    if (!adapting_here(s.p))
        return;
    struct kb_wait_budget b = told(s.p);
    while (mode_of(&b) != KB_WAIT_SPIN) { /* until the try of spins begins */
        sim_rounds(&s, 1);
        b = told(s.p);
    }
    /* its first two rounds pay the ranks' moves to their seats: 4 handoffs
     * at 12 times home's cost; then it is 4 times faster than home */
    s.cost[KB_WAIT_SPIN] = 25000;
    sim_rounds(&s, 2);
    s.cost[KB_WAIT_SPIN] = 500;
    sim_rounds(&s, 2000);
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_mode, KB_WAIT_SPIN);
    assert_int_equal(st.wait_switches, 1);
    kb__wait_policy_destroy(s.p);
}

static void test_sleep_is_a_candidate_only_where_the_ranks_outnumber_the_cpus(void **state)
{
    (void)state;
    struct sim s = simulate(2, 2, 100, 2000, 9000, 9000); /* sleep would win */
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 5000);
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_LOOK);
    assert_int_equal(report(s.p).wait_ns[KB_WAIT_SLEEP], 0);
    kb__wait_policy_destroy(s.p);
    s = simulate(3, 2, 100, 2000, 9000, 9000);
    sim_rounds(&s, 50000);
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_SLEEP);
    kb__wait_policy_destroy(s.p);
}

static void test_on_one_cpu_only_look_and_sleep_are_tried(void **state)
{
    (void)state;
    struct sim s = simulate(8, 1, 3000, 2000, 100, 100);
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 20000);
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_mode, KB_WAIT_LOOK);
    assert_true(st.wait_ns[KB_WAIT_SLEEP] > 0);
    assert_int_equal(st.wait_ns[KB_WAIT_NUDGE] + st.wait_ns[KB_WAIT_SPIN], 0);
    kb__wait_policy_destroy(s.p);
}

static void test_a_pause_ends_a_try(void **state)
{
    (void)state;
    struct sim s = simulate(64, 2, 20000, 9000, 8000, 0);
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 6); /* a settling round, then home's first window (5 rounds of 64) */
    int in_try = 0;
    for (int r = 0; r < 200 && !in_try; r++) { /* (a slot is 34 ms at 64 ranks) */
        sim_rounds(&s, 1);
        struct kb_wait_budget b = told(s.p);
        in_try = mode_of(&b) != KB_WAIT_NUDGE;
    }
    assert_true(in_try);
    kb__wait_pause(s.p);
    sim_now += 1000000000; /* a second away: no handoff's */
    kb__wait_resume(s.p, s.h);
    struct kb_wait_budget b = told(s.p);
    assert_int_equal(mode_of(&b), KB_WAIT_NUDGE);               /* back home, no figure from the cut try */
    sim_rounds(&s, 6);                                          /* a settling round and a whole window */
    assert_int_equal(report(s.p).wait_ns[KB_WAIT_NUDGE], 8000); /* the pause is in no window */
    assert_int_equal(report(s.p).wait_ns[KB_WAIT_LOOK], 0);
    kb__wait_policy_destroy(s.p);
}

static void test_homes_window_spans_pauses_and_counts_none_of_them(void **state)
{
    (void)state;
    struct sim s = simulate(64, 2, 20000, 20000, 8000, 0); /* nothing beats nudges */
    if (!adapting_here(s.p))
        return;
    sim_rounds(&s, 1);            /* the settling round */
    for (int r = 0; r < 4; r++) { /* a window of 4 rounds of 64, a second's pause after each */
        sim_rounds(&s, 1);
        kb__wait_pause(s.p);
        sim_now += 1000000000;
        kb__wait_resume(s.p, s.h);
    }
    sim_rounds(&s, 1);
    assert_int_equal(report(s.p).wait_ns[KB_WAIT_NUDGE], 8000);
    kb__wait_policy_destroy(s.p);
}

static void test_cycle_moves_to_the_next_mode_at_every_round_boundary(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "cycle", 1);
    struct sim s = simulate(3, 2, 1, 1, 1, 1);
    int seen[KB_WAIT_MODES] = {0};
    for (int r = 0; r < 8; r++) {
        sim_rounds(&s, 1);
        struct kb_wait_budget b = told(s.p);
        seen[mode_of(&b)]++;
    }
    for (int m = 0; m < KB_WAIT_MODES; m++)
        assert_true(seen[m] >= 1); /* (nudge's budget is a watch only with 2 CPUs counted) */
    kb_spawn_stats st = report(s.p);
    assert_int_equal(st.wait_reactive, 0);
    assert_int_equal(st.wait_switches, 7); /* at every boundary after the first round's */
    kb__wait_policy_destroy(s.p);
}

static void test_cycle_reaches_spin_with_one_cpu_counted_too(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "cycle", 1);
    struct sim s = simulate(3, 1, 1, 1, 1, 1); /* nudge's budget is a sleep there */
    int spins = 0;
    for (int r = 0; r < 8; r++) {
        sim_rounds(&s, 1);
        struct kb_wait_budget b = told(s.p);
        spins += mode_of(&b) == KB_WAIT_SPIN;
    }
    assert_int_equal(spins, 2); /* every fourth round */
    kb__wait_policy_destroy(s.p);
}

static void test_wait_mode_names(void **state)
{
    (void)state;
    assert_string_equal(kb_wait_mode_name(KB_WAIT_SLEEP), "sleep");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_LOOK), "look");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_NUDGE), "nudge");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_SPIN), "spin");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_MODES), "unknown");
    assert_string_equal(kb_wait_mode_name(-1), "unknown");
}

/* ---- what a ctx remembers ---- */

/* A ctx's record after an adapting spawn of 8 ranks on 2 CPUs that moved
 * from nudges to looks. */
static kb_spawn_stats learnt(struct kb_wait_memory **slot)
{
    memory = slot;
    struct sim s = simulate(64, 2, 20000, 2000, 8000, 0);
    sim_rounds(&s, 400);
    kb_spawn_stats st = report(s.p);
    kb__wait_policy_destroy(s.p); /* leaves its record */
    return st;
}

static void test_a_spawn_of_the_shape_the_ctx_remembers_starts_where_the_last_one_ended(void **state)
{
    (void)state;
    struct kb_wait_memory *slot = NULL;
    kb_spawn_stats first = learnt(&slot);
    struct kb_wait_policy *p = make(64, 2, 0);
    if (adapting_here(p)) {
        assert_int_equal(first.wait_mode, KB_WAIT_LOOK);
        kb_spawn_stats next = report(p);
        assert_int_equal(next.wait_mode, KB_WAIT_LOOK);
        assert_memory_equal(next.wait_ns, first.wait_ns, sizeof next.wait_ns);
        struct kb_wait_budget b = told(p);
        assert_int_equal(mode_of(&b), KB_WAIT_LOOK);
        kb__wait_policy_destroy(p);
    }
    free(slot); /* (one block) */
}

static void test_a_spawn_of_another_shape_starts_from_the_counts(void **state)
{
    (void)state;
    struct kb_wait_memory *slot = NULL;
    learnt(&slot);
    struct kb_wait_policy *p = make(63, 2, 0);
    if (adapting_here(p)) {
        kb_spawn_stats st = report(p);
        assert_int_equal(st.wait_mode, KB_WAIT_NUDGE);
        assert_int_equal(st.wait_ns[KB_WAIT_LOOK], 0);
        kb__wait_policy_destroy(p);
    }
    free(slot); /* (one block) */
}

static void test_a_forced_spawn_neither_reads_nor_writes_the_record(void **state)
{
    (void)state;
    struct kb_wait_memory *slot = NULL;
    kb_spawn_stats first = learnt(&slot);
    setenv("KB_WAIT_POLICY", "static", 1);
    struct kb_wait_policy *p = make(64, 2, 0);
    assert_int_equal(report(p).wait_mode, UNDER_VALGRIND ? KB_WAIT_SLEEP : KB_WAIT_NUDGE);
    kb__wait_policy_destroy(p);
    unsetenv("KB_WAIT_POLICY");
    p = make(64, 2, 0);
    if (adapting_here(p)) {
        assert_memory_equal(report(p).wait_ns, first.wait_ns, sizeof first.wait_ns);
        kb__wait_policy_destroy(p);
    }
    free(slot); /* (one block) */
}

/* ---- seating: where the ranks are asked to move ---- */

/* Rank r's move at its next suspension, or -1. */
static int moves(struct kb_wait_policy *p, int rank)
{
    struct kb_wait_budget b;
    return kb__wait_next_turn(p, rank, &b);
}

static int can_seat(void)
{
    return (kb_features() & KB_FEATURE_AFFINITY) && kbt_real_cpus() >= 2;
}

static void test_a_stretch_of_nudges_moves_each_rank_once_onto_alternate_cpus(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "nudge", 1);
    struct kb_wait_policy *p = make(8, 2, 0);
    int cpu[8];
    for (int r = 0; r < 8; r++)
        cpu[r] = moves(p, r);
    for (int r = 0; r < 8; r++)
        assert_int_equal(moves(p, r), -1); /* once per stretch */
    if (!can_seat() || UNDER_VALGRIND) {
        for (int r = 0; r < 8; r++)
            assert_int_equal(cpu[r], -1); /* one CPU: nowhere to move */
    } else {
        for (int r = 0; r < 8; r++) {
            assert_true(cpu[r] >= 0);
            assert_int_equal(cpu[r], cpu[r & 1]);
        }
        assert_int_not_equal(cpu[0], cpu[1]);
    }
    kb__wait_policy_destroy(p);
}

static void test_spins_start_with_each_rank_moved_once_onto_alternate_cpus(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "spin", 1);
    struct kb_wait_policy *p = make(2, 2, 0);
    int cpu0 = moves(p, 0), cpu1 = moves(p, 1);
    assert_int_equal(moves(p, 0), -1); /* once */
    if (!can_seat() || UNDER_VALGRIND) {
        assert_int_equal(cpu0, -1);
        assert_int_equal(cpu1, -1);
    } else {
        assert_true(cpu0 >= 0 && cpu1 >= 0);
        assert_int_not_equal(cpu0, cpu1); /* two spinners never share a CPU */
    }
    kb__wait_policy_destroy(p);
}

static void test_looks_after_nudges_start_gathered_on_one_cpu(void **state)
{
    (void)state;
    struct sim s = simulate(64, 2, 20000, 2000, 8000, 0);
    if (!adapting_here(s.p))
        return;
    for (int r = 0; r < 64; r++)
        moves(s.p, r); /* the spawn's stretch of nudges */
    sim_rounds(&s, 400);
    assert_int_equal(report(s.p).wait_mode, KB_WAIT_LOOK);
    int first = moves(s.p, 1);
    for (int r = 2; r < 64; r++)
        assert_int_equal(moves(s.p, r), first);
    assert_true(can_seat() ? first >= 0 : first == -1);
    kb__wait_policy_destroy(s.p);
}

static void test_no_rank_moves_without_nudges_or_with_an_affinity_option(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "look", 1);
    struct kb_wait_policy *p = make(8, 2, 0);
    for (int r = 0; r < 8; r++)
        assert_int_equal(moves(p, r), -1);
    kb__wait_policy_destroy(p);
    unsetenv("KB_WAIT_POLICY");
    for (int a = KB_AFFINITY_ONE_CPU; a <= KB_AFFINITY_SPREAD; a++) {
        p = make(64, 2, a);
        for (int r = 0; r < 64; r++)
            assert_int_equal(moves(p, r), -1);
        kb__wait_policy_destroy(p);
    }
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_on_one_cpu_ranks_look_at_any_count),
        T(test_up_to_four_ranks_per_cpu_ranks_look_and_beyond_they_nudge),
        T(test_with_as_many_ranks_as_cpus_a_look_spins_briefly_first_while_the_driver_is_left_out),
        T(test_a_nudged_rank_watches_yielding_unpinned),
        T(test_the_driver_looks_before_it_sleeps_unpinned),
        T(test_kb_wait_policy_forces_each_mode_and_nothing_adapts),
        T(test_a_malformed_kb_wait_policy_is_ignored),
        T(test_one_cpu_affinity_sleeps_at_once_whatever_kb_wait_policy_says),
        T(test_spread_affinity_spins_with_a_cpu_per_rank_and_nudges_with_pausing_watches),
        T(test_it_starts_in_the_choice_from_the_counts),
        T(test_it_moves_to_a_mode_that_measures_faster),
        T(test_it_keeps_its_mode_when_another_is_faster_by_less_than_an_eighth),
        T(test_a_spawn_too_short_to_measure_keeps_its_first_mode),
        T(test_tries_take_at_most_a_thirty_second_of_the_time),
        T(test_a_mode_that_lost_is_tried_less_and_less_often),
        T(test_tries_begin_at_the_starts_of_slots_of_the_clock),
        T(test_a_change_of_load_is_noticed_and_it_moves),
        T(test_it_tries_other_modes_at_any_rank_count),
        T(test_spin_is_a_candidate_only_where_every_rank_has_a_cpu),
        T(test_a_try_far_slower_than_home_is_cut_short),
        T(test_a_try_is_not_judged_on_its_first_handoffs),
        T(test_sleep_is_a_candidate_only_where_the_ranks_outnumber_the_cpus),
        T(test_on_one_cpu_only_look_and_sleep_are_tried),
        T(test_a_pause_ends_a_try),
        T(test_homes_window_spans_pauses_and_counts_none_of_them),
        T(test_cycle_moves_to_the_next_mode_at_every_round_boundary),
        T(test_cycle_reaches_spin_with_one_cpu_counted_too),
        T(test_wait_mode_names),
        T(test_a_spawn_of_the_shape_the_ctx_remembers_starts_where_the_last_one_ended),
        T(test_a_spawn_of_another_shape_starts_from_the_counts),
        T(test_a_forced_spawn_neither_reads_nor_writes_the_record),
        T(test_a_stretch_of_nudges_moves_each_rank_once_onto_alternate_cpus),
        T(test_spins_start_with_each_rank_moved_once_onto_alternate_cpus),
        T(test_looks_after_nudges_start_gathered_on_one_cpu),
        T(test_no_rank_moves_without_nudges_or_with_an_affinity_option),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
