/* SPDX-License-Identifier: MIT */
/*
 * The replay checks (replay_check.h) and their reports. A report names the
 * turn at which the program left the recording (the first turn of the
 * round that no longer matches) and what differed, so that a reader can
 * find the change in the program that caused it.
 */
#include "replay_check.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kbthreads.h"
#include "run.h"
#include "schedule_file.h"
#include "sort.h"
#include "strbuf.h"

int kb__replay_strict(const struct kb_run *run)
{
    return run->files.replay && !kb__replay_partial(run->files.replay);
}

/* A rank list as "[0, 2, 3]" (malloc'd), or NULL. */
static char *rank_list(const int *ranks, int n)
{
    struct kb_strbuf b = {0};
    kb__strbuf_addf(&b, "[");
    for (int i = 0; i < n; i++)
        kb__strbuf_addf(&b, "%s%d", i ? ", " : "", ranks[i]);
    kb__strbuf_addf(&b, "]");
    return kb__strbuf_take(&b);
}

/* A sorted copy (malloc), or NULL. */
static int *sorted_copy(const int *a, int n)
{
    int *s = kb__malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, a, (size_t)n * sizeof *s);
    kb__sort_ints(s, (size_t)n);
    return s;
}

/* The recording has no round `round`; the program's live ranks are
 * run->order. */
static int diverged_past_end(struct kb_run *run, uint64_t round)
{
    struct kb_failure *f = &run->failure;
    f->diverged_turn = run->counters.turns + 1;
    char *live = rank_list(run->order, run->norder);
    f->detail = kb__format("replay diverged at turn %llu (round %llu): the recording ends after round %llu, "
                           "ranks %s are still live",
                           (unsigned long long)f->diverged_turn, (unsigned long long)round,
                           (unsigned long long)(round - 1), live ? live : "(out of memory)");
    free(live);
    return KB_EDIVERGED;
}

/* The recording's round has the live ranks `sorted` (nwant of them), the
 * program run->order. */
static int diverged_ranks(struct kb_run *run, uint64_t round, const int *sorted, int nwant)
{
    struct kb_failure *f = &run->failure;
    f->diverged_turn = run->counters.turns + 1;
    char *live = rank_list(run->order, run->norder), *rec = rank_list(sorted, nwant);
    f->detail = kb__format("replay diverged at turn %llu (round %llu): the recording has ranks %s live, "
                           "the program %s",
                           (unsigned long long)f->diverged_turn, (unsigned long long)round,
                           rec ? rec : "(out of memory)", live ? live : "(out of memory)");
    free(live);
    free(rec);
    return KB_EDIVERGED;
}

int kb__replay_order(struct kb_run *run, uint64_t round)
{
    const int *want;
    int nwant;
    if (!kb__replay_round(run->files.replay, round, &want, &nwant))
        return diverged_past_end(run, round);
    /* run->order is sorted (the live ranks in rank order) and a recorded
     * round lists distinct ranks (schedule_file.c checks), so the two hold
     * the same ranks exactly when want sorted equals run->order. */
    int *sorted = sorted_copy(want, nwant);
    if (!sorted) {
        run->failure.detail = kb__format("spawn stopped before round %llu: out of memory comparing its live "
                                         "ranks with the replay",
                                         (unsigned long long)round);
        return KB_ENOMEM;
    }
    int rc = 0;
    if (nwant != run->norder || memcmp(sorted, run->order, (size_t)nwant * sizeof *sorted) != 0)
        rc = diverged_ranks(run, round, sorted, nwant);
    free(sorted);
    if (rc != 0)
        return rc;
    for (int i = 0; i < nwant; i++)
        run->order[i] = want[i];
    return 0;
}

int kb__replay_check_end(struct kb_run *run)
{
    uint64_t rounds = run->counters.rounds;
    if (!kb__replay_strict(run) || kb__replay_rounds(run->files.replay) <= rounds)
        return 0;
    run->failure.diverged_turn = run->counters.turns + 1;
    run->failure.detail =
        kb__format("replay diverged at turn %llu (round %llu): every rank finished after "
                   "round %llu, the recording has %llu rounds",
                   (unsigned long long)run->failure.diverged_turn, (unsigned long long)(rounds + 1),
                   (unsigned long long)rounds, (unsigned long long)kb__replay_rounds(run->files.replay));
    return KB_EDIVERGED;
}
