/* SPDX-License-Identifier: MIT */
/*
 * The stall watchdog (kb_spawn_opts.stall_ms, KB_STALL_MS): watchdog.c
 * says how it works.
 */
#ifndef KB_WATCHDOG_H
#define KB_WATCHDOG_H

#include <stdint.h>

struct kb_run;

/* The turn stamps: ck_pr words, written by every handoff while the
 * watchdog is on, read by the driver without the baton. */
struct kb_watch_stamps {
    uint64_t turn_seq; /* turns started */
    uint64_t turn_ns;  /* when the current one started (CLOCK_MONOTONIC) */
};

/* Driver, creating the run: install the report's signal handler (once per
 * process) and stamp the first turn. */
void kb__watch_setup(struct kb_run *run);
/* The baton holder, handing it over: a new turn starts now. */
void kb__watch_stamp(struct kb_run *run);
/* Driver: wait for the baton, reporting stalls. */
void kb__watch_wait(struct kb_run *run);

#endif
