/* SPDX-License-Identifier: MIT */
/*
 * demo_common.h - what the two demo programs share: the model, the rank
 * state and its timeline, the result check, the command line, the
 * checkpoint and the report. kbdemo.c (the C API) and kbdemo_cpp.cpp (the
 * C++ layer) differ only in their rank program and their spawn, so for the
 * same options they print the same bytes on stdout.
 */
#ifndef DEMO_COMMON_H
#define DEMO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "des_engine.h"
#include "kbthreads.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model (all times in simulated ns). */

#define DEFAULT_RANKS 8
#define DEFAULT_STEPS 3
#define MAX_RANKS     64
#define MAX_STEPS     100

#define GRAD_BYTES          (UINT64_C(64) << 20) /* modelled gradient size: 64 MiB */
#define LINK_BYTES_PER_US   UINT64_C(25000)      /* 25 GB/s links */
#define LINK_LATENCY_NS     UINT64_C(2000)       /* 2 us per message */
#define REDUCE_BYTES_PER_NS UINT64_C(100)        /* summing chunks: 100 GB/s */
#define LOSS_BYTES          UINT64_C(8)          /* the loss all-reduce carries one int64 */
#define OPTIMIZER_NS        UINT64_C(400000)     /* 0.4 ms */
#define CHECKPOINT_NS       UINT64_C(1500000)    /* 1.5 ms, written by rank 0 */
#define ELEMS_PER_CHUNK     4                    /* real payload: int64 values per chunk */
#define CHUNK_LEN           (ELEMS_PER_CHUNK * sizeof(int64_t))

/* Rank failure codes (positive: library codes are negative). */
#define DEMO_EENGINE   100 /* an engine call refused to create an op */
#define DEMO_ECHECK    101 /* the all-reduce produced a wrong value */
#define DEMO_EIDENTITY 102 /* kb_rank/kb_world_size/kb_current_ctx disagree */

/* Micro-batch s (1-based) on rank r: 2 ms plus a rank- and step-dependent
 * imbalance of up to 0.72 ms, so the ring starts staggered. */
uint64_t compute_ns(int r, int s);
/* Modelled size of chunk c: GRAD_BYTES split in n nearly equal parts. */
uint64_t chunk_bytes(int n, int c);
/* Real payload: rank r starts with value r*10+i at element i and adds
 * contribution(r, s, i) in micro-batch s. */
int64_t contribution(int r, int s, size_t i);
int64_t loss_of(int r);

/* State. Each rank touches only its own rank_state, except the neighbour
 * check after the barrier (reads only); the baton serialises everything. */

typedef struct demo_event {
    uint64_t start, end;
    int rank;
    unsigned seq; /* program order within the rank */
    char what[64];
} demo_event;

typedef struct rank_state {
    int64_t *grad;                /* nranks chunks of ELEMS_PER_CHUNK values */
    int64_t tmp[ELEMS_PER_CHUNK]; /* reduce-scatter receive buffer */
    int64_t loss;                 /* all-reduced in place */
    uint64_t busy_ns;             /* simulated time spent computing */
    demo_event *events;
    size_t nevents, cap_events;
} rank_state;

typedef struct demo {
    const char *prog; /* the program name in messages */
    int nranks, steps;
    const char *trace; /* --trace FILE: a Chrome trace-event timeline of the scheduling */
    int stats;         /* --stats: print the scheduler's statistics */
    int seeded;        /* --seed N: visit ranks in a seeded order (results do not change) */
    unsigned long long seed;
    des_engine *eng;
    rank_state *rs;
} demo;

static inline int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static inline int64_t *chunk(rank_state *rs, int c)
{
    return rs->grad + (size_t)c * ELEMS_PER_CHUNK;
}

/* Append a timeline event of rank that started at start and ends now. */
void record(demo *d, int rank, uint64_t start, const char *fmt, ...) KB_PRINTF_LIKE(4, 5);

/* After the barrier: 0 if this rank's gradients and loss (and its left
 * neighbour's gradients) hold the expected sums, else DEMO_ECHECK with the
 * reason in msg. */
int demo_check(const demo *d, int rank, char *msg, size_t cap);

/* Defaults, then the command line (prog names the program in messages):
 * -1 to go on, else the exit status (0 after --help, 2 for a bad line). */
int demo_init(demo *d, const char *prog, int argc, char **argv);
/* The engine and the rank state: 1, or 0 with a message. */
int demo_setup(demo *d);
/* After a successful spawn on ctx: the checkpoint (a driver-side wait), the
 * report, the statistics with --stats. The exit status. */
int demo_finish(demo *d, kb_ctx *ctx, const kb_spawn_stats *st);
/* Free everything and flush stdout: the exit status. */
int demo_exit(demo *d, int status);
void demo_free(demo *d);

#ifdef __cplusplus
}
#endif

#endif
