/* SPDX-License-Identifier: MIT */
/* Round orders of the exploring strategies; see strategy.h and
 * docs/scheduling.md, which gives every draw so that tools can predict
 * them. */
#include "strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "run.h"
#include "strbuf.h"

uint64_t kb__splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fisher-Yates from the back, j drawn from the run's stream. */
static void shuffle(struct kb_run *run, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(kb__splitmix64(&run->strategy.rng) % (uint64_t)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void kb__order_seeded(struct kb_run *run)
{
    shuffle(run, run->order, run->norder);
}

/* n!, or 0 when it does not fit in 64 bits. */
static uint64_t factorial(int n)
{
    uint64_t f = 1;
    for (int i = 2; i <= n; i++) {
        if (f > UINT64_MAX / (uint64_t)i)
            return 0;
        f *= (uint64_t)i;
    }
    return f;
}

void kb__exhaustive_span(int nprocs, uint64_t limit, unsigned *k, uint64_t *count)
{
    uint64_t f = factorial(nprocs);
    *k = 0;
    *count = 1;
    if (f < 2)
        return;
    while (*count <= limit / f) {
        *count *= f;
        (*k)++;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* PCT: the ranks by descending priority (all of them, at the start), then
 * min(d - 1, R) distinct change rounds drawn from 1..R (all of them when
 * there are no more rounds than that), sorted. */
static int pct_setup(struct kb_run *run)
{
    int n = run->nprocs;
    run->strategy.pct_list = kb__malloc((size_t)(n > 0 ? n : 1) * sizeof *run->strategy.pct_list);
    uint64_t m = run->strategy.pct_depth - 1u;
    if (m > run->strategy.pct_rounds)
        m = run->strategy.pct_rounds;
    run->strategy.pct_changes = kb__calloc((size_t)(m > 0 ? m : 1), sizeof *run->strategy.pct_changes);
    if (!run->strategy.pct_list || !run->strategy.pct_changes)
        return KB_ENOMEM;
    for (int i = 0; i < n; i++)
        run->strategy.pct_list[i] = i;
    shuffle(run, run->strategy.pct_list, n);
    for (uint64_t i = 0; i < m; i++) {
        uint64_t c = i + 1; /* m == R: every round */
        for (int again = m < run->strategy.pct_rounds; again;) {
            c = 1 + kb__splitmix64(&run->strategy.rng) % run->strategy.pct_rounds;
            again = 0;
            for (uint64_t j = 0; j < i && !again; j++)
                again = run->strategy.pct_changes[j] == c;
        }
        run->strategy.pct_changes[i] = c;
    }
    qsort(run->strategy.pct_changes, (size_t)m, sizeof *run->strategy.pct_changes, cmp_u64);
    run->strategy.npct_changes = m;
    return 0;
}

int kb__order_setup(struct kb_run *run)
{
    if (run->strategy.kind == KB_SCHED_PCT)
        return pct_setup(run);
    if (run->strategy.kind == KB_SCHED_EXHAUSTIVE) {
        uint64_t count;
        kb__exhaustive_span(run->nprocs, run->strategy.ex_limit, &run->strategy.ex_k, &count);
        run->strategy.ex_fact = factorial(run->nprocs);
        run->strategy.ex_rest = run->strategy.ex_index;
    }
    return 0;
}

void kb__order_free(struct kb_run *run)
{
    free(run->strategy.pct_list);
    free(run->strategy.pct_changes);
    free(run->strategy.dl_turns);
}

/* Each round visits the live ranks by descending priority; at a change
 * round its first rank then drops below every other: last in pct_list. */
void kb__order_pct(struct kb_run *run, uint64_t round)
{
    int n = 0;
    for (int i = 0; i < run->nprocs; i++) {
        int r = run->strategy.pct_list[i];
        if (run->ranks[r].state != KB_RS_FINISHED)
            run->order[n++] = r;
    }
    if (run->strategy.pct_next < run->strategy.npct_changes &&
        run->strategy.pct_changes[run->strategy.pct_next] == round) {
        run->strategy.pct_next++;
        int i = 0;
        while (run->strategy.pct_list[i] != run->order[0])
            i++;
        memmove(run->strategy.pct_list + i, run->strategy.pct_list + i + 1,
                (size_t)(run->nprocs - 1 - i) * sizeof *run->strategy.pct_list);
        run->strategy.pct_list[run->nprocs - 1] = run->order[0];
    }
}

/* Rounds 1..k: the next base-n! digit of the index, as the lexicographic
 * index of a permutation of the m live ranks (modulo m!), decoded in
 * place (Lehmer code). */
void kb__order_exhaustive(struct kb_run *run, uint64_t round)
{
    if (round > run->strategy.ex_k)
        return;
    uint64_t digit = run->strategy.ex_rest % run->strategy.ex_fact;
    run->strategy.ex_rest /= run->strategy.ex_fact;
    int m = run->norder;
    uint64_t p = digit % factorial(m);
    for (int i = 0; i < m - 1; i++) {
        uint64_t f = factorial(m - 1 - i);
        int q = (int)(p / f);
        p %= f;
        int pick = run->order[i + q];
        memmove(run->order + i + 1, run->order + i, (size_t)q * sizeof *run->order);
        run->order[i] = pick;
    }
}

/* Reverse a[0..n). */
static void reverse(int *a, int n)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void kb__order_delays(struct kb_run *run)
{
    struct kb_strategy *st = &run->strategy;
    int m = run->norder;
    for (int p = 0; p < m - 1 && st->dl_next < st->dl_n; p++) {
        uint64_t turn = st->dl_base + (uint64_t)p + 1, c = 0;
        while (st->dl_next < st->dl_n && st->dl_turns[st->dl_next] == turn) {
            c++;
            st->dl_next++;
        }
        /* c delays of order[p..m): a left rotation by c mod (m - p), as
         * three reversals */
        int len = m - p, k = (int)(c % (uint64_t)len);
        if (k > 0) {
            reverse(run->order + p, k);
            reverse(run->order + p + k, len - k);
            reverse(run->order + p, len);
        }
    }
    st->dl_base += (uint64_t)m;
    /* delays of the round's last turn (nothing to move behind) */
    while (st->dl_next < st->dl_n && st->dl_turns[st->dl_next] <= st->dl_base)
        st->dl_next++;
}

void kb__order_partial(struct kb_run *run, const int *want, int nwant)
{
    int n = 0;
    for (int i = 0; i < nwant; i++)
        if (run->ranks[want[i]].state != KB_RS_FINISHED)
            run->order[n++] = want[i];
    for (int r = 0; r < run->nprocs; r++) {
        int listed = 0;
        for (int i = 0; i < nwant && !listed; i++)
            listed = want[i] == r;
        if (!listed && run->ranks[r].state != KB_RS_FINISHED)
            run->order[n++] = r;
    }
    run->norder = n;
}

char *kb__order_describe(const struct kb_run *run)
{
    const struct kb_strategy *st = &run->strategy;
    switch (run->strategy.kind) {
    case KB_SCHED_SEEDED:
        return kb__format("seeded %llu", (unsigned long long)run->strategy.seed);
    case KB_SCHED_EXHAUSTIVE:
        return kb__format("exhaustive %llu limit %llu rounds %u", (unsigned long long)run->strategy.ex_index,
                          (unsigned long long)run->strategy.ex_limit, run->strategy.ex_k);
    case KB_SCHED_PCT: {
        struct kb_strbuf b = {0};
        kb__strbuf_addf(&b, "pct %llu depth %u rounds %llu changes", (unsigned long long)st->seed,
                        st->pct_depth, (unsigned long long)st->pct_rounds);
        for (uint64_t i = 0; i < st->npct_changes; i++)
            kb__strbuf_addf(&b, " %llu", (unsigned long long)st->pct_changes[i]);
        return kb__strbuf_take(&b);
    }
    case KB_SCHED_DELAYS: {
        /* At most DESCRIBED turns: the line stays far below the readers'
         * line length (it is informational). */
        enum { DESCRIBED = 64 };
        struct kb_strbuf b = {0};
        kb__strbuf_addf(&b, "delays");
        for (size_t i = 0; i < st->dl_n && i < DESCRIBED; i++)
            kb__strbuf_addf(&b, " %llu", (unsigned long long)st->dl_turns[i]);
        if (st->dl_n > DESCRIBED)
            kb__strbuf_addf(&b, " ... (%zu in all)", st->dl_n);
        if (st->dl_n == 0)
            kb__strbuf_addf(&b, " none");
        return kb__strbuf_take(&b);
    }
    default:
        return kb__format("round-robin");
    }
}
