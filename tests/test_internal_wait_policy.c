/* SPDX-License-Identifier: MIT */
/*
 * The wait policy (src/baton_wait_policy.c): which looks a waiting thread
 * takes before it sleeps, and whether ranks nudge ahead, for each affinity
 * option, rank count, CPU count (given to the policy with KB_TEST_CPUS, so
 * that every count is checked on any machine) and KB_WAIT_POLICY. The
 * tests of the counts run under KB_WAIT_POLICY=static (the choice the
 * reactive default starts from; what the reactive policy then does is
 * test_internal_wait_reactive.c's). Only the choice is tested here; that
 * every choice gives the same schedule is tested by the differential runs
 * under each policy (tests/reliability, test_rel_differential/wait=*).
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton_wait_policy.h"
#include "kbt_util.h"
#include "run.h"

#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND 0
#endif

/* The policy resolved for a spawn of nprocs ranks with this affinity
 * option, the policy counting ncpu CPUs (KB_TEST_CPUS; with
 * KB_AFFINITY_SPREAD, ranks pinned round-robin to ncpu CPUs). */
static struct kb_run resolve(int nprocs, int affinity, int ncpu)
{
    char count[16];
    snprintf(count, sizeof count, "%d", ncpu);
    setenv("KB_TEST_CPUS", count, 1);
    struct kb_run run;
    memset(&run, 0, sizeof run);
    run.nprocs = nprocs;
    run.opt.affinity = affinity;
    run.opt.ncpus = affinity == KB_AFFINITY_SPREAD ? ncpu : 0;
    kb__wait_policy_resolve(&run);
    return run;
}

/* KB_TEST_CPUS as the program found it (the suite may be run with it set). */
static char *given_cpus;

static int setup(void **state)
{
    (void)state;
    setenv("KB_WAIT_POLICY", "static", 1);
    const char *v = getenv("KB_TEST_CPUS");
    given_cpus = v ? strdup(v) : NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("KB_WAIT_POLICY");
    if (given_cpus)
        setenv("KB_TEST_CPUS", given_cpus, 1);
    else
        unsetenv("KB_TEST_CPUS");
    free(given_cpus);
    return 0;
}

static int sleeps_at_once(const struct kb_wait_budget *b)
{
    return b->spin_ns == 0 && b->look_ns == 0 && b->watch == 0;
}

static void test_under_valgrind_every_wait_sleeps_at_once(void **state)
{
    (void)state;
    if (!UNDER_VALGRIND)
        return; /* the same program under valgrind/ checks it */
    struct kb_run run = resolve(9, 0, 2);
    assert_true(sleeps_at_once(&run.rank_wait));
    assert_int_equal(run.park_look_ns, 0);
}

static void test_on_one_cpu_a_rank_looks_yielding_and_never_spins_or_nudges(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    for (int n = 1; n <= 4096; n *= 8) {
        struct kb_run run = resolve(n, 0, 1);
        assert_int_equal(run.rank_wait.spin_ns, 0);
        assert_true(run.rank_wait.look_ns > 0);
        assert_int_equal(run.rank_wait.watch, 0);
    }
}

static void test_with_fewer_ranks_than_cpus_a_rank_looks_yielding_while_the_driver_drains(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    struct kb_run run = resolve(1, 0, 2);
    assert_int_equal(run.rank_wait.spin_ns, 0); /* a spin would hold a CPU another spawn's driver needs */
    assert_true(run.rank_wait.look_ns > 0);
    assert_int_equal(run.rank_wait.watch, 0);
}

static void test_with_as_many_ranks_as_cpus_a_rank_spins_briefly_then_looks_yielding(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    struct kb_run run = resolve(2, 0, 2);
    assert_true(run.rank_wait.spin_ns > 0);
    assert_true(run.rank_wait.look_ns > run.rank_wait.spin_ns);
    assert_int_equal(run.rank_wait.watch, 0);
}

static void test_with_up_to_four_ranks_per_cpu_a_rank_looks_yielding(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    for (int n = 3; n <= 8; n++) {
        struct kb_run run = resolve(n, 0, 2);
        assert_int_equal(run.rank_wait.spin_ns, 0);
        assert_true(run.rank_wait.look_ns > 0);
        assert_int_equal(run.rank_wait.watch, 0);
    }
}

static void test_with_more_ranks_a_rank_sleeps_at_once_and_nudged_ones_watch_yielding(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    for (int n = 9; n <= 4096; n *= 2) {
        struct kb_run run = resolve(n, 0, 2);
        assert_int_equal(run.rank_wait.spin_ns, 0);
        assert_int_equal(run.rank_wait.look_ns, 0);
        assert_true(run.rank_wait.watch & KB_WATCH_YIELD);
        assert_true((run.rank_wait.watch & KB_WATCH_NS) > 0);
    }
}

static void test_the_driver_looks_yielding_before_it_sleeps_unpinned(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    for (int n = 1; n <= 4096; n *= 8)
        assert_true(resolve(n, 0, 2).park_look_ns > 0);
}

static void test_kb_wait_policy_overrides_the_automatic_choice(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    setenv("KB_WAIT_POLICY", "nudge", 1);
    struct kb_run run = resolve(2, 0, 2);
    assert_true(run.rank_wait.watch & KB_WATCH_YIELD);
    assert_int_equal(run.rank_wait.spin_ns + run.rank_wait.look_ns, 0);
    setenv("KB_WAIT_POLICY", "sleep", 1);
    run = resolve(1, 0, 2);
    assert_true(sleeps_at_once(&run.rank_wait));
    setenv("KB_WAIT_POLICY", "spin", 1);
    run = resolve(64, 0, 2);
    assert_true(run.rank_wait.spin_ns > 0);
    assert_int_equal(run.rank_wait.look_ns + run.rank_wait.watch, 0);
    setenv("KB_WAIT_POLICY", "look", 1);
    run = resolve(64, 0, 2);
    assert_true(run.rank_wait.look_ns > 0);
    assert_int_equal(run.rank_wait.watch, 0);
    run = resolve(2, 0, 2);
    assert_int_equal(run.rank_wait.spin_ns, 0); /* forced: no short spin either */
    setenv("KB_WAIT_POLICY", "auto", 1);
    run = resolve(64, 0, 2);
    assert_true(run.rank_wait.watch & KB_WATCH_YIELD);
    setenv("KB_WAIT_POLICY", "static", 1);
}

static void test_the_reactive_default_starts_from_the_static_mode_without_its_short_spin(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    unsetenv("KB_WAIT_POLICY");
    struct kb_run run = resolve(2, 0, 2);
    assert_true(run.reactive.active && !run.reactive.cycle);
    assert_int_equal(run.reactive.home, KB_WAIT_LOOK);
    assert_true(run.rank_wait.look_ns > 0);
    assert_int_equal(run.rank_wait.spin_ns, 0); /* its spin candidate stands for the short spin */
    run = resolve(64, 0, 2);
    assert_int_equal(run.reactive.home, KB_WAIT_NUDGE);
    assert_true(run.rank_wait.watch & KB_WATCH_YIELD);
    setenv("KB_WAIT_POLICY", "static", 1);
}

/* The reactive policy's candidates for a spawn, in the order it tries them. */
static void assert_candidates(int nprocs, int ncpu, const int *want, int nwant)
{
    struct kb_run run = resolve(nprocs, 0, ncpu);
    assert_true(run.reactive.active);
    assert_int_equal(run.reactive.ncand, nwant);
    for (int i = 0; i < nwant; i++)
        assert_int_equal(run.reactive.cand[i], want[i]);
}

static void test_sleep_is_a_candidate_only_where_the_ranks_outnumber_the_cpus(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    unsetenv("KB_WAIT_POLICY");
    assert_candidates(1, 2, (int[]){KB_WAIT_LOOK, KB_WAIT_SPIN}, 2);
    assert_candidates(2, 2, (int[]){KB_WAIT_LOOK, KB_WAIT_SPIN}, 2);
    assert_candidates(3, 2, (int[]){KB_WAIT_LOOK, KB_WAIT_NUDGE, KB_WAIT_SLEEP}, 3);
    assert_candidates(1, 1, (int[]){KB_WAIT_LOOK}, 1);
    assert_candidates(2, 1, (int[]){KB_WAIT_LOOK, KB_WAIT_SLEEP}, 2);
    assert_candidates(4, 4, (int[]){KB_WAIT_LOOK, KB_WAIT_SPIN}, 2);
    assert_candidates(4, 64, (int[]){KB_WAIT_LOOK, KB_WAIT_SPIN}, 2);
    setenv("KB_WAIT_POLICY", "static", 1);
}

/* The text written to stderr while resolving a spawn of n ranks. */
static void resolve_capturing_stderr(int n, char *buf, size_t cap, struct kb_run *out)
{
    struct kbt_stderr c;
    assert_int_equal(kbt_stderr_begin(&c), 0);
    *out = resolve(n, 0, 2);
    kbt_stderr_end(&c, buf, cap);
}

static void test_a_malformed_kb_wait_policy_is_ignored_with_a_warning(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    setenv("KB_WAIT_POLICY", "fast", 1);
    char text[512];
    struct kb_run run;
    resolve_capturing_stderr(64, text, sizeof text, &run);
    assert_non_null(strstr(text, "ignoring KB_WAIT_POLICY=fast"));
    assert_true(run.rank_wait.watch & KB_WATCH_YIELD); /* the automatic choice */
}

static void test_one_cpu_affinity_sleeps_at_once_and_ignores_kb_wait_policy(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    setenv("KB_WAIT_POLICY", "spin", 1);
    struct kb_run run = resolve(8, KB_AFFINITY_ONE_CPU, 2);
    assert_true(sleeps_at_once(&run.rank_wait));
    assert_true(run.park_look_ns > 0);
    assert_int_equal(resolve(4096, KB_AFFINITY_ONE_CPU, 2).park_look_ns, 0);
}

static void test_spread_affinity_nudges_with_pausing_watches(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    struct kb_run run = resolve(8, KB_AFFINITY_SPREAD, 2);
    assert_true(run.rank_wait.watch > 0);
    assert_false(run.rank_wait.watch & KB_WATCH_YIELD); /* pinned apart from the holder */
    assert_true(resolve(2, KB_AFFINITY_SPREAD, 2).rank_wait.spin_ns > 0);
    assert_int_equal(resolve(8, KB_AFFINITY_SPREAD, 1).rank_wait.watch, 0); /* one CPU: no nudges */
}

/* The count the policy makes without KB_TEST_CPUS (reactive.ncpu, under
 * the reactive default): the calling thread's affinity mask, here one CPU,
 * or the online CPUs where there is no affinity to read. */
static int counted_with(const char *test_cpus)
{
    if (test_cpus)
        setenv("KB_TEST_CPUS", test_cpus, 1);
    else
        unsetenv("KB_TEST_CPUS");
    unsetenv("KB_WAIT_POLICY");
    struct kb_run run;
    memset(&run, 0, sizeof run);
    run.nprocs = 2;
    kb__wait_policy_resolve(&run);
    setenv("KB_WAIT_POLICY", "static", 1);
    assert_true(run.reactive.active);
    return run.reactive.ncpu;
}

static void test_without_kb_test_cpus_the_policy_counts_the_threads_cpus(void **state)
{
    (void)state;
    if (UNDER_VALGRIND)
        return;
    cpu_set_t was, one;
    assert_int_equal(sched_getaffinity(0, sizeof was, &was), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
#ifdef KB_TEST_PORTABLE
    int want = (int)sysconf(_SC_NPROCESSORS_ONLN); /* no affinity to read */
#else
    int want = 1;
#endif
    int unset = counted_with(NULL), zero = counted_with("0"), junk = counted_with("4x");
    int given = counted_with("64");
    assert_int_equal(sched_setaffinity(0, sizeof was, &was), 0);
    assert_int_equal(unset, want);
    assert_int_equal(zero, want); /* not a count: ignored */
    assert_int_equal(junk, want);
    assert_int_equal(given, 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_under_valgrind_every_wait_sleeps_at_once),
        cmocka_unit_test(test_on_one_cpu_a_rank_looks_yielding_and_never_spins_or_nudges),
        cmocka_unit_test(test_with_fewer_ranks_than_cpus_a_rank_looks_yielding_while_the_driver_drains),
        cmocka_unit_test(test_with_as_many_ranks_as_cpus_a_rank_spins_briefly_then_looks_yielding),
        cmocka_unit_test(test_with_up_to_four_ranks_per_cpu_a_rank_looks_yielding),
        cmocka_unit_test(test_with_more_ranks_a_rank_sleeps_at_once_and_nudged_ones_watch_yielding),
        cmocka_unit_test(test_the_driver_looks_yielding_before_it_sleeps_unpinned),
        cmocka_unit_test(test_kb_wait_policy_overrides_the_automatic_choice),
        cmocka_unit_test(test_the_reactive_default_starts_from_the_static_mode_without_its_short_spin),
        cmocka_unit_test(test_sleep_is_a_candidate_only_where_the_ranks_outnumber_the_cpus),
        cmocka_unit_test(test_a_malformed_kb_wait_policy_is_ignored_with_a_warning),
        cmocka_unit_test(test_one_cpu_affinity_sleeps_at_once_and_ignores_kb_wait_policy),
        cmocka_unit_test(test_spread_affinity_nudges_with_pausing_watches),
        cmocka_unit_test(test_without_kb_test_cpus_the_policy_counts_the_threads_cpus),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
