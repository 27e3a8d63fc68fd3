/* SPDX-License-Identifier: MIT */
/*
 * The timeline (kb_spawn_opts.trace_path, KB_TRACE): events kept in memory
 * while a spawn runs (appended by the baton holder only, so no lock), and
 * written as Chrome trace-event JSON when it ends. Tracks: the driver
 * (tid 0) and one per rank (tid rank + 1).
 */
#ifndef KB_TIMELINE_H
#define KB_TIMELINE_H

#include <stdint.h>

#include "kbthreads.h"

struct kb_run;

enum kb_tl_kind {
    KB_TL_TURN,        /* slice: a rank holds the baton (v = round) */
    KB_TL_ROUND,       /* slice, driver: ranks run (v = round) */
    KB_TL_DRAIN,       /* slice, driver: the drain (v = round) */
    KB_TL_ENGINE_WAIT, /* slice, driver: an engine wait (h, v = origin) */
    KB_TL_WAIT,        /* instant: a rank waits on h (enqueued) */
    KB_TL_WAIT_FAST,   /* instant: a rank's wait on a completed h */
    KB_TL_COLLECTIVE,  /* instant: collective h submitted (v = sip_id) */
    KB_TL_BARRIER,     /* instant: a rank arrives at the barrier */
    KB_TL_CANCEL,      /* instant: the driver cancels a rank */
    KB_TL_FAIL,        /* instant: a rank's failure is recorded (v = code) */
    KB_TL_DRAIN_FAIL,  /* instant, driver: the drain failed (h, v = code) */
    KB_TL_STOP,        /* instant, driver: the spawn stops (v = code) */
};

/* Start collecting for run: 0 or KB_ENOMEM. The file is opened now, so a
 * bad path fails before any rank runs (a negative errno). */
int kb__tl_open(struct kb_run *run, const char *path);
/* track: a rank, or KB_DRIVER. No-ops without a timeline. */
void kb__tl_slice(struct kb_run *run, int track, int kind, uint64_t start_ns, uint64_t end_ns, kb_handle h,
                  int64_t v);
void kb__tl_instant(struct kb_run *run, int track, int kind, kb_handle h, int64_t v);
/* Write the JSON and free: 0 or a negative errno. */
int kb__tl_close(struct kb_run *run);

#endif
