/* SPDX-License-Identifier: MIT */
/*
 * fake_engine: the C counterpart of the reference oracle's fake runtime
 * context (../shared/reference/oracle/ref/fakectx.py), so tests can produce
 * the oracle's trace lines (tests/support/trace.h) and compare them line for
 * line with what the reference prints for the same scenario.
 *
 * What records what (one line each, tokens as in the oracle):
 *   engine wait hook   [main_wait H meta=M]   only for KB_WAIT_COLLECTIVE and
 *                                             KB_WAIT_DRIVER (the reference's
 *                                             ctx.wait on the main greenlet)
 *                      engine_wait H          always; then it fails (returns
 *                                             a positive code) or runs a
 *                                             callback if told to for H
 *   engine bind hook   bind R
 *   engine abort hook  barrier_reset pending_worker=[..] pending_coll=[..]
 *   fe_wait (rank)     wait_fast R H | wait_enqueue R H ... wait_done R H
 *   fe_driver_wait     driver_wait H [wait_fast main H]
 *   fe_all_reduce      coll_arrive R TAG n=K/W, coll_issue R coll:TAG sip=S,
 *                      coll_done R TAG result=V
 *   fe_traced          start R ... end R, finally R    (normal return)
 *                      start R ... unwind R cancel|raise, finally R
 *   plan bodies        step R I before each action
 *   fe_do_spawn        spawn_begin nprocs=N, the outcome, post ..., spawn_end
 *
 * Normalisation: Python-only tokens and C equivalents
 *   reference (oracle)                     here
 *   ------------------------------------   -----------------------------------
 *   wait_done R H switches=K               wait_done R H: the C API does not
 *                                          tell how many switches a wait took
 *                                          (tests see the switches as other
 *                                          ranks' lines in between instead)
 *   wait_fast main H in drain phase (b)    no line: the drain's driver-side
 *                                          fast path runs inside the library
 *                                          and never reaches the engine. An
 *                                          explicit driver-side wait is marked
 *                                          by a 'driver_wait H' line first,
 *                                          and then keeps its wait_fast line
 *   unwind R SystemExit                    unwind R cancel: the rank was
 *                                          cancelled (UNWIND: its thread
 *                                          unwinds; RETURN: the body returned
 *                                          KB_ECANCELED after a cancellation)
 *   unwind R ValueError (any Exception)    unwind R raise: kb_raise unwinding
 *                                          a not-cancelled rank, or the body
 *                                          returning a nonzero code
 *   finally R                              finally R: a pthread_cleanup_push
 *                                          handler (UNWIND mode), or the code
 *                                          after the body returned (RETURN)
 *   exception type T                       its code C: E<n> -> n,
 *                                          ValueError -> 1, RuntimeError -> 2
 *   spawn_return None                      spawn_return 0
 *   spawn_raised SpawnException            spawn_raised KB_ESPAWN
 *   error ranks=[..] first=R type=T        error ranks=[..] first=R code=C
 *                                          (first=None code=None: no rank)
 *   error_entry R T T('msg')               error_entry R code=C msg=msg
 *                                          (kb_rank_error: code, message)
 *   error_msg ...: rank R raised T('msg')  error_msg ...: rank R raised
 *                                          code C: msg
 *                                          (kb_spawn_error_message)
 *   (none: the reference cannot tell)      error_drain code=C handle=H for a
 *                                          drain failure (drain code/handle)
 *   error_cause T same_as_first=B          no line (Python exception chaining)
 *   teardown .. teardown_done              no lines (Python garbage collection)
 *   post ranks=[dead|suspended|unstarted]  after kb_spawn every rank is dead
 *                                          (no rank outlives its spawn); after
 *                                          kb_join the states are derived from
 *                                          the start/finally lines fe_traced
 *                                          saw (dead after a failure or 1)
 * tests/oracle/oracle_lib.py applies this mapping to oracle output.
 *
 * Everything here is used by one thread at a time (the baton holder), so no
 * locking. Functions marked (rank) are called from rank functions; the rest
 * from the test's driving thread. Nothing here calls cmocka asserts from a
 * rank thread: a surprise there shows up as a trace line instead.
 */
#ifndef KBTEST_FAKE_ENGINE_H
#define KBTEST_FAKE_ENGINE_H

#include <pthread.h>
#include <stddef.h>

#include "kbthreads.h"
#include "trace.h"

typedef struct fe fe;

/* Runs inside the engine's wait for a handle, after 'engine_wait H' was
 * recorded; may kb_enqueue_wait / kb_collective_submit / kb_complete / a
 * driver-side kb_wait. Its return value is the engine wait's result. */
typedef int (*fe_wait_cb)(fe *f, kb_handle h, void *arg);
/* A rank body run by fe_traced: 0 or a failure code (KB_ECANCELED after a
 * RETURN-mode cancellation). */
typedef int (*fe_body)(fe *f, int rank, void *arg);

/* Rank states for the post line, derived from what fe_traced saw. */
enum { FE_UNSTARTED = 0, FE_SUSPENDED = 1, FE_DEAD = 2 };

#define FE_MAX_KNOBS 32
#define FE_MAX_TAGS  32
#define FE_MAX_LOG   1024

struct fe_tag {
    char tag[32];
    char meta[48]; /* "all_reduce:TAG", the collective's meta */
    int arrived, sum, issued, result;
    kb_handle h;
};

/* One engine wait call, for tests that check origins and metas. */
struct fe_wait_log {
    kb_handle h;
    void *meta;
    kb_wait_origin origin;
};

struct fe {
    kb_engine engine; /* self = this fe */
    kb_ctx *ctx;
    /* knobs */
    int trace_origin; /* engine_wait lines get ' origin=queued|collective|driver' */
    struct {
        kb_handle h;
        int code;
    } fail_on[FE_MAX_KNOBS];
    int nfail_on;
    struct {
        kb_handle h;
        fe_wait_cb cb;
        void *arg;
    } on_wait[FE_MAX_KNOBS];
    int non_wait;
    /* called by fe_traced's cleanup when a rank unwinds (after the unwind
     * line, before 'finally R'); NULL: nothing */
    void (*on_unwind)(fe *f, int rank);
    /* called by the bind / abort hooks after their line; NULL: nothing */
    void (*on_bind)(fe *f, int rank);
    void (*on_abort)(fe *f);
    /* counters */
    int binds, aborts, waits;
    struct fe_wait_log log[FE_MAX_LOG];
    int nlog;
    /* the fake collective backend */
    struct fe_tag tags[FE_MAX_TAGS];
    int ntags, next_sip;
    /* the current run */
    int nprocs;
    int *state;   /* FE_UNSTARTED / FE_SUSPENDED / FE_DEAD per rank */
    int *calls;   /* how many times fe_traced ran for each rank */
    fe_body body; /* what fe_traced runs */
    void *body_arg;
    kb_spawn_error *err; /* the last report (owned; freed by the next call / fe_free) */
    /* the thread driving (set by every driver-side helper): a hook that
     * runs on another thread records 'hook_off_driver NAME' */
    pthread_t driver;
};

/* tr_reset(), then a fake engine and a ctx driving it. */
fe *fe_new(void);
/* kb_ctx_destroy (must give 0) and free everything. */
void fe_free(fe *f);

/* A handle by name (tr_handle), remembered for the post line's completed set. */
kb_handle fe_h(const char *name);
/* Engine knobs. */
void fe_fail_on(fe *f, const char *handle, int code);
void fe_on_wait(fe *f, const char *handle, fe_wait_cb cb, void *arg);

/* "KB_ECANCELED", "0", ... (static). */
const char *fe_code(int rc);
/* The post line: post ranks=[..] pending_worker=[..] pending_coll=[..]
 * completed=[..]; all_dead prints every rank dead, else the states seen. */
void fe_post(fe *f, int all_dead);
/* The pending queues and completed set as the post line prints them, without
 * the ranks: "pending_worker=[..] pending_coll=[..] completed=[..]". */
const char *fe_queues(fe *f);

/* (rank) ctx.wait: wait_fast R H (no switch) or wait_enqueue R H, kb_wait,
 * wait_done R H. Returns kb_wait's result (no wait_done line unless 0). */
int fe_wait(fe *f, kb_handle h);
/* Driver side: driver_wait H, wait_fast main H if completed, kb_wait_meta;
 * a nonzero result adds 'driver_wait_rc H CODE'. */
int fe_driver_wait(fe *f, kb_handle h, const char *meta);

/* (rank) The fake all_reduce over the first `world` callers of tag,
 * contributing value: early arrivals park in kb_yield until the last creates
 * handle coll:TAG and kb_collective_submit's it; then FE_AR_WAIT: fe_wait on
 * it; FE_AR_POLL: kb_yield until it is completed (never enqueues). 0 or the
 * first nonzero kb_* result. */
enum { FE_AR_WAIT = 0, FE_AR_POLL = 1 };
int fe_all_reduce(fe *f, const char *tag, int world, int value, int mode, int *result);

/* The rank function: arg is the fe; runs f->body(f, rank, f->body_arg)
 * between 'start R' and 'end R'/'unwind R ..' + 'finally R'. */
int fe_traced(int rank, void *arg);

/* Plans: plans[r] is rank r's list of actions ending with FE_END; each
 * action is preceded by 'step R I' (the reference's plan_body). */
typedef enum fe_op {
    FE_OP_END = 0,
    FE_OP_YIELD,    /* kb_yield() */
    FE_OP_WAIT,     /* fe_wait(name) */
    FE_OP_RAISE,    /* kb_raise(code, "%s", msg) */
    FE_OP_RETURN,   /* the body returns code */
    FE_OP_FAIL,     /* kb_fail(code, "%s", msg) and go on */
    FE_OP_ENQUEUE,  /* kb_enqueue_wait(name), no line */
    FE_OP_SUBMIT,   /* kb_collective_submit(name, sip=code, meta=msg), no line */
    FE_OP_COMPLETE, /* kb_complete(name), no line */
    FE_OP_AR,       /* fe_all_reduce(tag=name, world=code, value=rank+1, FE_AR_WAIT) */
    FE_OP_AR_POLL,  /* the same with FE_AR_POLL */
    FE_OP_BARRIER,  /* kb_barrier(), then 'barrier_done R' */
    FE_OP_MARK,     /* tr_add("%s", msg) */
    FE_OP_CALL      /* fn(f, rank, action) */
} fe_op;

typedef struct fe_act fe_act;
struct fe_act {
    fe_op op;
    const char *name;
    int code;
    const char *msg;
    int (*fn)(fe *f, int rank, const fe_act *a);
    const void *arg;
};

#define FE_END                                                                                               \
    {                                                                                                        \
        .op = FE_OP_END                                                                                      \
    }
#define FE_Y                                                                                                 \
    {                                                                                                        \
        .op = FE_OP_YIELD                                                                                    \
    }
#define FE_W(n)                                                                                              \
    {                                                                                                        \
        .op = FE_OP_WAIT, .name = (n)                                                                        \
    }
#define FE_RAISE(c, m)                                                                                       \
    {                                                                                                        \
        .op = FE_OP_RAISE, .code = (c), .msg = (m)                                                           \
    }
#define FE_RET(c)                                                                                            \
    {                                                                                                        \
        .op = FE_OP_RETURN, .code = (c)                                                                      \
    }
#define FE_FAIL(c, m)                                                                                        \
    {                                                                                                        \
        .op = FE_OP_FAIL, .code = (c), .msg = (m)                                                            \
    }
#define FE_ENQ(n)                                                                                            \
    {                                                                                                        \
        .op = FE_OP_ENQUEUE, .name = (n)                                                                     \
    }
#define FE_SUBMIT(n, sip, meta)                                                                              \
    {                                                                                                        \
        .op = FE_OP_SUBMIT, .name = (n), .code = (sip), .msg = (meta)                                        \
    }
#define FE_DONE(n)                                                                                           \
    {                                                                                                        \
        .op = FE_OP_COMPLETE, .name = (n)                                                                    \
    }
#define FE_AR(tag, world)                                                                                    \
    {                                                                                                        \
        .op = FE_OP_AR, .name = (tag), .code = (world)                                                       \
    }
#define FE_AR_POLL(tag, world)                                                                               \
    {                                                                                                        \
        .op = FE_OP_AR_POLL, .name = (tag), .code = (world)                                                  \
    }
#define FE_BARRIER                                                                                           \
    {                                                                                                        \
        .op = FE_OP_BARRIER                                                                                  \
    }
#define FE_MARK(text)                                                                                        \
    {                                                                                                        \
        .op = FE_OP_MARK, .msg = (text)                                                                      \
    }
#define FE_CALL(f, a)                                                                                        \
    {                                                                                                        \
        .op = FE_OP_CALL, .fn = (f), .arg = (a)                                                              \
    }

/* An FE_OP_CALL result that ends the plan body early with 0 (the oracle's
 * absorbing() wrapper: a body that returns normally). */
#define FE_STOP 0x5707

/* The plan body (an fe_body; arg: const fe_act *const *plans). */
int fe_plan_body(fe *f, int rank, void *plans);
/* (rank) Run one action; 0 or the result that ends the body. */
int fe_do_action(fe *f, int rank, const fe_act *a);

/* do_spawn: spawn_begin nprocs=N; kb_spawn; spawn_return 0 | spawn_raised
 * KB_ESPAWN + error lines | spawn_raised CODE raw; post; spawn_end. Returns
 * kb_spawn's result; the report stays in f->err. */
int fe_do_spawn(fe *f, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts);
/* fe_do_spawn of fe_traced running body(f, rank, arg). */
int fe_spawn_body(fe *f, fe_body body, void *arg, int nprocs, const kb_spawn_opts *opts);
/* fe_spawn_body of fe_plan_body. */
int fe_spawn_plans(fe *f, const fe_act *const *plans, int nprocs, const kb_spawn_opts *opts);
/* Cancel-mode shorthands for opts. */
const kb_spawn_opts *fe_unwind(void);
const kb_spawn_opts *fe_return(void);

/* join=False. fe_start: start_begin nprocs=N; kb_start (bind lines);
 * start_return CODE. fe_join: join timeout=T; kb_join; join_return 0|1 |
 * join_raised KB_ESPAWN + error lines (err=NULL when *err was not set) |
 * join_raised CODE raw; post. fe_pc_free: free_begin; kb_process_context_free;
 * free_end; post (every rank dead). */
int fe_start(fe *f, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts, kb_process_context **pc);
int fe_start_plans(fe *f, const fe_act *const *plans, int nprocs, const kb_spawn_opts *opts,
                   kb_process_context **pc);
int fe_join(fe *f, kb_process_context *pc, long timeout_ms);
void fe_pc_free(fe *f, kb_process_context *pc);

/* Record the error lines of a report (error, error_entry.., error_drain,
 * error_msg). */
void fe_report_error(const kb_spawn_error *e);

#endif
