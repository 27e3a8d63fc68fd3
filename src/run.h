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
#include <time.h>

#include "baton.h"
#include "ctx.h"
#include "kbthreads.h"
#include "worker.h"

struct kb_record;
struct kb_replay;
struct kb_timeline;

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

/* Why a rank handed the baton to the driver. */
enum kb_stop {
    KB_STOP_NONE = 0,
    KB_STOP_ROUND = 1,  /* the round ended and the driver has work (kb_round_boundary) */
    KB_STOP_FAILED = 2, /* a rank failed; run->failed_rank says which */
    KB_STOP_DONE = 3,   /* a rank being cancelled has finished */
};

struct kb_run;

struct kb_rank {
    struct kb_worker *w; /* the thread running this rank */
    struct kb_run *run;
    int index;
    /* (B) scheduler fields */
    int state;     /* enum kb_rank_state */
    int cancelled; /* set by the driver before it posts this rank to cancel it */
    int unwinding; /* set by the rank itself before pthread_exit */
    int recorded;  /* a failure of this rank is in run->errors */
    int susp;      /* enum kb_susp: where it last suspended */
    kb_handle susp_handle;
    pid_t tid; /* its worker's kernel thread id (debuggers) */
    /* with run->observe: the current turn's start (wall and CPU time) */
    uint64_t turn_start_ns;
    uint64_t turn_cpu_ns;
};

/* A kb_start()ed spawn. It outlives its run: once the run finished (threads
 * joined, run freed) kb_join answers the cached result until it is freed.
 * The ctx stays busy (ctx->pc) until kb_process_context_free. */
struct kb_process_context {
    kb_ctx *ctx;
    struct kb_run *run;   /* NULL once finished */
    int result;           /* once finished: 1, KB_ESPAWN, KB_ETIMEDOUT or KB_EDIVERGED */
    kb_spawn_stats final; /* once finished: the totals (no per-rank arrays) */
};

struct kb_run {
    kb_ctx *ctx; /* its driver's slot is ctx->driver_slot */
    kb_rank_fn fn;
    void *arg;
    int nprocs;
    kb_cancel_mode cancel_mode;
    size_t stack_size;
    struct kb_rank *ranks;
    /* (B) scheduler fields */
    int holder;        /* KB_DRIVER or a rank index */
    int nlive;         /* number of not-finished ranks */
    int *order;        /* this round's ranks in visiting order (capacity nprocs) */
    int norder;        /* entries in order */
    int pos;           /* index in order of the rank holding the baton */
    uint64_t round_t0; /* with a timeline: when the current round began */
    /* A timed kb_join's deadline passed: the rank ending a round hands the
     * baton to the driver (kb_round_boundary). A ck_pr word, the one
     * scheduler field written without the baton: the driver sets it while
     * ranks run (sched.c: driver_wait) and clears it at the start of each
     * kb_join, holding the baton; ranks only read it. */
    int join_due;
    /* How a suspended rank waits for its next turn (wait_policy.c); fixed
     * for the spawn. Its watch is non-zero exactly when ranks nudge the
     * holder after next (kb_ahead_of). */
    struct kb_wait_budget rank_wait;
    int stop;        /* enum kb_stop, written by the rank handing to the driver */
    int failed_rank; /* with KB_STOP_FAILED */
    /* the barrier: arrivals at the current generation; the generation,
     * which grows by one each time it opens; and the round it last opened
     * in. A waiter leaves once the generation it arrived at has passed and
     * a later round has begun (kb_barrier). */
    int barrier_arrived;
    unsigned barrier_gen;
    uint64_t barrier_open_round;
    /* failures in insertion order; capacity nprocs (each rank at most once) */
    kb_rank_error *errors;
    size_t nerrors;
    /* counters (B): kb_spawn_stats */
    uint64_t rounds, turns, handoffs, drains, engine_waits, collectives;
    uint64_t start_ns;
    uint64_t *rank_turns;  /* per rank, when stats are wanted, else NULL */
    uint64_t *rank_cpu_ns; /* per rank, when stats are wanted, else NULL */
    /* driver-only fields */
    int join_timed;                /* a timed kb_join is driving: join_due is to be set at... */
    struct timespec join_deadline; /* ...this absolute CLOCK_MONOTONIC time */
    /* how long the driver, and a worker whose rank finished, look at their
     * slots, yielding, before they sleep (wait_policy.c) */
    unsigned park_look_ns;
    int failed;     /* the run failed (cancel/abort/clear already done) */
    int fail_code;  /* what kb_spawn returns for it: KB_ESPAWN, KB_ETIMEDOUT, KB_EDIVERGED */
    int drain_code; /* the drain's failing engine code, 0 if none */
    kb_handle drain_handle;
    kb_wait_origin drain_origin;
    uint64_t diverged_turn; /* with KB_EDIVERGED */
    char *stop_detail;      /* with KB_ETIMEDOUT / KB_EDIVERGED: what happened */
    kb_live_rank *live;     /* with KB_ETIMEDOUT / KB_EDIVERGED: the live ranks then */
    size_t nlive_snapshot;
    pid_t driver_tid; /* the thread driving now or last (debuggers) */
    /* options resolved against the environment */
    unsigned stall_ms; /* 0 = no watchdog */
    int stall_abort;
    int crash_report;
    size_t altstack_size;
    int affinity; /* kb_spawn_opts.affinity */
    int cpu;      /* with KB_AFFINITY_ONE_CPU: the CPU everyone runs on */
    int *cpus;    /* with KB_AFFINITY_SPREAD: the driver's CPUs; rank r runs on cpus[r % ncpus] */
    int ncpus;
    int schedule; /* kb_schedule */
    uint64_t rng; /* KB_SCHED_SEEDED, KB_SCHED_PCT: the generator's state */
    uint64_t seed;
    /* KB_SCHED_PCT (order.c), (B) once running */
    unsigned pct_depth;
    uint64_t pct_rounds;
    int *pct_list;         /* every rank, by descending priority */
    uint64_t *pct_changes; /* the change rounds, ascending */
    uint64_t npct_changes;
    uint64_t pct_next; /* the first change round not reached */
    /* KB_SCHED_EXHAUSTIVE (order.c), (B) once running */
    uint64_t ex_index, ex_limit;
    uint64_t ex_fact;         /* nprocs!, the base the index is read in */
    uint64_t ex_rest;         /* the index's digits not used yet */
    unsigned ex_k;            /* rounds enumerated */
    uint64_t max_rounds;      /* 0 = none */
    kb_spawn_stats *stats;    /* the caller's, filled at the end */
    int observe;              /* stats or a timeline: time turns */
    struct kb_record *record; /* the schedule being written, or NULL */
    struct kb_replay *replay; /* the schedule being forced, or NULL */
    struct kb_timeline *tl;   /* the timeline being collected, or NULL */
    /* the watchdog's turn stamps (ck_pr; see watchdog.c) */
    uint64_t turn_seq;
    uint64_t turn_ns;
    /* the registry of live runs (registry.c), under its lock */
    struct kb_run *reg_prev, *reg_next;
};

/* The rank the calling thread runs, or NULL. */
struct kb_rank *kb_self(void);

/* Give every rank a worker (parked ones from the ctx's pool first, then new
 * threads; each waits for its rank's first turn) and bind every rank. 0,
 * KB_EAGAIN or KB_ENOMEM with nothing left behind. Driver, owning ctx. */
int kb_run_create(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                  struct kb_run **out);
/* Return every worker still there to the ctx's pool (those whose rank
 * unwound were joined already) and free the run. Every rank must be
 * finished. */
void kb_run_destroy(struct kb_run *run);

/* The CPU a rank's thread is pinned to under the run's affinity option,
 * -1 for none. */
int kb_wanted_cpu(const struct kb_run *run, int rank);
/* With nudges (run->rank_wait.watch): the slot to nudge when self hands
 * the baton to next, or NULL (sched.c). */
struct kb_slot *kb_ahead_of(const struct kb_run *run, int self, int next);

/* Driver, holding the baton: wait until no rank is between its post and
 * the end of its nudge (rank.c), so that every worker may be freed. Ranks
 * raise their nudging mark only while they hold the baton, so none starts
 * meanwhile. Costs N loads when nothing is in flight. */
void kb_wait_nudges(struct kb_run *run);

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

/* Rank rk's function ended: it is no longer live. Baton holder only. */
void kb_rank_retire(struct kb_run *run, struct kb_rank *rk);
/* Open the barrier when every live rank has arrived: the next generation,
 * opened in the current round. Baton holder only. */
void kb_barrier_check(struct kb_run *run);
/* The next holder after the current rank's turn: the next rank of the
 * round's order, or KB_DRIVER at the end of the round. Baton holder. */
int kb_next_in_round(struct kb_run *run);
/* At the end of a round, on the rank that ends it: when the driver has
 * nothing to do (nothing to drain, ranks still live, no limit or replay to
 * check, no timed kb_join whose deadline passed), run the round boundary
 * here (the empty drain, the next round's order) and return the next
 * round's first rank; else KB_DRIVER. */
int kb_round_boundary(struct kb_run *run);
/* Driver, in a timed kb_join: the deadline at which to set join_due, or
 * NULL when there is none (not timed, or set already). */
const struct timespec *kb_join_deadline(const struct kb_run *run);
/* Driver, after a timed wait returned without the baton: set join_due if
 * the deadline has passed. */
void kb_join_expire(struct kb_run *run);

/* Turn accounting (stats, timeline): called by a rank thread when its turn
 * starts and just before it hands the baton on. No-ops unless observed. */
void kb_turn_begin(struct kb_rank *rk);
void kb_turn_end(struct kb_rank *rk);
uint64_t kb_now_ns(void);
/* Has the absolute CLOCK_MONOTONIC time t passed? */
int kb_time_passed(const struct timespec *t);

/* Fill the caller's kb_spawn_stats from the run. */
void kb_stats_fill(const struct kb_run *run, kb_spawn_stats *stats);

/* Rank side of kb_wait (rk is the calling rank). */
int kb_rank_wait(struct kb_rank *rk, kb_handle h);

/* Record a failure of rank rk (the first one only; later ones are ignored).
 * Caller holds the baton. fmt NULL: a default text naming the code. */
void kb_record_failurev(struct kb_rank *rk, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* The same with a plain text (NULL: "rank function returned <code>"). */
void kb_record_failure_text(struct kb_rank *rk, int code, const char *text);

/* A malloc'd printf result, or NULL. */
char *kb_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

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
/* Worker thread: run signal handlers on its own alternate stack. */
void kb_crash_altstack(struct kb_worker *w);

/* Worker thread, holding the baton for rk's first turn: run the rank's
 * function to its end (rank.c). Returns only if the function returned;
 * an unwinding rank ends the thread. */
void kb_rank_run(struct kb_worker *w, struct kb_rank *rk);

#endif
