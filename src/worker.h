/* SPDX-License-Identifier: MIT */
/*
 * Workers: the OS threads that run ranks, and the pool of parked ones a
 * ctx keeps between spawns.
 *
 * A worker is a thread with a wait slot. It waits on its slot; when posted
 * it either leaves (cmd EXIT) or runs the rank the driver assigned to it
 * (w->rank) until that rank's function ends, then waits again. A worker
 * whose rank finished (or never started) is returned to its ctx's pool when
 * the spawn ends, still waiting on its slot, and the next spawn assigns it a
 * new rank; kb_ctx_destroy posts EXIT to each and joins it. A worker whose
 * rank unwound (kb_raise, UNWIND cancellation, pthread_exit) has ended; the
 * driver joins it at once and frees it.
 *
 * Fields are written by the driver while the worker waits (rank, cmd,
 * park_look_ns), or by the worker while it holds the baton.
 */
#ifndef KB_WORKER_H
#define KB_WORKER_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

#include "baton.h"
#include "system.h"

struct kb_rank;
struct kb_ctx;

enum kb_cmd {
    KB_CMD_RUN = 0,  /* run w->rank */
    KB_CMD_EXIT = 1, /* leave the thread */
};

struct kb_worker {
    struct kb_slot slot; /* first: its own cache line */
    pthread_t thread;
    int tid;                     /* kernel thread id, ck_pr (debuggers only) */
    struct kb_rank *rank;        /* the rank assigned, NULL in the pool */
    int cmd;                     /* enum kb_cmd */
    int exited;                  /* its thread ended (its rank unwound) */
    int fresh;                   /* created by the spawn being set up */
    size_t stack_size;           /* 0 = default */
    int named_rank;              /* the rank its thread name shows, -1 none */
    int pinned_cpu;              /* the CPU it is pinned to, -1 none */
    int nudging;                 /* ck_pr: between its post and the end of its nudge (rank.c) */
    struct kb_cpumask orig_mask; /* its affinity when created, restored when unpinned */
    void *altstack;              /* the crash report's signal stack, or NULL */
    size_t altstack_size;
    int altstack_on;        /* sigaltstack installed on its thread */
    unsigned park_look_ns;  /* how long it looks at its slot (yielding) in the pool before it sleeps */
    struct kb_worker *next; /* pool link */
};

/* Get a worker for a rank: from ctx's pool if one with that stack size is
 * parked there, else a new thread. *created says which. 0, KB_EAGAIN
 * (the thread could not be created), KB_EINVAL (not with that stack
 * size), KB_ENOMEM. Driver, owning ctx. */
int kb__worker_get(struct kb_ctx *ctx, size_t stack_size, struct kb_worker **out, int *created);
/* Return a waiting worker to ctx's pool. */
void kb__worker_put(struct kb_ctx *ctx, struct kb_worker *w);
/* End a waiting worker's thread (cmd EXIT) and join it, or join one that
 * ended; then free it (under Valgrind: at ctx's destroy). */
void kb__worker_end(struct kb_ctx *ctx, struct kb_worker *w);
/* Free the workers kb__worker_end set aside. Every thread of ctx joined. */
void kb__graveyard_free(struct kb_ctx *ctx);
/* End every pooled worker. */
void kb__pool_drain(struct kb_ctx *ctx);
/* Worker thread: pin itself to cpu, or restore its original mask (-1). */
void kb__worker_pin(struct kb_worker *w, int cpu);

#endif
