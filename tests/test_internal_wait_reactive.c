/* SPDX-License-Identifier: MIT */
/*
 * The reactive wait policy's decisions (src/baton_wait_reactive.c), driven
 * by a clock of the test's own: each simulated round adds its handoffs and
 * the time they cost in the mode the ranks wait in, and the policy is
 * asked at round boundaries exactly as round_loop.c asks it. What a real
 * spawn measures and reports is tested in test_sched_wait_policy.c; that
 * no mode changes the order, by the differential runs under
 * KB_WAIT_POLICY=cycle (tests/reliability).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton_wait_policy.h"
#include "baton_wait_reactive.h"
#include "baton_wait_reactive_tuning.h" /* the policy's constants, not copies */
#include "run.h"

struct sim {
    struct kb_run run;
    uint64_t now;                 /* the test's clock, ns */
    uint64_t cost[KB_WAIT_MODES]; /* ns per handoff in each mode */
    int per_round;                /* handoffs per round */
    uint64_t off_home;            /* handoffs run in a mode other than the chosen one */
    uint64_t try_ns;              /* time spent in a mode other than the chosen one */
    int driver_drains;            /* every round ends in a drain the driver runs */
};

static const int LOOK_NUDGE_SLEEP[] = {KB_WAIT_LOOK, KB_WAIT_NUDGE, KB_WAIT_SLEEP};

/* A spawn of nprocs ranks on 2 CPUs with these candidates, starting from
 * home, or from mem's record of its shape (mem may be NULL: a fresh ctx). */
static void sim_start_with(struct sim *s, int nprocs, int home, const uint64_t cost[KB_WAIT_MODES],
                           const int *cand, int ncand, const struct kb_wait_memory *mem)
{
    memset(s, 0, sizeof *s);
    s->run.nprocs = nprocs;
    s->run.nlive = nprocs;
    s->per_round = nprocs + 1; /* every turn, and the driver's drain */
    memcpy(s->cost, cost, sizeof s->cost);
    s->now = 1000000;
    s->run.seat.gather = -1; /* as kb__seat_resolve leaves it */
    kb__wait_reactive_start(&s->run, nprocs, 2, home, cand, ncand, 0, mem);
}

/* The same with look, nudge and sleep as candidates. */
static void sim_start_on(struct sim *s, int nprocs, int home, const uint64_t cost[KB_WAIT_MODES],
                         const struct kb_wait_memory *mem)
{
    sim_start_with(s, nprocs, home, cost, LOOK_NUDGE_SLEEP, 3, mem);
}

static void sim_start(struct sim *s, int nprocs, int home, const uint64_t cost[KB_WAIT_MODES])
{
    sim_start_on(s, nprocs, home, cost, NULL);
}

/* n rounds: a round boundary (where the policy may act), then the round. */
static void sim_rounds(struct sim *s, long n)
{
    struct kb_wait_reactive *r = &s->run.reactive;
    for (long i = 0; i < n; i++) {
        if (s->run.counters.handoffs >= r->next_check)
            kb__wait_reactive_step(&s->run, s->now);
        uint64_t ns = s->cost[r->mode] * (uint64_t)s->per_round;
        if (r->mode != r->home) {
            s->off_home += (uint64_t)s->per_round;
            s->try_ns += ns;
        }
        s->run.counters.handoffs += (uint64_t)s->per_round;
        s->run.counters.driver_drains += (uint64_t)s->driver_drains;
        s->now += ns;
    }
}

static void test_it_starts_in_the_mode_it_is_given_and_sets_that_modes_budget(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 64, KB_WAIT_NUDGE, (uint64_t[]){1000, 1000, 1000, 1000});
    assert_true(s.run.reactive.active);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_NUDGE);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    assert_true(s.run.rank_wait.watch & KB_WATCH_YIELD);
    assert_true(s.run.reactive.nudged);
}

static void test_it_moves_to_a_mode_that_measures_faster(void **state)
{
    (void)state;
    struct sim s; /* sleep, look, nudge, spin */
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 5000, 2500, 0});
    sim_rounds(&s, 3000);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    assert_int_equal(s.run.reactive.switches, 1);
    assert_true(s.run.reactive.probes >= 2);
    assert_int_equal(s.run.reactive.est[KB_WAIT_NUDGE], 2500);
    assert_int_equal(s.run.reactive.est[KB_WAIT_LOOK], 5000);
}

static void test_it_keeps_its_mode_when_another_is_faster_by_less_than_an_eighth(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 5000, 4700, 0});
    sim_rounds(&s, 20000);
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
    assert_int_equal(s.run.reactive.switches, 0);
    assert_true(s.run.reactive.probes >= 2);
}

static void test_a_spawn_too_short_to_measure_keeps_the_mode_it_started_in(void **state)
{
    (void)state;
    struct sim s; /* 10 rounds of 4096 ranks: a try would be more than its share */
    sim_start(&s, 4096, KB_WAIT_NUDGE, (uint64_t[]){1000, 1000, 100, 0});
    s.cost[KB_WAIT_LOOK] = 10; /* whatever look would give, it is never tried */
    sim_rounds(&s, 10);
    assert_int_equal(s.run.reactive.probes, 0);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_NUDGE);
}

static void test_tries_take_at_most_a_thirty_second_of_the_time(void **state)
{
    (void)state;
    for (int n = 1; n <= 64; n *= 8) {
        struct sim s;
        sim_start(&s, n, KB_WAIT_LOOK, (uint64_t[]){3000, 2000, 2100, 0});
        uint64_t t0 = s.now;
        for (int k = 0; k < 200; k++) {
            sim_rounds(&s, 500);
            /* Tries begin at slots a period apart, the period made for a
             * try at home's cost (2 us), and are checked against the share
             * of the time up to a period after them: one try (its
             * settling round, its window and the round that crosses it,
             * in the slowest mode) may overshoot, and a period's share. */
            uint64_t one_try = (2 * (uint64_t)(n + 1) + PROBE_HANDOFFS) * 3000;
            uint64_t period = 2 * ((uint64_t)n + 1 + PROBE_HANDOFFS) * 2000 * PROBE_SHARE +
                              (uint64_t)(n + 1) * TRY_SLOT_PER_RANK_NS;
            assert_true(s.try_ns <= (s.now - t0 + period) / PROBE_SHARE + one_try);
        }
        assert_true(s.run.reactive.probes > 0);
    }
}

static void test_no_mode_is_tried_where_a_round_is_longer_than_a_try(void **state)
{
    (void)state;
    struct sim s; /* 256 ranks: a round of 257 handoffs, a try 256 */
    sim_start(&s, 256, KB_WAIT_NUDGE, (uint64_t[]){800, 100, 800, 0});
    sim_rounds(&s, 3000);
    assert_int_equal(s.run.reactive.probes, 0);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    /* 255 ranks (rounds of 256 handoffs), however slow, try look and take it. */
    sim_start(&s, 255, KB_WAIT_NUDGE, (uint64_t[]){8000, 1000, 8000, 0});
    sim_rounds(&s, 3000);
    assert_true(s.run.reactive.probes > 0);
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
}

/* Two ranks on two CPUs, looking, spin its only other candidate. */
static void sim_start_two_ranks(struct sim *s, int driver_drains)
{
    static const int LOOK_SPIN[] = {KB_WAIT_LOOK, KB_WAIT_SPIN};
    sim_start_with(s, 2, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 9000, 1000}, LOOK_SPIN, 2, NULL);
    s->driver_drains = driver_drains;
}

static void test_with_as_many_ranks_as_cpus_spin_is_tried_only_while_rounds_leave_the_driver_out(void **state)
{
    (void)state;
    struct sim s; /* spin would measure faster: whether it is tried is the question */
    sim_start_two_ranks(&s, 1);
    sim_rounds(&s, 20000);
    assert_int_equal(s.run.reactive.probes, 0);
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
    sim_start_two_ranks(&s, 0);
    sim_rounds(&s, 20000);
    assert_true(s.run.reactive.probes > 0);
    assert_int_equal(s.run.reactive.home, KB_WAIT_SPIN);
}

/* n rounds, one at a time; returns how many stretches of nudges began. */
static int sim_rounds_counting_nudge_stretches(struct sim *s, long n)
{
    int stretches = 0;
    for (long i = 0; i < n; i++) {
        int before = s->run.reactive.mode;
        sim_rounds(s, 1);
        stretches += s->run.reactive.mode == KB_WAIT_NUDGE && before != KB_WAIT_NUDGE;
    }
    return stretches;
}

/* (A simulated run's seat CPUs are 0 and 0: seating and gathering count.) */
static void test_a_try_of_nudges_is_seated_and_the_ranks_gathered_after_it_loses(void **state)
{
    (void)state;
    struct sim s; /* look home, nudge tried and losing */
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 5000, 0});
    int tries = sim_rounds_counting_nudge_stretches(&s, 3000);
    assert_true(tries > 0);
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
    /* seated for each try of nudges, and gathered after every try (looks
     * after another mode start gathered: more ranks than CPUs) */
    assert_int_equal(s.run.seat.epoch, (unsigned)tries + (unsigned)s.run.reactive.probes);
    assert_int_equal(s.run.seat.gather, 0);
}

static void test_looks_after_another_mode_start_gathered_only_with_more_ranks_than_cpus(void **state)
{
    (void)state;
    static const int LOOK_SLEEP[] = {KB_WAIT_LOOK, KB_WAIT_SLEEP};
    struct sim s; /* a spawn's first looks start where the kernel put the threads */
    sim_start_with(&s, 8, KB_WAIT_LOOK, (uint64_t[]){2000, 2000, 9000, 0}, LOOK_SLEEP, 2, NULL);
    assert_int_equal(s.run.seat.epoch, 0);
    while (s.run.reactive.probes == 0) /* a try of sleep, then looks again */
        sim_rounds(&s, 1);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_SLEEP);
    assert_int_equal(s.run.seat.epoch, 0);
    while (s.run.reactive.mode != KB_WAIT_LOOK)
        sim_rounds(&s, 1);
    assert_int_equal(s.run.seat.epoch, 1);
    assert_int_equal(s.run.seat.gather, 0);
    /* Two ranks on two CPUs: every rank has a CPU, the looks stay put. */
    static const int LOOK_SPIN[] = {KB_WAIT_LOOK, KB_WAIT_SPIN};
    sim_start_with(&s, 2, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 9000, 2000}, LOOK_SPIN, 2, NULL);
    while (s.run.reactive.probes == 0 || s.run.reactive.mode != KB_WAIT_LOOK)
        sim_rounds(&s, 1);
    assert_int_equal(s.run.seat.epoch, 0);
    assert_int_equal(s.run.seat.gather, -1);
}

/* Nudges home at 64 ranks, looks tried and losing (cut short); the
 * driver's CPU (seat 1) is 7, the other seat 5. */
static void
test_each_try_of_gathered_looks_that_lost_moves_the_next_gathering_by_the_pids_next_bit(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 64, KB_WAIT_NUDGE, (uint64_t[]){9000, 5000, 2000, 0});
    s.run.seat.cpu[0] = 5;
    s.run.seat.cpu[1] = 7;
    unsigned pid = (unsigned)getpid();
    int tries = 0, was = 0;
    for (long i = 0; i < 400000 && tries < 5; i++) {
        sim_rounds(&s, 1);
        int looking = s.run.reactive.mode == KB_WAIT_LOOK;
        if (looking && !was) { /* the try before each lost: its turn is the count of them */
            int other = tries > 0 && ((pid >> (tries - 1)) & 1u);
            assert_int_equal(s.run.seat.gather, other ? 5 : 7);
            assert_int_equal(s.run.reactive.gather_turn, (unsigned)tries);
            tries++;
        }
        was = looking;
    }
    assert_int_equal(tries, 5);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
}

static void test_the_first_four_turns_of_gathered_looks_are_tried_without_backing_off(void **state)
{
    (void)state;
    struct sim s; /* nudges home at 64 ranks, looks 2.5x slower: every try cut short */
    sim_start(&s, 64, KB_WAIT_NUDGE, (uint64_t[]){9000, 5000, 2000, 0});
    enum { FREE = GATHER_TURNS_FREE, TRIES = FREE + 2 };
    uint64_t starts[TRIES], slot = 65 * TRY_SLOT_PER_RANK_NS;
    int tries = 0, was = 0;
    for (long i = 0; i < 400000 && tries < TRIES; i++) {
        uint64_t t = s.now;
        sim_rounds(&s, 1);
        int looking = s.run.reactive.mode == KB_WAIT_LOOK;
        if (looking && !was)
            starts[tries++] = t;
        was = looking;
    }
    assert_int_equal(tries, TRIES);
    /* the free turns in the next slots (the period is one slot here) ... */
    for (int i = 1; i <= FREE; i++)
        assert_true(starts[i] - starts[i - 1] <= 2 * slot);
    /* ... and the next loss, cut short, backs off BACKOFF_GROWTH^2 slots */
    assert_true(starts[FREE + 1] - starts[FREE] >= (BACKOFF_GROWTH * BACKOFF_GROWTH - 1) * slot);
}

static void test_a_try_of_nudges_that_wins_stays_seated(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 5000, 2000, 0});
    for (int k = 0; k < 3000 && s.run.reactive.home != KB_WAIT_NUDGE; k++)
        sim_rounds(&s, 1);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    assert_int_equal(s.run.seat.epoch, 1); /* seated when the try began, not again */
    assert_int_equal(s.run.seat.gather, -1);
}

static void test_tries_begin_at_the_starts_of_slots_of_the_clock_whatever_the_cost(void **state)
{
    (void)state;
    /* Two processes of one shape measuring different costs try in the
     * same slots: a try begins within a round of a slot's start. */
    for (uint64_t cost = 1000; cost <= 8000; cost *= 2) {
        struct sim s;
        sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, cost, 2 * cost, 0});
        uint64_t slot = 9 * TRY_SLOT_PER_RANK_NS, round = 9 * cost; /* a round of home, looking */
        int tries = 0, was = 0;
        for (long i = 0; i < 200000 && tries < 4; i++) {
            uint64_t t = s.now;
            sim_rounds(&s, 1);
            int trying = s.run.reactive.mode != KB_WAIT_LOOK;
            if (trying && !was) { /* it began at the boundary at t */
                assert_true(t % slot < round);
                tries++;
            }
            was = trying;
        }
        assert_int_equal(tries, 4);
    }
}

static void test_nudges_as_home_are_seated_again_after_each_try_of_another_mode(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 64, KB_WAIT_NUDGE, (uint64_t[]){9000, 5000, 2000, 0});
    assert_int_equal(s.run.seat.epoch, 1);
    sim_rounds(&s, 3000);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    assert_true(s.run.reactive.probes > 0);
    /* gathered when each try began, seated again when it ended */
    assert_int_equal(s.run.seat.epoch, 1 + 2 * s.run.reactive.probes);
    assert_int_equal(s.run.seat.gather, -1);
}

static void test_a_try_of_a_much_slower_mode_is_cut_short(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 2, KB_WAIT_LOOK, (uint64_t[]){250000, 2500, 250000, 0}); /* 100x slower */
    sim_rounds(&s, 100000);
    uint64_t tries = s.run.reactive.probes;
    assert_true(tries >= 2);
    /* Per try: a settling round, then the rounds up to the boundary where
     * it has MIN_JUDGE_HANDOFFS handoffs, judged there, far more than twice home's cost. */
    uint64_t round = 250000u * 3;
    assert_true(s.try_ns <= tries * (round + (MIN_JUDGE_HANDOFFS + 3) * 250000u));
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
}

static void test_a_try_whose_slot_passed_in_a_pause_begins_at_the_next_slot(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 1000, 0});
    while (!s.run.reactive.try_at) /* a try is due, waiting for its slot */
        sim_rounds(&s, 1);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_LOOK);
    uint64_t slot = 9 * TRY_SLOT_PER_RANK_NS, round = 9 * 2000;
    kb__wait_reactive_pause_at(&s.run, s.now);
    s.now += 10 * slot + slot / 2; /* the caller away ten and a half slots between two kb_joins */
    kb__wait_reactive_restart(&s.run);
    uint64_t t = s.now;
    while (s.run.reactive.mode == KB_WAIT_LOOK) {
        t = s.now;
        sim_rounds(&s, 1);
    }
    assert_true(t % slot < round);
}

static void test_a_mode_that_lost_is_tried_less_and_less_often(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 2600, 0});
    uint64_t starts[16];
    int nstarts = 0;
    int was_trying_nudge = 0;
    for (long i = 0; i < 2000000 && nstarts < 7; i++) {
        sim_rounds(&s, 1);
        int trying_nudge = s.run.reactive.mode == KB_WAIT_NUDGE;
        if (trying_nudge && !was_trying_nudge)
            starts[nstarts++] = s.now;
        was_trying_nudge = trying_nudge;
    }
    assert_true(nstarts >= 5);
    for (int i = 0; i < nstarts; i++)
        print_message("try %d of nudge at %llu ns\n", i, (unsigned long long)starts[i]);
    /* The gaps never shrink (the back-off grows fourfold in slots), they
     * reach the cap, and never pass it by more than a slot: a change of
     * load is noticed within about BACKOFF_MAX_NS. */
    uint64_t slot = 9 * TRY_SLOT_PER_RANK_NS, most = BACKOFF_MAX_NS / slot * slot;
    for (int i = 2; i < nstarts; i++) {
        uint64_t gap = starts[i] - starts[i - 1], before = starts[i - 1] - starts[i - 2];
        assert_true(gap + slot >= before);
    }
    assert_true(starts[3] - starts[2] < starts[nstarts - 1] - starts[nstarts - 2]);
    for (int i = 1; i < nstarts; i++)
        assert_true(starts[i] - starts[i - 1] <= most + 2 * slot);
    assert_true(starts[nstarts - 1] - starts[nstarts - 2] >= most - slot); /* the cap was reached */
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
}

/* The handoffs at which mode m's first k tries began (k <= 8). */
static int try_starts(struct sim *s, int m, uint64_t *starts, int k, long max_rounds)
{
    int n = 0, was = 0;
    for (long i = 0; i < max_rounds && n < k; i++) {
        sim_rounds(s, 1);
        int now = s->run.reactive.mode == m;
        if (now && !was)
            starts[n++] = s->run.counters.handoffs;
        was = now;
    }
    return n;
}

static void test_a_mode_whose_tries_are_cut_short_backs_off_faster(void **state)
{
    (void)state;
    /* nudge loses narrowly in one spawn, by far (cut short) in the other */
    struct sim close, far;
    sim_start(&close, 8, KB_WAIT_LOOK, (uint64_t[]){2200, 2000, 2600, 0});
    sim_start(&far, 8, KB_WAIT_LOOK, (uint64_t[]){2200, 2000, 9000, 0});
    uint64_t a[3], b[3];
    assert_int_equal(try_starts(&close, KB_WAIT_NUDGE, a, 3, 400000), 3);
    assert_int_equal(try_starts(&far, KB_WAIT_NUDGE, b, 3, 400000), 3);
    for (int i = 0; i < 3; i++)
        print_message("try %d of nudge: close at %llu, far at %llu\n", i, (unsigned long long)a[i],
                      (unsigned long long)b[i]);
    /* After two losses cut short: (growth^2)^2 windows; after two close
     * ones, growth^2 (or what the time share asks, which is less here). */
    uint64_t cut = BACKOFF_GROWTH * BACKOFF_GROWTH;
    assert_true(b[2] - b[1] >= cut * cut * WINDOW_HANDOFFS);
    assert_true(a[2] - a[1] < cut * cut * WINDOW_HANDOFFS);
}

static void test_when_its_mode_slows_down_it_tries_the_others_again_and_moves(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 3000, 0});
    sim_rounds(&s, 200000); /* long enough that the others are tried rarely */
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
    uint64_t h0 = s.run.counters.handoffs;
    s.cost[KB_WAIT_LOOK] = 8000; /* a hog arrives: looking now costs 4x */
    while (s.run.reactive.home == KB_WAIT_LOOK && s.run.counters.handoffs - h0 < 1000000)
        sim_rounds(&s, 1);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    /* the moving average crosses the threshold in a few windows; then tries
     * wait only for their share */
    assert_true(s.run.counters.handoffs - h0 < 40 * WINDOW_HANDOFFS);
}

static void test_a_restart_drops_the_open_window_and_any_try(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 5000, 6000, 0});
    while (s.run.reactive.mode == KB_WAIT_LOOK)
        sim_rounds(&s, 1); /* until the first try begins */
    s.now += 10000000000u; /* the caller paused between two kb_joins */
    kb__wait_reactive_restart(&s.run);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_LOOK);
    sim_rounds(&s, 5000);
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
    assert_true(s.run.reactive.est[KB_WAIT_LOOK] < 6000); /* the pause counted in no window */
}

static void test_homes_window_spans_joins_shorter_than_a_window_and_counts_no_pause(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 4, KB_WAIT_LOOK, (uint64_t[]){50000, 3000, 50000, 0});
    for (int slice = 0; slice < 40; slice++) { /* joins of 10 rounds: 50 handoffs each */
        kb__wait_reactive_restart(&s.run);
        sim_rounds(&s, 10);
        kb__wait_reactive_pause_at(&s.run, s.now);
        s.now += 1000000000u; /* the caller's own second between two joins */
    }
    assert_int_equal(s.run.reactive.home, KB_WAIT_LOOK);
    uint64_t est = s.run.reactive.est[KB_WAIT_LOOK];
    assert_true(est >= 3000 && est < 3300); /* measured, and no pause in it */
}

static void test_cycle_moves_to_the_next_mode_at_every_round_boundary(void **state)
{
    (void)state;
    static const int all[] = {KB_WAIT_SLEEP, KB_WAIT_LOOK, KB_WAIT_NUDGE, KB_WAIT_SPIN};
    struct kb_run run;
    memset(&run, 0, sizeof run);
    run.nprocs = run.nlive = 3;
    kb__wait_reactive_start(&run, 3, 2, KB_WAIT_SLEEP, all, 4, 1, NULL);
    int seen[KB_WAIT_MODES] = {0};
    int prev = run.reactive.mode;
    for (int i = 0; i < 12; i++) {
        run.counters.handoffs += 4;
        kb__wait_reactive_tick(&run);
        assert_int_not_equal(run.reactive.mode, prev);
        assert_int_equal(run.reactive.mode, all[(i + 1) % 4]);
        seen[run.reactive.mode]++;
        prev = run.reactive.mode;
    }
    for (int m = 0; m < KB_WAIT_MODES; m++)
        assert_int_equal(seen[m], 3);
    assert_true(run.reactive.nudged); /* kb__wait_nudges must look from then on */
}

static void test_each_mode_has_its_budget(void **state)
{
    (void)state;
    struct kb_wait_budget b = kb__wait_mode_budget(KB_WAIT_SLEEP, 8, 2, 1);
    assert_int_equal(b.spin_ns + b.look_ns + b.watch, 0);
    b = kb__wait_mode_budget(KB_WAIT_LOOK, 8, 2, 1);
    assert_true(b.look_ns > 0 && b.spin_ns == 0 && b.watch == 0);
    b = kb__wait_mode_budget(KB_WAIT_LOOK, 2, 2, 1);
    assert_true(b.spin_ns > 0 && b.look_ns > b.spin_ns); /* counted: the short spin with n = c */
    b = kb__wait_mode_budget(KB_WAIT_LOOK, 2, 2, 0);
    assert_int_equal(b.spin_ns, 0);
    b = kb__wait_mode_budget(KB_WAIT_NUDGE, 64, 2, 1);
    assert_true((b.watch & KB_WATCH_YIELD) && b.spin_ns + b.look_ns == 0);
    assert_int_equal(kb__wait_mode_budget(KB_WAIT_NUDGE, 64, 1, 1).watch,
                     0); /* one CPU: nobody to wake early */
    b = kb__wait_mode_budget(KB_WAIT_SPIN, 1, 2, 1);
    assert_true(b.spin_ns > 0 && b.look_ns == 0 && b.watch == 0);
}

static void test_wait_mode_names(void **state)
{
    (void)state;
    assert_string_equal(kb_wait_mode_name(KB_WAIT_SLEEP), "sleep");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_LOOK), "look");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_NUDGE), "nudge");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_SPIN), "spin");
    assert_string_equal(kb_wait_mode_name(-1), "unknown");
    assert_string_equal(kb_wait_mode_name(KB_WAIT_MODES), "unknown");
}

/* The settling round after a try (the ranks still wake as the tried mode
 * had them wait) is counted with the try against the share. */
static void test_the_settling_round_after_a_try_counts_as_the_trys_time(void **state)
{
    (void)state;
    struct sim s;
    sim_start(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 2000, 6000, 0});
    struct kb_wait_reactive *r = &s.run.reactive;
    while (r->mode == KB_WAIT_LOOK)
        sim_rounds(&s, 1);
    uint64_t began = s.now - s.cost[r->mode] * (uint64_t)s.per_round; /* the boundary it began at */
    while (r->mode != KB_WAIT_LOOK)
        sim_rounds(&s, 1);
    assert_true(r->after_probe);
    while (r->after_probe)
        sim_rounds(&s, 1);
    uint64_t settled = s.now - s.cost[KB_WAIT_LOOK] * (uint64_t)s.per_round;
    assert_int_equal(r->probes, 1);
    assert_int_equal(r->probe_ns, settled - began);
}

/* ---- what a ctx remembers between spawns ---------------------------------------- */

/* A spawn of nprocs ranks from look, run for `rounds` rounds at these
 * costs, its run saved in mem as kb__run_destroy saves it; s holds it. */
static void learn(struct sim *s, struct kb_wait_memory *mem, int nprocs, const uint64_t cost[KB_WAIT_MODES],
                  long rounds)
{
    sim_start_on(s, nprocs, KB_WAIT_LOOK, cost, mem);
    sim_rounds(s, rounds);
    kb__wait_reactive_save(&s->run, mem);
}

static void test_a_spawn_of_a_remembered_shape_starts_in_the_mode_the_last_one_ended_in(void **state)
{
    (void)state;
    static const uint64_t cost[KB_WAIT_MODES] = {9000, 5000, 2500, 0};
    struct kb_wait_memory mem;
    memset(&mem, 0, sizeof mem);
    struct sim s;
    learn(&s, &mem, 8, cost, 3000);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    uint64_t est[KB_WAIT_MODES];
    memcpy(est, s.run.reactive.est, sizeof est);

    sim_start_on(&s, 8, KB_WAIT_LOOK, cost, &mem); /* the static choice says look again */
    assert_true(s.run.reactive.resumed);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_NUDGE);
    assert_true(s.run.rank_wait.watch & KB_WATCH_YIELD);
    assert_memory_equal(s.run.reactive.est, est, sizeof est);
    sim_rounds(&s, 3000);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    assert_int_equal(s.run.reactive.switches, 0);
}

static void test_a_spawn_of_a_remembered_shape_gathers_on_the_turn_the_last_one_reached(void **state)
{
    (void)state;
    static const uint64_t cost[KB_WAIT_MODES] = {9000, 5000, 2000, 0};
    struct kb_wait_memory mem;
    memset(&mem, 0, sizeof mem);
    struct sim s; /* nudges home at 64 ranks, looks tried and losing */
    sim_start_on(&s, 64, KB_WAIT_NUDGE, cost, &mem);
    sim_rounds(&s, 200000);
    unsigned turn = s.run.reactive.gather_turn;
    assert_true(turn > 0);
    kb__wait_reactive_save(&s.run, &mem);
    sim_start_on(&s, 64, KB_WAIT_NUDGE, cost, &mem);
    assert_true(s.run.reactive.resumed);
    assert_int_equal(s.run.reactive.gather_turn, turn);
}

static void test_a_resumed_spawn_does_not_try_again_at_once_what_lost_before(void **state)
{
    (void)state;
    static const uint64_t cost[KB_WAIT_MODES] = {9000, 2000, 6000, 0};
    struct kb_wait_memory mem;
    memset(&mem, 0, sizeof mem);
    struct sim s;
    learn(&s, &mem, 8, cost, 20000); /* nudge and sleep lost several times: backed off */
    struct sim fresh;
    sim_start(&fresh, 8, KB_WAIT_LOOK, cost);
    sim_start_on(&s, 8, KB_WAIT_LOOK, cost, &mem);
    sim_rounds(&fresh, 4000);
    sim_rounds(&s, 4000);
    print_message("tries in 4000 rounds: fresh %llu, resumed %llu\n",
                  (unsigned long long)fresh.run.reactive.probes, (unsigned long long)s.run.reactive.probes);
    assert_true(fresh.run.reactive.probes >= 2);
    assert_int_equal(s.run.reactive.probes, 0);
    assert_true(s.off_home < fresh.off_home);
}

static void test_a_resumed_mode_that_got_slower_is_left_for_a_faster_one(void **state)
{
    (void)state;
    struct kb_wait_memory mem;
    memset(&mem, 0, sizeof mem);
    struct sim s;
    learn(&s, &mem, 8, (uint64_t[]){9000, 2000, 3000, 0}, 200000);
    /* the next spawn runs beside a hog: looking costs 4x */
    sim_start_on(&s, 8, KB_WAIT_LOOK, (uint64_t[]){9000, 8000, 3000, 0}, &mem);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_LOOK);
    while (s.run.reactive.home == KB_WAIT_LOOK && s.run.counters.handoffs < 1000000)
        sim_rounds(&s, 1);
    assert_int_equal(s.run.reactive.home, KB_WAIT_NUDGE);
    assert_true(s.run.counters.handoffs < 40 * WINDOW_HANDOFFS);
}

static void test_a_spawn_of_another_shape_starts_from_the_choice_it_is_given(void **state)
{
    (void)state;
    static const uint64_t cost[KB_WAIT_MODES] = {9000, 5000, 2500, 0};
    struct kb_wait_memory mem;
    memset(&mem, 0, sizeof mem);
    struct sim s;
    learn(&s, &mem, 8, cost, 3000);
    sim_start_on(&s, 9, KB_WAIT_LOOK, cost, &mem);
    assert_false(s.run.reactive.resumed);
    assert_int_equal(s.run.reactive.mode, KB_WAIT_LOOK);
    for (int m = 0; m < KB_WAIT_MODES; m++)
        assert_int_equal(s.run.reactive.est[m], 0);
}

static void test_a_spawn_that_measured_nothing_leaves_the_memory_as_it_was(void **state)
{
    (void)state;
    struct kb_wait_memory mem, before;
    memset(&mem, 0, sizeof mem);
    struct sim s;
    sim_start_on(&s, 4096, KB_WAIT_NUDGE, (uint64_t[]){1000, 1000, 100, 0}, &mem);
    sim_rounds(&s, 0); /* returned at once */
    memcpy(&before, &mem, sizeof mem);
    kb__wait_reactive_save(&s.run, &mem);
    assert_memory_equal(&mem, &before, sizeof mem);
}

static void test_the_memory_keeps_four_shapes_and_replaces_the_least_recently_used(void **state)
{
    (void)state;
    static const uint64_t cost[KB_WAIT_MODES] = {9000, 5000, 2500, 0};
    struct kb_wait_memory mem;
    memset(&mem, 0, sizeof mem);
    struct sim s;
    for (int n = 2; n <= 5; n++) { /* four shapes, then 2 again: 3 is now the least recent */
        learn(&s, &mem, n, cost, 2000);
    }
    sim_start_on(&s, 2, KB_WAIT_LOOK, cost, &mem);
    assert_true(s.run.reactive.resumed);
    sim_rounds(&s, 2000);
    kb__wait_reactive_save(&s.run, &mem);
    learn(&s, &mem, 6, cost, 2000); /* a fifth shape */
    assert_false(s.run.reactive.resumed);
    for (int n = 2; n <= 6; n++) {
        sim_start_on(&s, n, KB_WAIT_LOOK, cost, &mem);
        assert_int_equal(s.run.reactive.resumed, n != 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_it_starts_in_the_mode_it_is_given_and_sets_that_modes_budget),
        cmocka_unit_test(test_it_moves_to_a_mode_that_measures_faster),
        cmocka_unit_test(test_it_keeps_its_mode_when_another_is_faster_by_less_than_an_eighth),
        cmocka_unit_test(test_a_spawn_too_short_to_measure_keeps_the_mode_it_started_in),
        cmocka_unit_test(test_tries_take_at_most_a_thirty_second_of_the_time),
        cmocka_unit_test(test_no_mode_is_tried_where_a_round_is_longer_than_a_try),
        cmocka_unit_test(
            test_with_as_many_ranks_as_cpus_spin_is_tried_only_while_rounds_leave_the_driver_out),
        cmocka_unit_test(test_a_try_of_nudges_is_seated_and_the_ranks_gathered_after_it_loses),
        cmocka_unit_test(test_looks_after_another_mode_start_gathered_only_with_more_ranks_than_cpus),
        cmocka_unit_test(
            test_each_try_of_gathered_looks_that_lost_moves_the_next_gathering_by_the_pids_next_bit),
        cmocka_unit_test(test_the_first_four_turns_of_gathered_looks_are_tried_without_backing_off),
        cmocka_unit_test(test_a_try_of_nudges_that_wins_stays_seated),
        cmocka_unit_test(test_tries_begin_at_the_starts_of_slots_of_the_clock_whatever_the_cost),
        cmocka_unit_test(test_nudges_as_home_are_seated_again_after_each_try_of_another_mode),
        cmocka_unit_test(test_a_try_of_a_much_slower_mode_is_cut_short),
        cmocka_unit_test(test_a_try_whose_slot_passed_in_a_pause_begins_at_the_next_slot),
        cmocka_unit_test(test_a_mode_that_lost_is_tried_less_and_less_often),
        cmocka_unit_test(test_a_mode_whose_tries_are_cut_short_backs_off_faster),
        cmocka_unit_test(test_when_its_mode_slows_down_it_tries_the_others_again_and_moves),
        cmocka_unit_test(test_a_restart_drops_the_open_window_and_any_try),
        cmocka_unit_test(test_homes_window_spans_joins_shorter_than_a_window_and_counts_no_pause),
        cmocka_unit_test(test_cycle_moves_to_the_next_mode_at_every_round_boundary),
        cmocka_unit_test(test_each_mode_has_its_budget),
        cmocka_unit_test(test_wait_mode_names),
        cmocka_unit_test(test_the_settling_round_after_a_try_counts_as_the_trys_time),
        cmocka_unit_test(test_a_spawn_of_a_remembered_shape_starts_in_the_mode_the_last_one_ended_in),
        cmocka_unit_test(test_a_spawn_of_a_remembered_shape_gathers_on_the_turn_the_last_one_reached),
        cmocka_unit_test(test_a_resumed_spawn_does_not_try_again_at_once_what_lost_before),
        cmocka_unit_test(test_a_resumed_mode_that_got_slower_is_left_for_a_faster_one),
        cmocka_unit_test(test_a_spawn_of_another_shape_starts_from_the_choice_it_is_given),
        cmocka_unit_test(test_a_spawn_that_measured_nothing_leaves_the_memory_as_it_was),
        cmocka_unit_test(test_the_memory_keeps_four_shapes_and_replaces_the_least_recently_used),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
