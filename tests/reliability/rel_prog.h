/* SPDX-License-Identifier: MIT */
/*
 * Random programs for the differential tests (docs/reliability.md).
 *
 * A program is a sequence of phases on one ctx. A phase is a kb_spawn, or a
 * kb_start followed by kb_join calls with timeouts (and driver-side calls
 * between them) and kb_process_context_free. Each rank of a phase runs a
 * list of operations (yield, waits on fresh or completed handles,
 * kb_enqueue_wait, collectives, barriers, kb_fail, kb_raise, returns); what
 * it does when a suspension answers KB_ECANCELED (RETURN mode) and what its
 * cleanup handler does (UNWIND mode, and kb_raise) is chosen per rank. The
 * engine's wait may fail for some handles or queue new work.
 *
 * rp_generate() turns a source of choices (a seed, or fuzzer bytes) into a
 * program; rel_real.c runs it on the library, rel_model.c on the executable
 * model, and both write the same trace format (tests/support/trace.h).
 */
#ifndef REL_PROG_H
#define REL_PROG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RP_MAX_RANKS  6
#define RP_MAX_OPS    14
#define RP_MAX_PHASES 3
#define RP_MAX_DOPS   3
#define RP_MAX_JOINS  4
#define RP_NPOOL      12 /* handles 1000..1011 */
#define RP_NTAGS      3  /* collective tags per phase */

#define RP_POOL_BASE 1000u
#define RP_COLL_BASE 2000u

/* Pool handle i, and the collective handle of (phase, tag). */
static inline uint64_t rp_pool_handle(int i)
{
    return RP_POOL_BASE + (uint64_t)i;
}

static inline uint64_t rp_coll_handle(int phase, int tag)
{
    return RP_COLL_BASE + 10u * (uint64_t)phase + (uint64_t)tag;
}

/* Pool index of h, or -1. */
static inline int rp_pool_index(uint64_t h)
{
    return h >= RP_POOL_BASE && h < RP_POOL_BASE + RP_NPOOL ? (int)(h - RP_POOL_BASE) : -1;
}

/* Tag of a collective handle, or -1. */
static inline int rp_coll_tag(uint64_t h)
{
    return h >= RP_COLL_BASE && h < RP_COLL_BASE + 10u * RP_MAX_PHASES && (h - RP_COLL_BASE) % 10 < RP_NTAGS
               ? (int)((h - RP_COLL_BASE) % 10)
               : -1;
}

/* Rank operations. */
enum rp_op_kind {
    RP_YIELD = 0, /* kb_yield */
    RP_WAIT,      /* kb_wait(pool h) */
    RP_ENQ,       /* kb_enqueue_wait(pool h) */
    RP_DONE,      /* kb_complete(pool h) */
    RP_SUBMIT,    /* kb_collective_submit(pool h, next sip, "s") */
    RP_ISDONE,    /* kb_is_completed(pool h) */
    RP_COLL,      /* all-reduce on tag among the first `code` arrivals; poll: yield until completed */
    RP_BARRIER,   /* kb_barrier */
    RP_FAIL,      /* kb_fail(code, "rR.I fail") and go on */
    RP_RAISE,     /* kb_raise(code, "rR.I raise") */
    RP_RETURN,    /* return code */
    RP_BADWAIT,   /* kb_wait on the reserved handle 0: KB_EINVAL */
    RP_EXIT,      /* pthread_exit: the rank fails with KB_EEXITED */
    RP_NKINDS
};

struct rp_op {
    uint8_t kind;
    uint8_t h;    /* pool index */
    uint8_t tag;  /* RP_COLL */
    uint8_t poll; /* RP_COLL: 1 = poll with kb_yield, 0 = kb_wait */
    int code;     /* RP_FAIL/RAISE/RETURN: the code; RP_COLL: the world */
};

/* What a rank does when one of its calls answers KB_ECANCELED. */
enum rp_on_cancel {
    OC_RETURN = 0, /* return KB_ECANCELED (absorbed) */
    OC_ZERO,       /* return 0 (absorbed) */
    OC_CODE,       /* return cancel_code (a root cause) */
    OC_FAIL,       /* kb_fail(cancel_code) then return KB_ECANCELED (a root cause) */
    OC_CONTINUE,   /* carry on with the next operation */
    OC_N
};

/* What the rank's cleanup handler does (it runs when the rank unwinds). */
enum rp_cleanup {
    CL_LOG = 0, /* only the trace line */
    CL_FAIL,    /* kb_fail(cancel_code) */
    CL_SUSPEND, /* kb_yield, kb_wait(cleanup_h), kb_barrier: all KB_ECANCELED */
    CL_ENQ,     /* kb_enqueue_wait(cleanup_h) */
    CL_DONE,    /* kb_complete(cleanup_h) */
    CL_N
};

struct rp_rank {
    int nops;
    struct rp_op ops[RP_MAX_OPS];
    int end_code; /* returned after the last operation */
    uint8_t on_cancel;
    uint8_t cleanup;
    uint8_t cleanup_h;
    int cancel_code;
};

/* Driver-side calls between phases and between joins. */
enum rp_dop_kind {
    RD_ENQ = 0, /* kb_enqueue_wait */
    RD_DONE,    /* kb_complete */
    RD_SUBMIT,  /* kb_collective_submit(h, 80 + index, "d") */
    RD_WAIT,    /* kb_wait_meta(h, "w"): the engine's wait, origin DRIVER */
    RD_ISDONE,  /* kb_is_completed */
    RD_BUSY,    /* kb_spawn while a process context exists: KB_EBUSY (between joins only) */
    RD_N
};

struct rp_dop {
    uint8_t kind;
    uint8_t h;
};

struct rp_join {
    long timeout_ms; /* 0: one round; -1: to the end; > 0: as many rounds as fit */
    int ndops;
    struct rp_dop dops[RP_MAX_DOPS]; /* after the join */
};

enum { RP_SPAWN = 0, RP_START = 1 };

struct rp_phase {
    int kind; /* RP_SPAWN or RP_START */
    int nprocs;
    int cancel_mode; /* kb_cancel_mode */
    int seeded;      /* KB_SCHED_SEEDED with seed */
    uint64_t seed;
    unsigned max_rounds;
    struct rp_rank ranks[RP_MAX_RANKS];
    int npre;
    struct rp_dop pre[RP_MAX_DOPS]; /* before the spawn/start */
    /* RP_START */
    int njoins;
    struct rp_join joins[RP_MAX_JOINS];
    int free_early; /* free after the listed joins even if ranks are live */
    int join_again; /* once finished: one more kb_join (the same result, no report) */
};

/* The engine's wait for pool handle i. */
enum rp_knob_kind {
    KN_NONE = 0,
    KN_FAIL,   /* return code (times: how often; -1 always) */
    KN_ENQ,    /* kb_enqueue_wait(target) and return its result */
    KN_SUBMIT, /* kb_collective_submit(target, 90 + target, "k") */
    KN_DONE,   /* kb_complete(target) */
    KN_DWAIT,  /* driver-side kb_wait_meta(target, "n"), its result returned */
    KN_N
};

struct rp_knob {
    uint8_t kind;
    uint8_t target; /* a higher pool index: chains are finite */
    int code;
    int times;
};

struct rp_prog {
    int nphases;
    struct rp_phase phases[RP_MAX_PHASES];
    struct rp_knob knobs[RP_NPOOL];
    int coll_fail[RP_NTAGS]; /* nonzero: the engine's wait for that tag's handles returns it */
    int abort_done;          /* >= 0: the abort hook kb_complete()s that pool handle */
};

/* A source of choices: a splitmix64 stream from a seed, or bytes (a fuzzer
 * input; once they run out, a splitmix64 stream seeded with their hash). */
struct rp_src {
    uint64_t state;
    const uint8_t *bytes;
    size_t len, pos;
    int from_bytes;
    int no_exit; /* set after rp_src_*: programs without RP_EXIT */
};

void rp_src_seed(struct rp_src *s, uint64_t seed);
void rp_src_bytes(struct rp_src *s, const uint8_t *bytes, size_t len);
/* A choice in [0, bound). */
uint32_t rp_pick(struct rp_src *s, uint32_t bound);

void rp_generate(struct rp_prog *p, struct rp_src *s);
/* A readable listing of the program. */
void rp_dump(const struct rp_prog *p, FILE *out);

/* One line of text for an operation ("wait 1003", "coll t1 w3 poll", ...). */
const char *rp_op_text(const struct rp_op *op, char *buf, size_t cap);
const char *rp_dop_name(int kind);

/* Meta strings passed with collectives (their text is what traces show). */
extern const char *const rp_tag_meta[RP_NTAGS];

/* Join budgets measured on the library for positive timeouts: the rounds the
 * j-th kb_join call of each phase ran when it returned 0 (the timeout
 * passed), -1 when it returned anything else (the model then runs until the
 * process context finishes). */
#define RP_MAX_JOIN_CALLS (RP_MAX_JOINS + 2)
struct rp_clock {
    long rounds[RP_MAX_PHASES][RP_MAX_JOIN_CALLS];
};

#endif
