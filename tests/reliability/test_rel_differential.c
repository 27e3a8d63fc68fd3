/* SPDX-License-Identifier: MIT */
/*
 * Differential testing: seeded random programs (rel_prog.h) run on the
 * library and on the executable model (rel_model.c) must give identical
 * traces, line for line (the schedule, every call's result, the drains'
 * engine waits, cancellations and cleanups, the reports, the statistics,
 * the queues and the completed set).
 *
 * Without arguments: a cmocka program (ctest): REL_SEEDS seeds (at least
 * 500; fewer under Valgrind), that the programs covered what they should,
 * and that deliberately wrong models are caught.
 *   --seeds N [--first S]   check seeds S..S+N-1 and print the count (make fuzz-long)
 *   --seed S                print seed S's program and trace (reproduce a failure)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "rel_run.h"
#include "trace.h"

#define REL_SEEDS      2000
#define REL_SEEDS_VG   500
#define REL_FIRST_SEED 1

static uint64_t seed_of(uint64_t i)
{
    /* seeds are used as given: `--seed S` reproduces exactly */
    return i;
}

static void program_for(uint64_t seed, struct rp_prog *p)
{
    struct rp_src s;
    rp_src_seed(&s, seed);
    rp_generate(p, &s);
}

/* What the programs exercised, counted over the traces. */
enum feat {
    F_SPAWN_OK,
    F_SPAWN_FAILED,
    F_RANK_RAISED,
    F_RANK_RETURNED,
    F_DRAIN_FAILED_WAIT,
    F_DRAIN_FAILED_COLL,
    F_TIMEDOUT,
    F_JOIN_TIMEOUT,
    F_JOIN_DONE,
    F_JOIN_CACHED,
    F_FREE_CANCELS,
    F_UNWIND_CANCEL,
    F_RETURN_CANCEL,
    F_CLEANUP_ROOT_CAUSE,
    F_CANCEL_ROOT_CAUSE,
    F_TWO_ROOT_CAUSES,
    F_COLL_ISSUED,
    F_BARRIER_PASSED,
    F_FAST_WAIT,
    F_DRIVER_WAIT,
    F_NESTED_WAIT,
    F_HOOK_QUEUES,
    F_BUSY,
    F_SEEDED,
    F_NPROCS0,
    F_LIVE_AT_WAIT,
    F_LIVE_AT_BARRIER,
    F_BARRIER_ARRIVAL_RR,
    F_BARRIER_ARRIVAL_SEEDED,
    F_BARRIER_FINISH_RR,
    F_BARRIER_FINISH_SEEDED,
    F_BARRIER_HELD_RR,
    F_BARRIER_HELD_SEEDED,
    F_N
};

static const char *const feat_names[F_N] = {
    "spawn ok",
    "spawn failed",
    "rank raised",
    "rank returned nonzero",
    "drain failed (a)",
    "drain failed (b)",
    "max_rounds",
    "join timed out",
    "join finished",
    "join cached result",
    "free cancels",
    "UNWIND cancellation",
    "RETURN cancellation",
    "cleanup root cause",
    "cancelled root cause",
    "two root causes",
    "collective issued",
    "barrier passed",
    "fast-path wait",
    "driver-side wait",
    "nested engine wait",
    "hook queues work",
    "KB_EBUSY",
    "seeded order",
    "nprocs 0",
    "live at wait",
    "live at barrier",
    "barrier open: arrival",
    "  ... seeded order",
    "barrier open: finish",
    "  ... seeded order",
    "barrier held a round",
    "  ... seeded order",
};

static long feats[F_N];

/* The model's account of the barriers of the program it ran last (the one
 * just compared): which openings a waiter passed, and waiters held at an
 * opened barrier until the next round, without and with a seeded order. */
static void tally_barriers(void)
{
    struct rm_barrier_tally b;
    rm_barrier_tally(&b);
    feats[F_BARRIER_ARRIVAL_RR] += b.opened_by_arrival[0] > 0;
    feats[F_BARRIER_ARRIVAL_SEEDED] += b.opened_by_arrival[1] > 0;
    feats[F_BARRIER_FINISH_RR] += b.opened_by_finish[0] > 0;
    feats[F_BARRIER_FINISH_SEEDED] += b.opened_by_finish[1] > 0;
    feats[F_BARRIER_HELD_RR] += b.held[0] > 0;
    feats[F_BARRIER_HELD_SEEDED] += b.held[1] > 0;
}

static int has(const char *t, const char *s)
{
    return strstr(t, s) != NULL;
}

static void tally(const char *t)
{
    long f[F_N] = {0};
    f[F_SPAWN_OK] = has(t, "spawn = 0\n");
    f[F_SPAWN_FAILED] = has(t, "spawn = -10000\n") || has(t, "= -10000\n");
    f[F_RANK_RAISED] = has(t, " raise\n");
    f[F_RANK_RETURNED] = has(t, ": rank function returned");
    f[F_DRAIN_FAILED_WAIT] = has(t, "(pending worker wait) returned");
    f[F_DRAIN_FAILED_COLL] = has(t, "(pending collective) returned");
    f[F_TIMEDOUT] = has(t, "(max_rounds)");
    f[F_JOIN_DONE] = has(t, " = 1\nstats");
    f[F_JOIN_CACHED] = has(t, "report none");
    f[F_FREE_CANCELS] = has(t, "free\nabort") || has(t, "free\ncleanup");
    f[F_UNWIND_CANCEL] = has(t, " c=1\n");
    f[F_RETURN_CANCEL] = has(t, " = -125\n");
    f[F_CLEANUP_ROOT_CAUSE] = has(t, " cleanup\n");
    f[F_CANCEL_ROOT_CAUSE] = has(t, " cancelled\n");
    f[F_TWO_ROOT_CAUSES] = has(t, " n=2 dc=") || has(t, " n=3 dc=");
    f[F_COLL_ISSUED] = has(t, " issue ");
    f[F_SEEDED] = has(t, "seeded=1");
    f[F_NPROCS0] = has(t, "spawn n=0 ") || has(t, "start n=0 ");
    f[F_LIVE_AT_WAIT] = has(t, "waiting on handle");
    f[F_LIVE_AT_BARRIER] = has(t, "in kb_barrier");
    f[F_BUSY] = has(t, " = -16\n");
    f[F_NESTED_WAIT] = has(t, "o=2 m=n");
    f[F_DRIVER_WAIT] = has(t, "o=2 m=w");
    f[F_HOOK_QUEUES] = has(t, "ew enq") || has(t, "ew submit");
    /* line-level features */
    for (const char *l = t; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        if (n > 5 && strncmp(l, "join ", 5) == 0 && memmem(l, n, " = 0", 4) && l[n - 1] == '0')
            f[F_JOIN_TIMEOUT] = 1;
        l = e ? e + 1 : l + n;
    }
    /* a barrier that opened: "R.I barrier" followed later by "R.I = 0" */
    for (const char *b = strstr(t, " barrier\n"); b; b = strstr(b + 1, " barrier\n")) {
        const char *ls = b;
        while (ls > t && ls[-1] != '\n')
            ls--;
        char key[32];
        size_t kl = (size_t)(b - ls);
        if (kl + 6 >= sizeof key)
            continue;
        memcpy(key, ls, kl);
        memcpy(key + kl, " = 0\n", 6);
        if (strstr(b, key)) {
            f[F_BARRIER_PASSED] = 1;
            break;
        }
    }
    /* a wait on a completed handle: "R.I wait H" directly followed by "R.I = 0" */
    for (const char *w = strstr(t, " wait 1"); w; w = strstr(w + 1, " wait 1")) {
        const char *ls = w;
        while (ls > t && ls[-1] != '\n')
            ls--;
        const char *nl = strchr(w, '\n');
        if (!nl)
            break;
        size_t kl = (size_t)(w - ls);
        if (strncmp(nl + 1, ls, kl) == 0 && strncmp(nl + 1 + kl, " = 0\n", 5) == 0) {
            f[F_FAST_WAIT] = 1;
            break;
        }
    }
    for (int i = 0; i < F_N; i++)
        feats[i] += f[i];
}

static int uses_exit(const struct rp_prog *p)
{
    for (int i = 0; i < p->nphases; i++)
        for (int r = 0; r < p->phases[i].nprocs; r++)
            for (int k = 0; k < p->phases[i].ranks[r].nops; k++)
                if (p->phases[i].ranks[r].ops[k].kind == RP_EXIT)
                    return 1;
    return 0;
}

static long differ_with_exit; /* differing programs that call pthread_exit */
static long details_left = 3; /* differences printed in full */

/* Check seeds [first, first + n); returns the number that differ (the first
 * few printed in full on stderr, the others named). */
static long check_range(uint64_t first, long n, int do_tally)
{
    long bad = 0;
    struct rp_prog *p = malloc(sizeof *p);
    if (!p)
        abort();
    for (long i = 0; i < n; i++) {
        uint64_t seed = seed_of(first + (uint64_t)i);
        program_for(seed, p);
        if (rel_check(p, details_left > 0 ? stderr : NULL) != 0) {
            details_left--;
            bad++;
            differ_with_exit += uses_exit(p);
            fprintf(stderr,
                    "seed %llu: the library and the model differ%s (reproduce: "
                    "test_rel_differential --seed %llu)\n",
                    (unsigned long long)seed, uses_exit(p) ? " [pthread_exit]" : "",
                    (unsigned long long)seed);
            continue;
        }
        if (do_tally) {
            tally(tr_text());
            tally_barriers();
        }
    }
    free(p);
    return bad;
}

static long ctest_seeds(void)
{
    const char *e = getenv("REL_SEEDS");
    if (e && *e)
        return atol(e);
    return kbt_on_valgrind() ? REL_SEEDS_VG : REL_SEEDS;
}

static void test_library_and_model_give_identical_traces(void **state)
{
    (void)state;
    memset(feats, 0, sizeof feats);
    long n = ctest_seeds();
    differ_with_exit = 0;
    long bad = check_range(REL_FIRST_SEED, n, 1);
    print_message("%ld seeds, %ld identical traces, %ld differ (%ld of them call pthread_exit)\n", n, n - bad,
                  bad, differ_with_exit);
    for (int i = 0; i < F_N; i++)
        print_message("  %-22s %ld\n", feat_names[i], feats[i]);
    if (bad)
        fail_msg("%ld seed(s) differ: see above", bad);
    /* the programs covered every rule at least a few times */
    long need = kbt_on_valgrind() ? 1 : 3;
    for (int i = 0; i < F_N; i++)
        if (feats[i] < need)
            fail_msg("only %ld of %ld programs exercised '%s'", feats[i], n, feat_names[i]);
}

/* Each deliberately wrong model differs from the exact one on some seed:
 * the programs reach every rule the mutants break, and the traces show it. */
static void test_wrong_models_are_caught(void **state)
{
    (void)state;
    struct rp_prog *p = malloc(sizeof *p);
    assert_non_null(p);
    long n = ctest_seeds();
    for (int m = 1; m < RM_N; m++) {
        long caught = 0;
        for (long i = 0; i < n; i++) {
            program_for(seed_of(REL_FIRST_SEED + (uint64_t)i), p);
            rm_run(p, NULL, RM_EXACT);
            char *exact = strdup(tr_text());
            assert_non_null(exact);
            rm_run(p, NULL, (enum rm_mutant)m);
            caught += strcmp(exact, tr_text()) != 0;
            free(exact);
        }
        print_message("mutant %d: caught by %ld of %ld programs\n", m, caught, n);
        if (caught == 0)
            fail_msg("mutant %d of the model is not caught by any program", m);
    }
    free(p);
}

/* A fixed program of one kb_spawn phase: nprocs ranks with no operations
 * yet, UNWIND mode, max_rounds 10, cancel codes 21 + rank. calloc'd. */
static struct rp_prog *one_spawn(int nprocs)
{
    struct rp_prog *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->nphases = 1;
    p->abort_done = -1;
    struct rp_phase *ph = &p->phases[0];
    ph->kind = RP_SPAWN;
    ph->nprocs = nprocs;
    ph->cancel_mode = KB_CANCEL_UNWIND;
    ph->max_rounds = 10;
    for (int r = 0; r < nprocs; r++)
        ph->ranks[r].cancel_code = 21 + r;
    return p;
}

/* A fixed program whose model trace is written out by hand: the model
 * itself follows the rules (rank 1 raises at its second step; rank 0 and 2
 * are cancelled in rank order and unwind; abort sees the full queues; the
 * completed set is kept). */
static void test_model_follows_the_rules_on_a_fixed_program(void **state)
{
    (void)state;
    struct rp_prog *p = one_spawn(3);
    struct rp_phase *ph = &p->phases[0];
    /* rank 0: wait 1000, wait 1000 (fast), yield; rank 1: enq 1001, raise;
     * rank 2: yield, yield */
    ph->ranks[0].nops = 3;
    ph->ranks[0].ops[0] = (struct rp_op){.kind = RP_WAIT, .h = 0};
    ph->ranks[0].ops[1] = (struct rp_op){.kind = RP_WAIT, .h = 0};
    ph->ranks[0].ops[2] = (struct rp_op){.kind = RP_YIELD};
    ph->ranks[1].nops = 3;
    ph->ranks[1].ops[0] = (struct rp_op){.kind = RP_ENQ, .h = 1};
    ph->ranks[1].ops[1] = (struct rp_op){.kind = RP_YIELD};
    ph->ranks[1].ops[2] = (struct rp_op){.kind = RP_RAISE, .code = 5};
    ph->ranks[2].nops = 2;
    ph->ranks[2].ops[0] = (struct rp_op){.kind = RP_YIELD};
    ph->ranks[2].ops[1] = (struct rp_op){.kind = RP_YIELD};
    ph->ranks[2].cleanup = CL_FAIL;
    rm_run(p, NULL, RM_EXACT);
    tr_assert("phase 0 spawn n=3 cm=0 seeded=0 max=10\n"
              "bind 0\nbind 1\nbind 2\n"
              "start 0\n0.0 wait 1000\n"
              "start 1\n1.0 enq 1001\n1.0 = 0\n1.1 yield\n"
              "start 2\n2.0 yield\n"
              "ew 1000 o=0 m=-\new 1001 o=0 m=-\n"
              "0.0 = 0\n0.1 wait 1000\n0.1 = 0\n0.2 yield\n"
              "1.1 = 0\n1.2 raise 5\ncleanup 1 c=0\n"
              "cleanup 0 c=1\n"
              "cleanup 2 c=1\ncleanup 2 fail = 0\n"
              "abort pw=[] pc=[]\n"
              "spawn = -10000\n"
              "report code=-10000 n=2 dc=0 dh=0 live=0\n"
              "  rank 1 code 5: r1.2 raise\n"
              "  rank 2 code 23: r2 cleanup\n"
              "  msg spawn failed on ranks [1, 2]: rank 1 raised code 5: r1.2 raise\n"
              "stats rounds=2 turns=7 handoffs=11 drains=1 ew=2 colls=0 rt=[3,2,2]\n"
              "post pw=[] pc=[] done=[1000,1001]\n"
              "destroy = 0\n");
    /* and the library agrees */
    assert_int_equal(rel_check(p, stderr), 0);
    free(p);
}

/* The model's barrier rule on a fixed program: rank 1 opens the barrier in
 * round 2, rank 2 (after it in that round) stays, and all three pass in
 * round 3 in rank order; then the library agrees. */
static void test_model_keeps_barrier_waiters_until_the_next_round(void **state)
{
    (void)state;
    struct rp_prog *p = one_spawn(3);
    struct rp_phase *ph = &p->phases[0];
    for (int r = 0; r < 3; r++) {
        ph->ranks[r].nops = 1;
        ph->ranks[r].ops[0] = (struct rp_op){.kind = RP_BARRIER};
    }
    ph->ranks[1].nops = 2;
    ph->ranks[1].ops[0] = (struct rp_op){.kind = RP_YIELD};
    ph->ranks[1].ops[1] = (struct rp_op){.kind = RP_BARRIER};
    rm_run(p, NULL, RM_EXACT);
    tr_assert("phase 0 spawn n=3 cm=0 seeded=0 max=10\n"
              "bind 0\nbind 1\nbind 2\n"
              "start 0\n0.0 barrier\n"
              "start 1\n1.0 yield\n"
              "start 2\n2.0 barrier\n"
              "1.0 = 0\n1.1 barrier\n"
              "0.0 = 0\nend 0 = 0\n"
              "1.1 = 0\nend 1 = 0\n"
              "2.0 = 0\nend 2 = 0\n"
              "spawn = 0\n"
              "stats rounds=3 turns=9 handoffs=10 drains=3 ew=0 colls=0 rt=[3,3,3]\n"
              "post pw=[] pc=[] done=[]\n"
              "destroy = 0\n");
    struct rm_barrier_tally b;
    rm_barrier_tally(&b);
    assert_int_equal(b.opened_by_arrival[0], 1);
    assert_int_equal(b.held[0], 1);
    assert_int_equal(rel_check(p, stderr), 0);
    free(p);
}

/* A rank that calls pthread_exit itself fails with KB_EEXITED, recorded
 * when the unwind reaches the library, that is after the rank's own cleanup
 * handler: a kb_fail there is the rank's first failure and the one
 * reported (design.md, "Suspension points and cancellation"). Rank 1 never
 * runs: rank 0's failure ends round 1. */
static void test_pthread_exit_is_recorded_after_the_ranks_own_cleanup(void **state)
{
    (void)state;
    struct rp_prog *p = one_spawn(2);
    struct rp_phase *ph = &p->phases[0];
    ph->ranks[0].nops = 1;
    ph->ranks[0].ops[0] = (struct rp_op){.kind = RP_EXIT};
    ph->ranks[0].cleanup = CL_FAIL;
    ph->ranks[1].nops = 1;
    ph->ranks[1].ops[0] = (struct rp_op){.kind = RP_RAISE, .code = 5};
    rm_run(p, NULL, RM_EXACT);
    tr_assert("phase 0 spawn n=2 cm=0 seeded=0 max=10\n"
              "bind 0\nbind 1\n"
              "start 0\n0.0 exit\ncleanup 0 c=0\ncleanup 0 fail = 0\n"
              "abort pw=[] pc=[]\n"
              "spawn = -10000\n"
              "report code=-10000 n=1 dc=0 dh=0 live=0\n"
              "  rank 0 code 21: r0 cleanup\n"
              "  msg spawn failed on ranks [0]: rank 0 raised code 21: r0 cleanup\n"
              "stats rounds=1 turns=1 handoffs=2 drains=0 ew=0 colls=0 rt=[1,0]\n"
              "post pw=[] pc=[] done=[]\n"
              "destroy = 0\n");
    int differ = rel_check(p, stderr);
    free(p);
    if (differ)
        fail_msg("the library differs from the documented behaviour (see the traces above)");
}

static int cli(int argc, char **argv)
{
    uint64_t first = REL_FIRST_SEED;
    long n = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            n = atol(argv[++i]);
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            uint64_t seed = strtoull(argv[++i], NULL, 0);
            struct rp_prog p;
            program_for(seed, &p);
            rp_dump(&p, stdout);
            int rc = rel_check(&p, stdout);
            if (rc == 0)
                printf("--- trace (library = model) ---\n%s", tr_text());
            printf("seed %llu: %s\n", (unsigned long long)seed, rc ? "DIFFER" : "identical");
            return rc;
        } else {
            fprintf(stderr, "usage: %s [--seeds N [--first S] | --seed S]\n", argv[0]);
            return 2;
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long bad = 0, done = 0;
    const long chunk = 1000;
    for (long i = 0; i < n; i += chunk) {
        long m = n - i < chunk ? n - i : chunk;
        bad += check_range(first + (uint64_t)i, m, 0);
        done += m;
        if (done % 10000 == 0 || done == n)
            fprintf(stderr, "  %ld seeds checked\n", done);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("fuzz-long: %ld seeds (%llu..%llu) checked in %.1f s: %ld identical traces, %ld differ (%ld of "
           "them call pthread_exit)\n",
           done, (unsigned long long)first, (unsigned long long)(first + (uint64_t)done - 1), secs,
           done - bad, bad, differ_with_exit);
    printf("%ld passed, %ld failed\n", done - bad, bad);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return cli(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_follows_the_rules_on_a_fixed_program),
        cmocka_unit_test(test_pthread_exit_is_recorded_after_the_ranks_own_cleanup),
        cmocka_unit_test(test_model_keeps_barrier_waiters_until_the_next_round),
        cmocka_unit_test(test_library_and_model_give_identical_traces),
        cmocka_unit_test(test_wrong_models_are_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
