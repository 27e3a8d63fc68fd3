/* SPDX-License-Identifier: MIT */
/*
 * The files a run reads and writes (run_files.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "run_files.h"
#include "schedule_file.h"
#include "strategy.h"
#include "timeline.h"

/* A path from the options, else the environment's (empty = unset). */
static const char *path_option(const char *given, const char *env)
{
    if (given)
        return given;
    const char *v = getenv(env);
    return v && *v ? v : NULL;
}

/* The spawns of this process that recorded to KB_RECORD's file (replayed
 * from KB_REPLAY's): the k-th since the variable named that file writes
 * (reads) the file's k-th recording. Spawns on different threads count in
 * the order they start. */
struct env_file {
    pthread_mutex_t lock;
    char path[4096];
    int spawns;
};
static struct env_file env_record = {PTHREAD_MUTEX_INITIALIZER, "", 0};
static struct env_file env_replay = {PTHREAD_MUTEX_INITIALIZER, "", 0};

static int env_spawn_number(struct env_file *e, const char *path)
{
    pthread_mutex_lock(&e->lock);
    if (strncmp(e->path, path, sizeof e->path - 1) != 0) {
        snprintf(e->path, sizeof e->path, "%s", path);
        e->spawns = 0;
    }
    int n = ++e->spawns;
    pthread_mutex_unlock(&e->lock);
    return n;
}

static int open_replay(struct kb_run *run, const kb_spawn_opts *opts)
{
    const char *given = opts ? opts->replay_path : NULL, *path = path_option(given, "KB_REPLAY");
    if (!path)
        return 0;
    int line, spawn = given ? 0 : env_spawn_number(&env_replay, path);
    int rc = kb__replay_open(path, run->nprocs, spawn, &run->files.replay, &line);
    if (rc == KB_EINVAL)
        fprintf(stderr, "kbthreads: %s:%d: not a kbthreads-schedule 1 recording\n", path, line);
    if (rc == KB_EDIVERGED && run->files.replay)
        fprintf(stderr, "kbthreads: %s was recorded for %d ranks, not %d\n", path,
                kb__replay_nprocs(run->files.replay), run->nprocs);
    else if (rc == KB_EDIVERGED)
        fprintf(stderr, "kbthreads: %s holds %d recordings; this is the process's spawn %d\n", path, line,
                spawn);
    return rc;
}

static int open_record(struct kb_run *run, const kb_spawn_opts *opts)
{
    const char *given = opts ? opts->record_path : NULL, *path = path_option(given, "KB_RECORD");
    if (!path)
        return 0;
    int spawn = given ? 0 : env_spawn_number(&env_record, path);
    char *what = kb__order_describe(run);
    if (!what)
        return KB_ENOMEM;
    int rc = kb__record_open(path, spawn > 1, spawn, run->nprocs, what, &run->files.record);
    free(what);
    return rc;
}

int kb__run_files_open(struct kb_run *run, const kb_spawn_opts *opts)
{
    int rc;
    if ((rc = open_replay(run, opts)) != 0 || (rc = open_record(run, opts)) != 0)
        return rc;
    const char *trace = path_option(opts ? opts->trace_path : NULL, "KB_TRACE");
    if (trace && (rc = kb__tl_open(run, trace)) != 0)
        return rc;
    return 0;
}

void kb__run_files_finish(struct kb_run *run)
{
    int rc;
    if (run->files.record) {
        rc = kb__record_close(run->files.record);
        run->files.record = NULL;
        if (rc != 0)
            fprintf(stderr, "kbthreads: could not write the schedule record: %s\n", kb_strerror(rc));
    }
    if (run->files.tl && (rc = kb__tl_close(run)) != 0)
        fprintf(stderr, "kbthreads: could not write the trace: %s\n", kb_strerror(rc));
}

void kb__run_files_free(struct kb_run *run)
{
    if (run->files.record)
        kb__record_close(run->files.record);
    if (run->files.tl)
        kb__tl_close(run);
    kb__replay_free(run->files.replay);
}
