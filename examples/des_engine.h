/* SPDX-License-Identifier: MIT */
/*
 * des_engine.h - a small discrete-event engine for libkbthreads.
 *
 * The engine models a cluster of `nranks` ranks, each with one compute unit
 * and one point-to-point link to every other rank. Rank functions create
 * operations (compute, send, recv, an int64 all-reduce); each operation gets
 * a kb_handle and completes at a simulated time (nanoseconds). The engine's
 * kb_engine.wait hook advances a virtual clock, releasing completions in
 * time order (ties: creation order), until the handle waited for completes.
 *
 * Time model
 *   Every rank has a local clock: the simulated time its program has reached.
 *   It starts at 0 and moves only when the rank observes a completion through
 *   des_await()/des_await_all() (clock = max(clock, end of the op)). An
 *   operation issued by a rank starts at the rank's local clock, or later
 *   when the resource it needs is busy:
 *     compute(d):  start = max(clock, cpu_free), end = start + d.
 *     send(b):     the link src->dst serialises: start = max(clock,
 *                  link_free), link_free = start + b/bandwidth; the send
 *                  completes then (buffer reusable) and the data arrives
 *                  `latency` later.
 *     recv:        matched FIFO with the sends from the same source (MPI's
 *                  non-overtaking rule); end = max(post time, arrival).
 *     allreduce:   the k-th allreduce of every rank forms one instance; it
 *                  ends ceil(log2 nranks) * (latency + b/bandwidth) after
 *                  the last rank joined (recursive doubling).
 *   Each resource (compute unit, outgoing link) is used by exactly one rank,
 *   in that rank's program order, so every completion time is a function of
 *   the rank programs alone: it does not depend on the order in which the
 *   scheduler runs ranks or drains waits. That is what makes the timeline
 *   reproducible, and it is also why the engine may learn of an event
 *   (created by a rank that lags in simulated time) whose time is before
 *   events it has already released: such an event is still released in time
 *   order among the pending ones, and its time is exact. A model with shared
 *   resources (a switch, a bus) would need a conservative synchronisation
 *   (lookahead) instead.
 *
 * Handles are 1, 2, 3, ... in creation order: never 0 nor UINT64_MAX.
 *
 * Threading: the engine has no lock. Every call must come from the thread
 * holding the kbthreads baton of the ctx it serves (a running rank, or the
 * driver side, where the hooks run); the baton hand-off orders all accesses.
 * One engine serves one ctx, for one spawn plus driver-side waits after it.
 *
 * Limitation of the drain model: the library completes every pending wait
 * before any rank runs again, so a rank may only wait for an operation whose
 * counterparts (the matching send, the other ranks' allreduce joins) are
 * posted before the end of the same round. Otherwise the wait hook fails
 * with DES_EDEADLOCK and des_engine_error() names the operation.
 */
#ifndef DES_ENGINE_H
#define DES_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "kbthreads.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Engine codes returned by the wait hook (and so seen as the drain code of a
 * failed spawn) and by des_await*. Positive, so they never collide with the
 * library's negative KB_E* codes. */
#define DES_EDEADLOCK 1 /**< the handle can never complete: a counterpart is missing */
#define DES_EUNKNOWN  2 /**< the handle was not created by this engine */
#define DES_EABORTED  3 /**< the library aborted the spawn; the engine is spent */
#define DES_ELIBRARY  4 /**< a kb_* call made by the engine failed */
#define DES_EBIND     5 /**< bound to a rank out of range, or to a second ctx */
#define DES_ESTATE    6 /**< the library says completed, the engine never completed it */

/** A static description of a DES_E* code (or "unknown engine code"). */
const char *des_strerror(int code);

typedef struct des_config {
    int nranks;                 /**< >= 1 */
    uint64_t link_latency_ns;   /**< per message */
    uint64_t link_bytes_per_us; /**< link bandwidth, >= 1 (25000 = 25 GB/s) */
} des_config;

typedef struct des_engine des_engine;

/** 0, KB_EINVAL (NULL argument, nranks < 1, zero bandwidth), KB_ENOMEM. */
int des_engine_create(const des_config *cfg, des_engine **out);
/** Frees everything, including undelivered payloads. NULL: no-op. */
void des_engine_destroy(des_engine *e);

/** The hooks to give kb_ctx_create (self = e). */
kb_engine des_engine_hooks(des_engine *e);

/* Operations. Each returns a fresh handle, or 0 on failure (bad rank or
 * size, simulated time overflow, out of memory, engine aborted), with the
 * reason in des_engine_error(). */

/** Compute for duration_ns on rank's compute unit. */
kb_handle des_compute(des_engine *e, int rank, uint64_t duration_ns);

/** Send wire_bytes (the modelled size) from rank to dst. len bytes of data
 *  (NULL/0: none) are copied now, so the buffer may be reused at once. */
kb_handle des_send(des_engine *e, int rank, int dst, uint64_t wire_bytes, const void *data, size_t len);

/** Receive the next message from src. Its payload (len bytes, which must
 *  equal the sender's) is copied into buf when the recv completes; buf must
 *  stay valid until then. */
kb_handle des_recv(des_engine *e, int rank, int src, void *buf, size_t len);

/** Join this rank's next allreduce-sum of one int64 over all ranks: *inout
 *  is read now and receives the sum when the op completes. wire_bytes is
 *  the modelled message size of each exchange. */
kb_handle des_allreduce_i64(des_engine *e, int rank, uint64_t wire_bytes, int64_t *inout);

/* Waiting. */

/** kb_wait(ctx, h), then move rank's local clock to the op's end if later.
 *  Works in a rank (ctx = its ctx) and on the driver side. Returns kb_wait's
 *  code, DES_EUNKNOWN / DES_ESTATE, or KB_EINVAL for a bad rank. */
int des_await(des_engine *e, kb_ctx *ctx, int rank, kb_handle h);

/** For a handle the library says is completed (waited for through another
 *  layer, e.g. kb::wait): move rank's local clock to the op's end if later.
 *  0, DES_EUNKNOWN / DES_ESTATE, or KB_EINVAL for a bad rank. */
int des_observe(des_engine *e, int rank, kb_handle h);

/** Wait for all n handles in one round: every one not yet completed but the
 *  last is queued with kb_enqueue_wait and the last one waited for, so the
 *  same drain completes them all; then like des_await for each. */
int des_await_all(des_engine *e, kb_ctx *ctx, int rank, const kb_handle *hs, size_t n);

/* Inspection. */

/** rank's local clock (ns); 0 for a bad rank. */
uint64_t des_clock(const des_engine *e, int rank);
/** The largest rank clock: the makespan once every rank awaited its ops. */
uint64_t des_makespan(const des_engine *e);

typedef struct des_stats {
    uint64_t ops;             /**< operations created */
    uint64_t events;          /**< completions released by the clock */
    uint64_t waits[3];        /**< wait hook calls by kb_wait_origin */
    uint64_t completed_early; /**< ops completed while waiting for another */
    uint64_t horizon_ns;      /**< latest completion time released */
} des_stats;
void des_engine_stats(const des_engine *e, des_stats *out);

/** The first failure's description, "" if none. */
const char *des_engine_error(const des_engine *e);

#ifdef __cplusplus
}
#endif

#endif /* DES_ENGINE_H */
