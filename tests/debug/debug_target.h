/* SPDX-License-Identifier: MIT */
/*
 * What the programs the debugger tests drive (kb_gdb_target.c,
 * kb_dump_target.c) share: a CHECK that names the program, waiting until
 * every rank thread is named, and the process context's ranks.
 * Define KBT_TARGET (the program's name, a string) before including it.
 */
#ifndef KBT_DEBUG_TARGET_H
#define KBT_DEBUG_TARGET_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kbthreads.h"

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, KBT_TARGET ": %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);            \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

/* How many threads of this process are named kb-rank-<n>. */
static inline int named_rank_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(name, sizeof name, f) && strncmp(name, "kb-rank-", 8) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* A rank thread names itself when it first runs, which may be after other
 * ranks ran: before stopping, give every thread up to 10 s to have done it,
 * so the debugger shows every name (see docs/debugging.md). */
static inline void wait_for_names(int nthreads)
{
    for (int i = 0; i < 1000 && named_rank_threads() < nthreads; i++)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
}

/* The process context's ranks: three turns each. */
static inline int pc_rank(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    for (int i = 0; i < 3; i++) {
        int rc = kb_yield();
        if (rc != 0)
            return rc;
    }
    return 0;
}

#endif
