/* SPDX-License-Identifier: MIT */
/*
 * The exploring schedules: KB_SCHED_PCT (ranks by random priority, d - 1
 * demotions at rounds drawn from the first R) and KB_SCHED_EXHAUSTIVE
 * (every order of the first k rounds, one per index). The draws are the
 * ones docs/scheduling.md documents, recomputed here from the seed; the
 * same options give the same trace; bad values are KB_EINVAL; the
 * environment forms select them without code changes.
 */
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

#define NR     5
#define STEPS  8 /* yields per rank: STEPS + 1 rounds, every rank live in each */
#define ROUNDS (STEPS + 1)

static char dir[] = "/tmp/kb-pct-XXXXXX";
static char file[300];

static int yielder(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (int i = 0; i < STEPS; i++)
        if (kb_yield() != 0)
            return 1;
    return 0;
}

/* Spawn n yielders with o (its record_path set here); the recording's
 * text (static), or NULL when kb_spawn returned rc != 0 (*rc says). */
static const char *record(int n, kb_spawn_opts o, int *rc)
{
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    o.record_path = file;
    remove(file);
    *rc = kb_spawn(ctx, yielder, NULL, n, &o, NULL);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    if (*rc != 0)
        return NULL;
    const char *text = kbt_slurp(file);
    assert_non_null(text);
    return text;
}

static const char *record_ok(int n, kb_spawn_opts o)
{
    int rc;
    const char *t = record(n, o, &rc);
    assert_int_equal(rc, 0);
    return t;
}

/* The ranks of round k (1-based) of a recording into out: how many. */
static int round_of(const char *text, int k, int *out)
{
    char head[32];
    snprintf(head, sizeof head, "\nround %d ", k);
    const char *p = strstr(text, head);
    assert_non_null(p);
    p += strlen(head);
    int n = 0;
    while (*p != '\n') {
        char *end;
        out[n++] = (int)strtol(p, &end, 10);
        p = end;
    }
    return n;
}

/* The documented draws: splitmix64 from the seed. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* What docs/scheduling.md says PCT does with (seed, d, R) for n ranks that
 * all stay live: the order of each round into orders[round - 1]. */
static void pct_expected(uint64_t seed, unsigned d, uint64_t r, int n, int orders[][NR], int rounds,
                         uint64_t *changes, int *nchanges)
{
    uint64_t s = seed;
    int list[NR];
    for (int i = 0; i < n; i++)
        list[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix64(&s) % (uint64_t)(i + 1));
        int t = list[i];
        list[i] = list[j];
        list[j] = t;
    }
    uint64_t m = d - 1 < r ? d - 1 : r;
    for (uint64_t i = 0; i < m; i++) {
        uint64_t c;
        int again;
        do {
            c = m == r ? i + 1 : 1 + splitmix64(&s) % r;
            again = 0;
            for (uint64_t j = 0; j < i; j++)
                again |= changes[j] == c;
        } while (again);
        changes[i] = c;
    }
    *nchanges = (int)m;
    for (int a = 0; a < *nchanges; a++) /* sorted */
        for (int b = a + 1; b < *nchanges; b++)
            if (changes[b] < changes[a]) {
                uint64_t t = changes[a];
                changes[a] = changes[b];
                changes[b] = t;
            }
    for (int k = 1; k <= rounds; k++) {
        memcpy(orders[k - 1], list, sizeof list);
        for (int c = 0; c < *nchanges; c++)
            if (changes[c] == (uint64_t)k) { /* the round's first drops to the lowest priority */
                int first = list[0];
                memmove(list, list + 1, (size_t)(n - 1) * sizeof *list);
                list[n - 1] = first;
            }
    }
}

static void assert_pct_as_documented(uint64_t seed, unsigned d, uint64_t r)
{
    kb_spawn_opts o = {.schedule = KB_SCHED_PCT, .seed = seed, .pct_depth = d, .pct_rounds = r};
    const char *text = record_ok(NR, o);
    int want[ROUNDS][NR];
    uint64_t changes[ROUNDS + 8];
    int nchanges;
    pct_expected(seed, d, r ? r : 2 * NR, NR, want, ROUNDS, changes, &nchanges);
    char line[256];
    int len = snprintf(line, sizeof line, "\nschedule pct %llu depth %u rounds %llu changes",
                       (unsigned long long)seed, d, (unsigned long long)(r ? r : 2 * NR));
    for (int i = 0; i < nchanges; i++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %llu", (unsigned long long)changes[i]);
    snprintf(line + len, sizeof line - (size_t)len, "\n");
    assert_non_null(strstr(text, line));
    for (int k = 1; k <= ROUNDS; k++) {
        int got[NR];
        assert_int_equal(round_of(text, k, got), NR);
        assert_memory_equal(got, want[k - 1], sizeof got);
    }
}

static void test_pct_orders_and_change_points_are_the_documented_draws(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        assert_pct_as_documented(seed, 1, 0);
        assert_pct_as_documented(seed, 2, 0);
        assert_pct_as_documented(seed, 3, ROUNDS);
        assert_pct_as_documented(seed, 4, 3);  /* d - 1 = R: every round of 1..R changes */
        assert_pct_as_documented(seed, 50, 4); /* more changes wanted than rounds */
    }
}

static void test_pct_same_seed_and_depth_same_trace(void **state)
{
    (void)state;
    kb_spawn_opts o = {.schedule = KB_SCHED_PCT, .seed = 99, .pct_depth = 3};
    char *first = strdup(record_ok(NR, o));
    for (int i = 0; i < 5; i++)
        assert_string_equal(record_ok(NR, o), first);
    o.seed = 100;
    assert_string_not_equal(record_ok(NR, o), first);
    free(first);
}

static void test_pct_depth_1_keeps_one_priority_order_for_the_whole_spawn(void **state)
{
    (void)state;
    kb_spawn_opts o = {.schedule = KB_SCHED_PCT, .seed = 5, .pct_depth = 1};
    const char *text = record_ok(NR, o);
    assert_non_null(strstr(text, " changes\n"));
    int first[NR], got[NR];
    round_of(text, 1, first);
    for (int k = 2; k <= ROUNDS; k++) {
        round_of(text, k, got);
        assert_memory_equal(got, first, sizeof got);
    }
}

static void test_pct_keeps_one_drain_per_round(void **state)
{
    (void)state;
    kb_spawn_opts o = {.schedule = KB_SCHED_PCT, .seed = 3, .pct_depth = 3};
    const char *text = record_ok(NR, o);
    for (int k = 1; k <= ROUNDS; k++) {
        char drain[32];
        snprintf(drain, sizeof drain, "\ndrain %d ", k);
        assert_non_null(strstr(text, drain));
    }
    assert_non_null(strstr(text, "\nend ok\n"));
}

static void test_bad_pct_depths_are_EINVAL(void **state)
{
    (void)state;
    int rc;
    kb_spawn_opts o = {.schedule = KB_SCHED_PCT, .seed = 1, .pct_depth = 0};
    assert_null(record(NR, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.pct_depth = KB_SCHED_PCT_MAX_DEPTH + 1;
    assert_null(record(NR, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.pct_depth = KB_SCHED_PCT_MAX_DEPTH;
    assert_non_null(record(NR, o, &rc));
}

static void test_KB_SCHED_PCT_seed_depth_rounds_selects_pct(void **state)
{
    (void)state;
    kb_spawn_opts o = {.schedule = KB_SCHED_PCT, .seed = 7, .pct_depth = 2, .pct_rounds = 4};
    char *coded = strdup(record_ok(NR, o));
    setenv("KB_SCHED_PCT", "7:2:4", 1);
    assert_string_equal(record_ok(NR, (kb_spawn_opts){0}), coded);
    setenv("KB_SCHED_PCT", "7:2", 1); /* R defaults to 2 * nprocs */
    assert_non_null(strstr(record_ok(NR, (kb_spawn_opts){0}), "schedule pct 7 depth 2 rounds 10 "));
    setenv("KB_SCHED_PCT", "7:0", 1); /* depth below 1: ignored with a warning */
    assert_non_null(strstr(record_ok(NR, (kb_spawn_opts){0}), "schedule round-robin\n"));
    setenv("KB_SCHED_PCT", "7", 1);
    assert_non_null(strstr(record_ok(NR, (kb_spawn_opts){0}), "schedule round-robin\n"));
    unsetenv("KB_SCHED_PCT");
    free(coded);
}

/* ---- exhaustive ---------------------------------------------------------- */

static void test_exhaustive_indices_enumerate_every_order_of_the_first_k_rounds(void **state)
{
    (void)state;
    /* 3 ranks, limit 40: (3!)^2 = 36 <= 40 < 216, so k = 2 and 36 indices. */
    int seen[36] = {0};
    for (uint64_t i = 0; i < 36; i++) {
        kb_spawn_opts o = {.schedule = KB_SCHED_EXHAUSTIVE, .exhaustive_index = i, .exhaustive_limit = 40};
        const char *text = record_ok(3, o);
        int r1[3], r2[3], rest[3];
        round_of(text, 1, r1);
        round_of(text, 2, r2);
        int code1 = r1[0] * 9 + r1[1] * 3 + r1[2], code2 = r2[0] * 9 + r2[1] * 3 + r2[2];
        /* index 0 is round-robin; digit i is round i + 1's permutation */
        if (i == 0)
            assert_int_equal(code1 + code2, 2 * (0 * 9 + 1 * 3 + 2));
        for (int k = 3; k <= ROUNDS; k++) {
            round_of(text, k, rest);
            assert_int_equal(rest[0] * 9 + rest[1] * 3 + rest[2], 5); /* 0 1 2 */
        }
        static const int lex[27] = {[5] = 0, [7] = 1, [11] = 2, [15] = 3, [19] = 4, [21] = 5};
        int pair = lex[code1] + 6 * lex[code2];
        assert_int_equal(pair, (int)i); /* lexicographic permutation index, least significant first */
        seen[pair]++;
        assert_non_null(strstr(text, "schedule exhaustive "));
    }
    for (int p = 0; p < 36; p++)
        assert_int_equal(seen[p], 1);
}

static void test_bad_exhaustive_values_are_EINVAL(void **state)
{
    (void)state;
    int rc;
    kb_spawn_opts o = {.schedule = KB_SCHED_EXHAUSTIVE, .exhaustive_index = 0, .exhaustive_limit = 0};
    assert_null(record(3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.exhaustive_limit = 40;
    o.exhaustive_index = 36; /* the count is 36 */
    assert_null(record(3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o.exhaustive_limit = 5; /* 3! > 5: k = 0, only index 0 (round-robin) */
    o.exhaustive_index = 0;
    assert_non_null(strstr(record_ok(3, o), "schedule exhaustive 0 limit 5 rounds 0\nround 1 0 1 2\n"));
    o.exhaustive_index = 1;
    assert_null(record(3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
    o = (kb_spawn_opts){.schedule = (kb_schedule)(KB_SCHED_DELAYS + 1)}; /* past the last */
    assert_null(record(3, o, &rc));
    assert_int_equal(rc, KB_EINVAL);
}

static void test_KB_SCHED_EXHAUSTIVE_takes_the_index_modulo_the_count(void **state)
{
    (void)state;
    kb_spawn_opts o = {.schedule = KB_SCHED_EXHAUSTIVE, .exhaustive_index = 7, .exhaustive_limit = 40};
    char *coded = strdup(record_ok(3, o));
    setenv("KB_SCHED_EXHAUSTIVE", "43:40", 1); /* 43 mod 36 */
    assert_string_equal(record_ok(3, (kb_spawn_opts){0}), coded);
    setenv("KB_SCHED_EXHAUSTIVE", "1:0", 1);
    assert_non_null(strstr(record_ok(3, (kb_spawn_opts){0}), "schedule round-robin\n"));
    unsetenv("KB_SCHED_EXHAUSTIVE");
    free(coded);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(file, sizeof file, "%s/rec.sched", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return kbt_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pct_orders_and_change_points_are_the_documented_draws),
        cmocka_unit_test(test_pct_same_seed_and_depth_same_trace),
        cmocka_unit_test(test_pct_depth_1_keeps_one_priority_order_for_the_whole_spawn),
        cmocka_unit_test(test_pct_keeps_one_drain_per_round),
        cmocka_unit_test(test_bad_pct_depths_are_EINVAL),
        cmocka_unit_test(test_KB_SCHED_PCT_seed_depth_rounds_selects_pct),
        cmocka_unit_test(test_exhaustive_indices_enumerate_every_order_of_the_first_k_rounds),
        cmocka_unit_test(test_bad_exhaustive_values_are_EINVAL),
        cmocka_unit_test(test_KB_SCHED_EXHAUSTIVE_takes_the_index_modulo_the_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
