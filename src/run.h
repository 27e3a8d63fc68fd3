/*
 * A run: one spawn (kb_spawn) or process context (kb_start), its ranks and
 * their threads.
 *
 * Baton invariant. Exactly one of {the driver, rank 0..nprocs-1} holds the
 * baton; run->holder names it. Only the holder reads or writes the
 * scheduler fields marked (B) below, and it hands them over by writing
 * run->holder and posting the next holder's slot (baton.h), which orders
 * every write before the post with every read after the wait. A rank thread
 * runs only while it holds the baton (or, after its last turn, only inside
 * glibc's thread exit, which the driver waits for with pthread_join).
 */
#ifndef KB_RUN_H
#define KB_RUN_H

#include <pthread.h>
#include <stdarg.h>
#include <sys/types.h>
#include <stdint.h>

#include "baton.h"
#include "ctx.h"
#include "kbthreads.h"

#define KB_DRIVER (-1)

enum kb_rank_state {
    KB_RS_NEW = 0,      /* thread exists, fn not called yet */
    KB_RS_STARTED = 1,  /* fn running or suspended */
    KB_RS_FINISHED = 2, /* fn returned or unwound, or cancelled before start */
};

enum kb_susp {
    KB_SUSP_NONE = 0,
    KB_SUSP_YIELD = 1,
    KB_SUSP_WAIT = 2,
    KB_SUSP_BARRIER = 3,
};

/* What a rank thread does when its slot is posted before it started. */
enum kb_cmd {
    KB_CMD_RUN = 0,  /* start fn */
    KB_CMD_EXIT = 1, /* leave without calling fn (cancelled before start, or teardown) */
};

/* Why a rank handed the baton to the driver. */
enum kb_stop {
    KB_STOP_NONE = 0,
    KB_STOP_ROUND = 1,  /* the last rank of the round suspended or finished */
    KB_STOP_FAILED = 2, /* a rank failed; run->failed_rank says which */
    KB_STOP_DONE = 3,   /* a rank being cancelled has finished */
};

struct kb_run;

struct kb_rank {
    struct kb_slot slot; /* this rank's wait slot (first: own cache line) */
    struct kb_run *run;
    int index;
    /* (B) scheduler fields */
    int state;      /* enum kb_rank_state */
    int cmd;        /* enum kb_cmd, read by the thread when first posted */
    int prev, next; /* neighbours in the live list (rank order), -1 = none */
    int cancelled;  /* set by the driver before it posts this rank to cancel it */
    int unwinding;  /* set by the rank itself before pthread_exit */
    int exited;     /* the thread ended (unwound): the driver must join it */
    int joined;     /* the driver joined the thread */
    int recorded;   /* a failure of this rank is in run->errors */
    int susp;       /* enum kb_susp: where it last suspended (for debugging) */
    kb_handle susp_handle;
    pthread_t thread;
    int has_thread;
    pid_t tid;      /* kernel thread id, written by the thread itself (debuggers) */
    void *altstack; /* the crash report's signal stack, or NULL */
};

/* A kb_start()ed spawn. It outlives its run: once the run finished (threads
 * joined, run freed) kb_join answers the cached result until it is freed.
 * The ctx stays busy (ctx->pc) until kb_process_context_free. */
struct kb_process_context {
    kb_ctx *ctx;
    struct kb_run *run; /* NULL once finished */
    int result;         /* once finished: 1 or KB_ESPAWN */
};

struct kb_run {
    struct kb_slot driver_slot; /* the driver's wait slot (own cache line) */
    kb_ctx *ctx;
    kb_rank_fn fn;
    void *arg;
    int nprocs;
    kb_cancel_mode cancel_mode;
    size_t stack_size;
    struct kb_rank *ranks;
    /* (B) scheduler fields */
    int holder;      /* KB_DRIVER or a rank index */
    int live_head;   /* first not-finished rank, -1 if none */
    int nlive;       /* number of not-finished ranks */
    int stop;        /* enum kb_stop, written by the rank handing to the driver */
    int failed_rank; /* with KB_STOP_FAILED */
    int barrier_arrived;
    unsigned barrier_gen;
    /* failures in insertion order; capacity nprocs (each rank at most once) */
    kb_rank_error *errors;
    size_t nerrors;
    /* driver-only fields */
    int failed;     /* the run failed (cancel/abort/clear already done) */
    int drain_code; /* the drain's failing engine code, 0 if none */
    kb_handle drain_handle;
    kb_wait_origin drain_origin;
    pid_t driver_tid; /* the thread driving now or last (debuggers) */
    /* options resolved against the environment */
    unsigned stall_ms; /* 0 = no watchdog */
    int stall_abort;
    int crash_report;
    size_t altstack_size;
    /* the watchdog's turn stamps (ck_pr; see watchdog.c) */
    uint64_t turn_seq;
    uint64_t turn_ns;
    /* the registry of live runs (registry.c), under its lock */
    struct kb_run *reg_prev, *reg_next;
};

/* The rank the calling thread runs, or NULL. */
struct kb_rank *kb_self(void);

/* Create the run's rank threads (each waits for its first turn) and bind
 * every rank. 0, KB_EAGAIN or KB_ENOMEM with nothing left behind.
 * Driver, owning ctx. */
int kb_run_create(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                  struct kb_run **out);
/* Join every rank thread and free the run. Every rank must be finished. */
void kb_run_destroy(struct kb_run *run);

/* Hand the baton to `to` (KB_DRIVER or a rank). Caller holds the baton. */
void kb_handoff(struct kb_run *run, int to);

/* Driver: run one round and its drain. 1 = every rank has finished (after
 * this round's drain, or at once if none was live), 0 = a round ran and
 * ranks remain, KB_ESPAWN = the run failed (already cancelled, aborted and
 * cleared). */
int kb_sched_round(struct kb_run *run);
/* Driver: cancel every not-finished rank in rank order, abort the engine,
 * clear both queues, mark the run failed. abort_engine 0 skips the hook. */
void kb_sched_cancel_all(struct kb_run *run, int abort_engine);

/* Live list and barrier bookkeeping. Baton holder only. */
void kb_live_remove(struct kb_run *run, struct kb_rank *rk);
void kb_barrier_check(struct kb_run *run);

/* Rank side of kb_wait (rk is the calling rank). */
int kb_rank_wait(struct kb_rank *rk, kb_handle h);

/* Record a failure of rank rk (the first one only; later ones are ignored).
 * Caller holds the baton. fmt NULL: a default text naming the code. */
void kb_record_failurev(struct kb_rank *rk, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* The same with a plain text (NULL: "rank function returned <code>"). */
void kb_record_failure_text(struct kb_rank *rk, int code, const char *text);

/* Free failure records (messages included). */
void kb_rank_errors_free(kb_rank_error *errors, size_t n);

/* Build the report of a failed run; NULL if allocation failed. */
kb_spawn_error *kb_spawn_error_build(struct kb_run *run);

/* The registry of live runs, which debuggers walk (the gdb extension reads
 * kb_live_runs). Driver only; the lock orders it with other drivers. */
void kb_registry_add(struct kb_run *run);
void kb_registry_remove(struct kb_run *run);

/* The stall watchdog (watchdog.c). */
void kb_watch_setup(struct kb_run *run);
void kb_watch_stamp(struct kb_run *run);
/* Driver: wait for the baton, reporting stalls. */
void kb_watch_wait(struct kb_run *run);

/* The crash report (crash.c). */
void kb_crash_report_install(void);
/* Rank thread: run signal handlers on rk->altstack. */
void kb_crash_altstack(struct kb_rank *rk);

/* The rank thread's start routine. */
void *kb_rank_thread_main(void *arg);

#endif
