/* SPDX-License-Identifier: MIT */
/*
 * The debug descriptor (debug_offsets.h): generated here from the real
 * structs, so a field that moves, grows or is renamed moves its entry with
 * it or breaks the build. The table is constant; the library never reads
 * it. It is writable in the file only because the two registry pointers are
 * relocated at load time.
 */
#include <stddef.h>
#include "debug_offsets.h"
#include "run.h"

/* The entries, as F(name, struct type, field) for integer and pointer
 * fields, Q(name, struct type, field) for an embedded struct kb_queue,
 * S(name, type) for struct sizes and V(NAME) for constants. */
#define KB_DEBUG_ENTRIES(F, Q, S, V)                                                                         \
    S("run", struct kb_run)                                                                                  \
    F("run.ctx", struct kb_run, ctx)                                                                         \
    F("run.nprocs", struct kb_run, nprocs)                                                                   \
    F("run.ranks", struct kb_run, ranks)                                                                     \
    F("run.holder", struct kb_run, holder)                                                                   \
    F("run.nlive", struct kb_run, nlive)                                                                     \
    F("run.cancel_mode", struct kb_run, cancel_mode)                                                         \
    F("run.stop", struct kb_run, stop)                                                                       \
    F("run.failed", struct kb_run, failure.failed)                                                           \
    F("run.errors", struct kb_run, failure.errors)                                                           \
    F("run.nerrors", struct kb_run, failure.nerrors)                                                         \
    F("run.drain_code", struct kb_run, failure.drain_code)                                                   \
    F("run.drain_handle", struct kb_run, failure.drain_handle)                                               \
    F("run.driver_tid", struct kb_run, driver_tid)                                                           \
    F("run.handoffs", struct kb_run, counters.handoffs)                                                      \
    F("run.reg_next", struct kb_run, registry.next)                                                          \
    S("rank", struct kb_rank)                                                                                \
    F("rank.w", struct kb_rank, w)                                                                           \
    F("rank.index", struct kb_rank, index)                                                                   \
    F("rank.state", struct kb_rank, state)                                                                   \
    F("rank.cancelled", struct kb_rank, cancelled)                                                           \
    F("rank.unwinding", struct kb_rank, unwinding)                                                           \
    F("rank.failed", struct kb_rank, failed)                                                                 \
    F("rank.susp", struct kb_rank, susp)                                                                     \
    F("rank.susp_handle", struct kb_rank, susp_handle)                                                       \
    F("rank.tid", struct kb_rank, tid)                                                                       \
    S("worker", struct kb_worker)                                                                            \
    F("worker.thread", struct kb_worker, thread)                                                             \
    F("worker.tid", struct kb_worker, tid)                                                                   \
    F("worker.next", struct kb_worker, next)                                                                 \
    S("ctx", struct kb_ctx)                                                                                  \
    F("ctx.owner", struct kb_ctx, owner)                                                                     \
    Q("ctx.waits", struct kb_ctx, waits)                                                                     \
    Q("ctx.colls", struct kb_ctx, colls)                                                                     \
    F("ctx.pool", struct kb_ctx, pool)                                                                       \
    S("queue", struct kb_queue)                                                                              \
    F("queue.buf", struct kb_queue, buf)                                                                     \
    F("queue.elem", struct kb_queue, elem)                                                                   \
    F("queue.cap", struct kb_queue, cap)                                                                     \
    F("queue.head", struct kb_queue, head)                                                                   \
    F("queue.len", struct kb_queue, len)                                                                     \
    S("collective", kb_collective)                                                                           \
    F("collective.handle", kb_collective, handle)                                                            \
    F("collective.sip_id", kb_collective, sip_id)                                                            \
    F("collective.meta", kb_collective, meta)                                                                \
    S("rank_error", kb_rank_error)                                                                           \
    F("rank_error.rank", kb_rank_error, rank)                                                                \
    F("rank_error.code", kb_rank_error, code)                                                                \
    F("rank_error.message", kb_rank_error, message)                                                          \
    S("handle", kb_handle)                                                                                   \
    V(KB_DRIVER)                                                                                             \
    V(KB_RS_NEW)                                                                                             \
    V(KB_RS_STARTED)                                                                                         \
    V(KB_RS_FINISHED)                                                                                        \
    V(KB_SUSP_NONE)                                                                                          \
    V(KB_SUSP_YIELD)                                                                                         \
    V(KB_SUSP_WAIT)                                                                                          \
    V(KB_SUSP_BARRIER)                                                                                       \
    V(KB_STOP_FAILED)                                                                                        \
    V(KB_CANCEL_UNWIND)                                                                                      \
    V(KB_CANCEL_RETURN)

#define KB_FIELD_ENTRY(name, type, field) {name, offsetof(type, field), sizeof(((type *)0)->field)},
#define KB_SIZE_ENTRY(name, type)         {name, 0, sizeof(type)},
#define KB_VALUE_ENTRY(value)             {"value." #value, (uint32_t)(value), 0},

/* Readers read 4- and 8-byte integers and pointers only; every name fits
 * with its NUL; the count in the header is the count here. */
#define KB_FIELD_CHECK(name, type, field)                                                                    \
    _Static_assert(sizeof(((type *)0)->field) == 4 || sizeof(((type *)0)->field) == 8,                       \
                   name " is neither 4 nor 8 bytes");                                                        \
    _Static_assert(sizeof(name) <= KB_DEBUG_NAME_MAX, name " is too long");
#define KB_QUEUE_CHECK(name, type, field)                                                                    \
    _Static_assert(sizeof(((type *)0)->field) == sizeof(struct kb_queue), name " is not a struct kb_queue");
#define KB_SIZE_CHECK(name, type) _Static_assert(sizeof(name) <= KB_DEBUG_NAME_MAX, name " is too long");
#define KB_VALUE_CHECK(value)                                                                                \
    _Static_assert(sizeof("value." #value) <= KB_DEBUG_NAME_MAX, #value " too long");
KB_DEBUG_ENTRIES(KB_FIELD_CHECK, KB_QUEUE_CHECK, KB_SIZE_CHECK, KB_VALUE_CHECK)

#define KB_COUNT_ONE(...) +1
enum { KB_DEBUG_COUNTED = 0 KB_DEBUG_ENTRIES(KB_COUNT_ONE, KB_COUNT_ONE, KB_COUNT_ONE, KB_COUNT_ONE) };
_Static_assert(KB_DEBUG_COUNTED == KB_DEBUG_NFIELDS, "KB_DEBUG_NFIELDS is not the number of entries");
_Static_assert(sizeof(KB_DEBUG_OFFSETS_MAGIC) == 8, "the magic is 7 characters and a NUL");

__attribute__((visibility("default"), section(".kb_debug"), used))
const struct kb_debug_offsets kb_debug_offsets = {
    .magic = KB_DEBUG_OFFSETS_MAGIC,
    .version = KB_DEBUG_OFFSETS_VERSION,
    .header_size = offsetof(struct kb_debug_offsets, fields),
    .field_size = sizeof(struct kb_debug_field),
    .nfields = KB_DEBUG_NFIELDS,
    .pointer_size = sizeof(void *),
    .live_runs = &kb_live_runs,
    .live_runs_gen = &kb_live_runs_gen,
    .fields = {KB_DEBUG_ENTRIES(KB_FIELD_ENTRY, KB_FIELD_ENTRY, KB_SIZE_ENTRY, KB_VALUE_ENTRY)},
};
