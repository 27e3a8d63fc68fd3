/* SPDX-License-Identifier: MIT */
/*
 * The files a run reads and writes: the schedule it records (record_path,
 * KB_RECORD), the one it replays (replay_path, KB_REPLAY) and its timeline
 * (trace_path, KB_TRACE). Opened before any rank runs, so a bad path fails
 * the spawn at once; written as the run goes (schedule_file.c, timeline.c).
 */
#ifndef KB_RUN_FILES_H
#define KB_RUN_FILES_H

#include "kbthreads.h"

struct kb_run;
struct kb_record;
struct kb_replay;
struct kb_timeline;

/* (B): written through by the baton holder. */
struct kb_run_files {
    struct kb_record *record; /* the schedule being written, or NULL */
    struct kb_replay *replay; /* the schedule being forced, or NULL */
    struct kb_timeline *tl;   /* the timeline being collected, or NULL */
};

/* Open the run's files from opts, else the environment. The strategy must
 * be resolved (the recording names it). 0, a negative errno from open,
 * KB_ENOMEM, KB_EINVAL (a malformed recording) or KB_EDIVERGED (recorded
 * for another nprocs, or no such recording in the file); the last two are
 * explained on stderr. Driver, before any rank runs. */
int kb__run_files_open(struct kb_run *run, const kb_spawn_opts *opts);
/* The run has ended: write and close the record and the timeline. A file
 * that cannot be written is reported on stderr; the spawn's result
 * stands. */
void kb__run_files_finish(struct kb_run *run);
/* Close whatever is still open, ignoring write errors (a run that never
 * started, or one torn down after kb__run_files_finish). */
void kb__run_files_free(struct kb_run *run);

#endif
