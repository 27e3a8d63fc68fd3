/*
 * Recorded schedules (kb_spawn_opts.record_path / replay_path).
 *
 * The format, version 1, one item per line (docs/scheduling.md):
 *
 *   kbthreads-schedule 1
 *   nprocs 4
 *   schedule seeded 42          (or: schedule round-robin; informational)
 *   round 1 0 1 2 3             (round number, then the ranks in turn order)
 *   drain 1 3                   (round number, engine waits in its drain)
 *   ...
 *   end ok                      (or: end failed rank 2 / end failed drain /
 *                                    end timeout / end diverged / end freed)
 *
 * Lines starting with '#' and unknown keywords are ignored by the reader.
 */
#ifndef KB_SCHEDULE_H
#define KB_SCHEDULE_H

#include <stdint.h>
#include <stdio.h>

struct kb_record;
struct kb_replay;

/* Open path for writing: 0 or a negative errno. */
int kb_record_open(const char *path, int nprocs, int schedule, uint64_t seed, struct kb_record **out);
void kb_record_round(struct kb_record *r, uint64_t round, const int *order, int n);
void kb_record_drain(struct kb_record *r, uint64_t round, uint64_t engine_waits);
void kb_record_end(struct kb_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Write everything out and free: 0 or a negative errno. */
int kb_record_close(struct kb_record *r);

/* Read and check a recording: 0, a negative errno (unreadable), KB_EINVAL
 * (malformed; *line says where) or KB_EDIVERGED (recorded for another
 * nprocs). */
int kb_replay_open(const char *path, int nprocs, struct kb_replay **out, int *line);
/* The recorded order of round (1-based): 1, or 0 past the recording. */
int kb_replay_round(const struct kb_replay *r, uint64_t round, const int **order, int *n);
uint64_t kb_replay_rounds(const struct kb_replay *r);
int kb_replay_nprocs(const struct kb_replay *r);
/* 1 if the two lists hold the same ranks. */
int kb_replay_same_ranks(const int *a, int na, const int *b, int nb);
/* A sorted copy (malloc), or NULL. */
int *kb_replay_sorted(const int *a, int n);
void kb_replay_free(struct kb_replay *r);

#endif
