/* SPDX-License-Identifier: MIT */
/*
 * Recorded schedules (kb_spawn_opts.record_path / replay_path).
 *
 * The format, version 1, one item per line (docs/scheduling.md):
 *
 *   kbthreads-schedule 1
 *   spawn 2                     (KB_RECORD only: the process's n-th spawn)
 *   nprocs 4
 *   schedule seeded 42          (or round-robin, pct ..., exhaustive ...;
 *                                informational)
 *   round 1 0 1 2 3             (round number, then the ranks in turn order)
 *   drain 1 3                   (round number, engine waits in its drain)
 *   ...
 *   end ok                      (or: end failed rank 2 / end failed drain /
 *                                    end timeout / end diverged /
 *                                    end out of memory / end freed)
 *
 * A file may hold several recordings one after another (each from its
 * header line): one per spawn of a process that recorded through
 * KB_RECORD. A "partial" line makes a recording a partial schedule: only
 * the rounds it lists are forced, loosely (kb__replay_partial). Lines
 * starting with '#' and unknown keywords are ignored by the reader.
 */
#ifndef KB_SCHEDULE_FILE_H
#define KB_SCHEDULE_FILE_H

#include <stdint.h>
#include <stdio.h>

struct kb_record;
struct kb_replay;

/* Open path for writing (truncated, or appended to with append_to) and
 * write the header: spawn > 0 adds a "spawn" line, schedule is the
 * "schedule" line's text. 0 or a negative errno. */
int kb__record_open(const char *path, int append_to, int spawn, int nprocs, const char *schedule,
                    struct kb_record **out);
void kb__record_round(struct kb_record *r, uint64_t round, const int *order, int n);
void kb__record_drain(struct kb_record *r, uint64_t round, uint64_t engine_waits);
void kb__record_end(struct kb_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Write out what was appended since the last flush (one write(2)). */
void kb__record_flush(struct kb_record *r);
/* Flush and free: 0 or the first write error, a negative errno. */
int kb__record_close(struct kb_record *r);

/* Read and check the recording for a process's spawn-th spawn (1-based; 0,
 * or a file holding one recording without a "spawn" line: its first). 0, a negative errno
 * (unreadable), KB_EINVAL (malformed; *line says where) or KB_EDIVERGED
 * (recorded for another nprocs: *out is set; or the file has fewer
 * recordings than spawn: *out NULL). 0 with *out NULL: spawn is past the
 * last recording and that one is partial, so nothing is forced. */
int kb__replay_open(const char *path, int nprocs, int spawn, struct kb_replay **out, int *line);
/* The order of round (1-based) if the recording lists it: 1, else 0. */
int kb__replay_round(const struct kb_replay *r, uint64_t round, const int **order, int *n);
uint64_t kb__replay_rounds(const struct kb_replay *r);
int kb__replay_nprocs(const struct kb_replay *r);
/* A partial schedule: rounds it does not list run in rank order, a listed
 * round runs its listed ranks that are live in the listed order, then the
 * live ranks it does not list in rank order, and the run never diverges. */
int kb__replay_partial(const struct kb_replay *r);
void kb__replay_free(struct kb_replay *r);

#endif
