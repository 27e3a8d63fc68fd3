/* SPDX-License-Identifier: MIT */
/*
 * The stall watchdog (kb_spawn_opts.stall_ms, KB_STALL_MS).
 *
 * With the watchdog on, every handoff stamps the run with a turn number and
 * the time it started (kb__watch_stamp). The driver, instead of sleeping on
 * its slot without limit, sleeps until the current turn is stall_ms old;
 * if the turn has not changed by then it reports the holder once (rank,
 * time held, and the holder's own frames, written by a signal handler on
 * that thread: rank_frames.c) and goes on waiting, or aborts when asked. The turn stamps
 * are ck_pr words: the driver reads them without holding the baton.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "annotate.h"
#include "clock.h"
#include "rank_frames.h"
#include "round_loop.h"
#include "run.h"
#include "system.h"

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static struct timespec to_timespec(uint64_t ns)
{
    struct timespec t = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    return t;
}

void kb__watch_setup(struct kb_run *run)
{
    kb__frames_install();
    kb__hb_sync_word(&run->watch.turn_seq, sizeof run->watch.turn_seq);
    kb__hb_sync_word(&run->watch.turn_ns, sizeof run->watch.turn_ns);
    kb__hb_sync_word(&run->holder, sizeof run->holder);
    kb__watch_stamp(run);
}

void kb__watch_stamp(struct kb_run *run)
{
    ck_pr_store_64(&run->watch.turn_ns, kb__now_ns());
    ck_pr_inc_64(&run->watch.turn_seq);
}

static void report(struct kb_run *run, int rank, uint64_t held_ns)
{
    pthread_mutex_lock(&report_lock);
    fprintf(stderr,
            "kbthreads: stall: rank %d (kb-rank-%d) has held the baton for %llu ms (limit %u ms); its "
            "backtrace:\n",
            rank, rank, (unsigned long long)(held_ns / 1000000u), run->opt.stall_ms);
    fflush(stderr);
    kb__frames_of_thread(run->ranks[rank].w->thread, 2, 1);
    fprintf(stderr, "kbthreads: stall: still waiting for rank %d%s\n", rank,
            run->opt.stall_abort ? "; aborting (stall_abort)" : "");
    pthread_mutex_unlock(&report_lock);
}

void kb__watch_wait(struct kb_run *run)
{
    uint64_t reported = 0; /* turn numbers start at 1 */
    for (;;) {
        uint64_t seq = ck_pr_load_64(&run->watch.turn_seq);
        uint64_t start = ck_pr_load_64(&run->watch.turn_ns);
        uint64_t limit = (uint64_t)run->opt.stall_ms * 1000000u;
        struct timespec deadline = to_timespec(seq == reported ? kb__now_ns() + limit : start + limit);
        const struct timespec *join = kb__join_deadline(run); /* a timed kb_join's, sooner */
        if (join && (join->tv_sec < deadline.tv_sec ||
                     (join->tv_sec == deadline.tv_sec && join->tv_nsec < deadline.tv_nsec)))
            deadline = *join;
        if (kb__slot_wait_until(&run->ctx->driver_slot, &deadline) == 0)
            return;
        kb__join_expire(run);
        if (ck_pr_load_64(&run->watch.turn_seq) != seq || seq == reported)
            continue;
        int holder = ck_pr_load_int(&run->holder);
        if (holder == KB_DRIVER)
            continue;
        report(run, holder, kb__now_ns() - start);
        reported = seq;
        if (run->opt.stall_abort)
            abort();
    }
}
