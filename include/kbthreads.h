/* SPDX-License-Identifier: MIT */
/**
 * @file kbthreads.h
 * @brief libkbthreads: a threaded deterministic scheduler using a baton-passing handoff.
 *
 * kb_spawn() runs fn(rank, arg) for nprocs ranks. Every rank runs on its own
 * OS thread with a native stack, but a baton lets exactly one thread run at a
 * time (the driving thread, i.e. the caller of kb_spawn()/kb_join(), or one
 * rank), in round-robin rank order. After every round the driver drains the
 * pending queues (worker waits, then collectives) through a user-supplied
 * engine. When a rank fails, the driver cancels every live sibling in rank
 * order, calls the engine's abort hook, clears both queues and reports the
 * root-cause ranks.
 *
 * Conventions
 *   - Every function that can fail returns 0 (or a documented non-negative
 *     value) on success and a negative errno value (KB_E*) on failure, like
 *     libuv. kb_strerror() names every code.
 *   - Error precedence: KB_EINVAL (bad argument) before KB_EPERM (wrong kind
 *     of thread) before KB_EBUSY (ctx in use / thread not holding the baton).
 *   - "Rank" means a thread running a rank function of some spawn. "Driver
 *     side" means any other thread: the thread inside kb_spawn()/kb_join()
 *     (and the engine hooks it calls), or any thread using an idle ctx.
 *
 * The protocol and its invariants are described in docs/design.md.
 */
#ifndef KBTHREADS_H
#define KBTHREADS_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond KB_INTERNAL */
#if defined(__GNUC__) && defined(KB_BUILDING_LIBRARY)
#define KB_API __attribute__((visibility("default")))
#else
#define KB_API
#endif

#if defined(__GNUC__)
#define KB_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define KB_PRINTF_LIKE(fmt, args)
#endif

#ifdef __cplusplus
#define KB_NORETURN [[noreturn]]
#else
#define KB_NORETURN _Noreturn
#endif
/** @endcond */

/* The version is defined here only; CMake reads it from these lines. */
#define KB_VERSION_MAJOR  0       /**< major version: changes break the API or ABI */
#define KB_VERSION_MINOR  1       /**< minor version: additions */
#define KB_VERSION_PATCH  0       /**< patch version: fixes */
#define KB_VERSION_STRING "0.1.0" /**< "MAJOR.MINOR.PATCH", what kb_version() returns */

/* ------------------------------------------------------------------------ */
/* Errors: negative errno values.                                           */
/* ------------------------------------------------------------------------ */

#define KB_EINVAL    (-EINVAL)    /**< bad argument */
#define KB_ENOMEM    (-ENOMEM)    /**< allocation failed; nothing leaked */
#define KB_EAGAIN    (-EAGAIN)    /**< a rank thread cannot be created now (kb_spawn_check says why) */
#define KB_EBUSY     (-EBUSY)     /**< ctx busy, or a call from a thread not holding its baton */
#define KB_EPERM     (-EPERM)     /**< rank-only call outside a rank, or driver-only call inside one */
#define KB_ECANCELED (-ECANCELED) /**< this rank is being cancelled (RETURN mode, or during an unwind) */
#define KB_ESPAWN    (-10000)     /**< ranks or the drain failed: see kb_spawn_error */
#define KB_ETIMEDOUT (-ETIMEDOUT) /**< max_rounds reached: see kb_spawn_error */
/** A replayed schedule no longer matches the program: see kb_spawn_error. */
#define KB_EDIVERGED (-10002)
/** Recorded for a rank whose thread left its function without returning
 *  (pthread_exit, or a longjmp out of its unwind). */
#define KB_EEXITED (-10001)
/** The library was built without what the request needs on this system:
 *  kb_spawn_opts.affinity other than 0 where the system has no way to pin
 *  a thread to a CPU (see kb_features(), KB_FEATURE_AFFINITY). */
#define KB_ENOTSUP (-ENOTSUP)

/** A static, human-readable description of err (a KB_E* code, any negative
 *  errno value, or 0). Never NULL. */
KB_API const char *kb_strerror(int err);

/** The library version, "MAJOR.MINOR.PATCH"; equals KB_VERSION_STRING of the
 *  header the library was built with. */
KB_API const char *kb_version(void);

/** The baton's wait slot this library was built with (CMake option
 *  KB_BATON): "futex" (a futex word per thread; Linux, the default there)
 *  or "condvar" (a mutex and condition variable per thread; any POSIX
 *  system, the default elsewhere and with KB_PORTABLE=ON). Both give the
 *  same scheduling and the same results; they differ in speed only
 *  (docs/benchmarks.md). A static string, never NULL. */
KB_API const char *kb_baton_name(void);

/** kb_features(): the thread can be pinned (KB_AFFINITY_ONE_CPU,
 *  KB_AFFINITY_SPREAD work; without it kb_spawn and kb_start answer
 *  KB_ENOTSUP for them). */
#define KB_FEATURE_AFFINITY 0x1u
/** kb_features(): rank threads are named kb-rank-N, N the rank (else unnamed:
 *  the system cannot name another thread, e.g. macOS). */
#define KB_FEATURE_THREAD_NAMES 0x2u
/** kb_features(): the crash report and the stall watchdog print a
 *  backtrace (else a line saying none is available). */
#define KB_FEATURE_BACKTRACE 0x4u
/** kb_features(): the library records kernel thread ids for debuggers
 *  (else 0, and the gdb script matches threads by pthread_t). */
#define KB_FEATURE_THREAD_IDS 0x8u
/** kb_features(): the gdb script is embedded in the library's
 *  .debug_gdb_scripts section (else gdb loads it from the installed
 *  file, see docs/debugging.md). */
#define KB_FEATURE_GDB_SECTION 0x10u

/** The optional, system-dependent parts this library was built with: an OR
 *  of KB_FEATURE_* bits. On Linux every bit is set unless it was built with
 *  KB_PORTABLE=ON, which builds the POSIX fallbacks instead and calls
 *  nothing Linux-only: no bit at all (thread names and ids fall back too:
 *  unnamed threads, id 0). */
KB_API unsigned kb_features(void);

/* ------------------------------------------------------------------------ */
/* Handles and the engine.                                                  */
/* ------------------------------------------------------------------------ */

/** An opaque completion handle chosen by the user or engine. The values 0 and
 *  UINT64_MAX are reserved: every call taking a handle answers KB_EINVAL. */
typedef uint64_t kb_handle;

#define KB_HANDLE_RESERVED_LOW  ((kb_handle)0)          /**< reserved handle value (KB_EINVAL) */
#define KB_HANDLE_RESERVED_HIGH ((kb_handle)UINT64_MAX) /**< reserved handle value (KB_EINVAL) */

/** Why the engine's wait is being called. */
typedef enum kb_wait_origin {
    KB_WAIT_QUEUED = 0,     /**< drain phase (a): a pending worker wait */
    KB_WAIT_COLLECTIVE = 1, /**< drain phase (b): a pending collective, with its meta */
    KB_WAIT_DRIVER = 2      /**< kb_wait / kb_wait_meta called on the driver side */
} kb_wait_origin;

struct kb_ctx;

/**
 * The engine a ctx drives. Every hook runs on the driver side while the
 * driver holds the baton, so no rank runs concurrently with a hook.
 *
 * Inside wait/bind/abort the engine may call kb_enqueue_wait,
 * kb_collective_submit, kb_complete, kb_is_completed, kb_pending_* and a
 * driver-side kb_wait on the ctx being driven; kb_spawn/kb_start/kb_join (on
 * any ctx) and kb_ctx_destroy give KB_EBUSY there, and
 * kb_process_context_free is a program error (diagnostic, abort()).
 */
typedef struct kb_engine {
    /** Passed back as the first argument of every hook. */
    void *self;
    /** Run the simulation until h completes. Nonzero fails the spawn (in a
     *  drain) or is returned as is (driver-side kb_wait). Library codes are
     *  negative, so engines should use positive ones. NULL: every handle
     *  completes as soon as the drain reaches it. */
    int (*wait)(void *self, kb_handle h, void *meta, kb_wait_origin origin);
    /** Driver thread, rank 0..nprocs-1 in order, inside kb_spawn/kb_start
     *  after every rank thread exists and before any rank runs (the
     *  reference's _bind_rank). May be NULL. */
    void (*bind)(void *self, struct kb_ctx *ctx, int rank);
    /** Once per failure, after every live sibling is cancelled and before
     *  both queues are cleared (the reference's backend._barrier.reset());
     *  also when a process context with live ranks is freed. May be NULL. */
    void (*abort)(void *self, struct kb_ctx *ctx);
} kb_engine;

/* ------------------------------------------------------------------------ */
/* Contexts.                                                                */
/* ------------------------------------------------------------------------ */

/** A scheduling context: the engine, the two pending queues and the set of
 *  completed handles. It outlives spawns: a second spawn numbers ranks from
 *  0 again and keeps the completed set (kb_ctx_reset empties it, and the
 *  queues, to start a new simulation).
 *
 *  While a spawn runs, a ctx is touched only by the thread holding its baton
 *  (the driver inside kb_spawn/kb_join, or the running rank); any other
 *  thread gets KB_EBUSY. An idle ctx may be used by any one thread at a time
 *  (a second thread entering concurrently gets KB_EBUSY). */
typedef struct kb_ctx kb_ctx;

/** Create a ctx. engine may be NULL (no hooks, every wait completes at once);
 *  it is copied. KB_EINVAL for a NULL out, KB_ENOMEM. */
KB_API int kb_ctx_create(const kb_engine *engine, kb_ctx **out);

/** Destroy a ctx and join every parked thread it keeps. 0; KB_EBUSY while a
 *  spawn or process context is live, or from an engine hook; KB_EPERM from a
 *  rank (of any spawn); NULL: no-op (0). */
KB_API int kb_ctx_destroy(kb_ctx *ctx);

/** Start a new simulation on ctx: empty its completed set and both pending
 *  queues, so that a spawn naming its handles as an earlier one did waits
 *  for them again instead of taking the fast path on the earlier run's
 *  completions. It keeps what outlives simulations: the engine (whose own
 *  state is the engine's to reset), the parked threads and what the wait
 *  policy learnt (neither changes any order). Between spawns only: 0;
 *  KB_EINVAL for NULL; KB_EPERM from a rank; KB_EBUSY while a spawn or a
 *  process context is live, or from an engine hook; KB_ENOMEM (nothing
 *  changed). */
KB_API int kb_ctx_reset(kb_ctx *ctx);

/** kb_running_rank(): the driver holds the baton (between rounds, in a
 *  drain or an engine hook). */
#define KB_RUNNING_DRIVER (-2)

/** Who runs code of ctx's live spawn now: the rank that holds the baton
 *  and is running its own code (started, not inside kb_yield, kb_wait or
 *  kb_barrier, not finished); KB_RUNNING_DRIVER when the driver holds the
 *  baton; -1 when no spawn runs or the baton is being handed on (the
 *  holder is starting, suspending or finishing). Any thread, without the
 *  baton: a snapshot that may change as soon as it is read (for an
 *  interrupt handler that has to reach the code running, as the Python
 *  binding's Ctrl-C does). KB_EINVAL for NULL. */
KB_API int kb_running_rank(const kb_ctx *ctx);

/** kb_ctx_dump(): the C backtrace of every rank that has not finished. */
#define KB_DUMP_C_FRAMES 0x1u
/** kb_ctx_dump(): the C backtrace of the rank holding the baton. */
#define KB_DUMP_HOLDER_C_FRAMES 0x2u

/** Write ctx's live spawn to fd: who holds the baton, then a line per rank
 *  ("kbthreads: rank 1 (kb-rank-1, LWP 4242): suspended in kb_yield"; not
 *  started, holding the baton, suspended in kb_yield / kb_wait on a handle
 *  / kb_barrier, finished) and, under each rank that started and has not
 *  finished, its frames as the frames writer writes them
 *  (kb_set_frames_writer: a binding's stack) and, as flags (KB_DUMP_*) ask,
 *  its C backtrace. Each rank's thread writes its own frames in a handler
 *  of KB_STALL_SIGNAL (a sleep it is in returns early, as for the stall
 *  report), which this call waits for, up to 2 s each. From the thread
 *  holding the baton (a rank, an engine hook) the ranks hold still; from
 *  any other thread it is a snapshot of ranks that may move meanwhile, for
 *  a process about to be ended (the Python binding's second Ctrl-C); the
 *  run is not freed while it is read. Not async-signal-safe. 0 (also when
 *  no spawn runs: a line says so); KB_EINVAL for NULL ctx, fd < 0 or
 *  unknown flags. */
KB_API int kb_ctx_dump(kb_ctx *ctx, int fd, unsigned flags);

/* ------------------------------------------------------------------------ */
/* Waits, completions and the pending queues.                               */
/* ------------------------------------------------------------------------ */

/**
 * Wait until h is completed.
 *
 * In a rank: if h is completed, return 0 at once without switching (the
 * rank keeps the baton), unless the rank has been cancelled (RETURN mode)
 * or is unwinding: then KB_ECANCELED at once, completed or not. Otherwise append h to the pending worker
 * waits and yield until a drain has completed it. KB_ECANCELED if the rank is cancelled meanwhile (RETURN
 * mode; in UNWIND mode the rank unwinds instead).
 *
 * On the driver side: if h is completed, 0 at once without calling the
 * engine; otherwise call the engine's wait (KB_WAIT_DRIVER), then mark h
 * completed; never enqueues. A nonzero engine code is returned as is and h
 * stays not completed.
 *
 * KB_EINVAL: NULL ctx or reserved h. KB_EPERM: a rank calling on a ctx other
 * than its own. KB_EBUSY: a thread not holding the ctx's baton. KB_ENOMEM:
 * h could not be queued (in a rank) or marked completed (driver side).
 */
KB_API int kb_wait(kb_ctx *ctx, kb_handle h);

/** kb_wait passing meta to the engine (driver side). Inside a rank meta is
 *  ignored. */
KB_API int kb_wait_meta(kb_ctx *ctx, kb_handle h, void *meta);

/** Append h to the pending worker waits without waiting. Same errors as
 *  kb_wait (KB_ENOMEM: h could not be queued). */
KB_API int kb_enqueue_wait(kb_ctx *ctx, kb_handle h);

/** Mark h completed (idempotent). Same errors as kb_wait (KB_ENOMEM: h
 *  could not be recorded). */
KB_API int kb_complete(kb_ctx *ctx, kb_handle h);

/** 1 if h is completed, 0 if not; KB_EINVAL / KB_EPERM / KB_EBUSY as for
 *  kb_wait. */
KB_API int kb_is_completed(const kb_ctx *ctx, kb_handle h);

/** Copy up to cap completed handles, in no particular order, into out (which
 *  may be NULL when cap is 0); return how many are completed in all. Returns
 *  0 for a NULL ctx, a NULL out with cap > 0, or a thread that may not touch
 *  ctx. */
KB_API size_t kb_completed_handles(const kb_ctx *ctx, kb_handle *out, size_t cap);

/** Append (h, sip_id, meta) to the pending collectives; drain phase (b)
 *  completes it through a driver-side wait (KB_WAIT_COLLECTIVE, with meta).
 *  Same errors as kb_enqueue_wait. */
KB_API int kb_collective_submit(kb_ctx *ctx, kb_handle h, int sip_id, void *meta);

/** One pending collective. */
typedef struct kb_collective {
    kb_handle handle; /**< the handle drain phase (b) completes */
    int sip_id;       /**< the submitter's id, passed through unchanged */
    void *meta;       /**< passed to the engine's wait (KB_WAIT_COLLECTIVE) */
} kb_collective;

/** Copy up to cap pending worker waits, oldest first, into out (which may be
 *  NULL when cap is 0); return how many are pending in all. Returns 0 for a
 *  NULL ctx, a NULL out with cap > 0, or a thread that may not touch ctx. */
KB_API size_t kb_pending_waits(const kb_ctx *ctx, kb_handle *out, size_t cap);

/** Like kb_pending_waits, for the pending collectives. */
KB_API size_t kb_pending_collectives(const kb_ctx *ctx, kb_collective *out, size_t cap);

/* ------------------------------------------------------------------------ */
/* Calls made by rank functions.                                            */
/* ------------------------------------------------------------------------ */

/** This thread's rank, or -1 outside a rank. */
KB_API int kb_rank(void);
/** The number of ranks of this rank's spawn, or 0 outside a rank. */
KB_API int kb_world_size(void);
/** The ctx of this rank's spawn, or NULL outside a rank. */
KB_API kb_ctx *kb_current_ctx(void);
/** 1 once this rank has been cancelled, else 0 (also outside a rank). */
KB_API int kb_cancelled(void);
/** 1 while this thread is inside an engine hook (kb_engine's wait, bind or
 *  abort, called by the library), else 0. A binding asks before a call that
 *  a hook may not make (kb_spawn, kb_ctx_destroy: KB_EBUSY there), or before
 *  a free it must defer, so it keeps no count of its own. */
KB_API int kb_in_hook(void);

/**
 * Give the baton to the next rank of the round (at the end of the round: to
 * the driver for the drain, or, when there is nothing to drain, straight to
 * the next round's first rank) and wait for this rank's next turn. 0;
 * KB_EPERM outside a rank.
 *
 * UNWIND mode: a cancelled rank never returns from here; its thread unwinds,
 * running its pthread_cleanup_push handlers, one rank at a time.
 * RETURN mode: KB_ECANCELED, and so does every later kb_yield / kb_wait /
 * kb_barrier of that rank, at once and without switching. The same calls made
 * from a cleanup handler during an unwind the library started (kb_raise, an
 * UNWIND cancellation) also return KB_ECANCELED. A rank that calls
 * pthread_exit itself fails with KB_EEXITED, recorded when its unwind
 * reaches the library, after its own cleanup handlers: those handlers must
 * not call suspension points (the library cannot see that exit yet).
 */
KB_API int kb_yield(void);

/**
 * Wait until every not-finished rank of this spawn has arrived. Every arrival
 * yields at least once (the last one too); the barrier opens when the last
 * not-finished rank arrives (or when a rank finishes and every remaining one
 * has arrived). No rank returns from it before the next round begins, that
 * is, before the drain that follows the round in which it opened; in that
 * next round every waiter returns at its turn, so the code after the barrier
 * starts in rank order (with a seeded schedule or a replay, that round's
 * order). 0; KB_EPERM outside a rank; KB_ECANCELED as for kb_yield (a
 * cancelled waiter never passes, whether the barrier had opened or not).
 */
KB_API int kb_barrier(void);

/**
 * Record a failure of this rank (code 0 is recorded as KB_EINVAL) with a
 * printf-style message and unwind this rank's thread, running its cleanup
 * handlers. Outside a rank, or while this rank is already unwinding: a
 * diagnostic on stderr and abort().
 */
KB_API KB_NORETURN void kb_raise(int code, const char *fmt, ...) KB_PRINTF_LIKE(2, 3);

/**
 * Record a failure of this rank without unwinding, then return 0. Usable in
 * cleanup handlers (a cancelled rank that calls it becomes a root cause). The
 * first call of a rank is recorded, at that moment; later calls change
 * nothing. The spawn fails when the rank's function ends. KB_EPERM outside a
 * rank; KB_EINVAL for code 0. fmt may be NULL.
 */
KB_API int kb_fail(int code, const char *fmt, ...) KB_PRINTF_LIKE(2, 3);

/* ------------------------------------------------------------------------ */
/* Spawning.                                                                */
/* ------------------------------------------------------------------------ */

/** A rank function: 0 ok; nonzero = failure code, except KB_ECANCELED from a
 *  cancelled rank (not recorded); a rank that called kb_fail is recorded
 *  once, with its first kb_fail code. */
typedef int (*kb_rank_fn)(int rank, void *arg);

/** The order of ranks within a round (kb_spawn_opts.schedule). */
typedef enum kb_schedule {
    KB_SCHED_ROUND_ROBIN = 0, /**< rank order (the reference's) */
    KB_SCHED_SEEDED = 1,      /**< a permutation per round drawn from kb_spawn_opts.seed */
    /** Probabilistic concurrency testing over rounds: ranks by random priority, pct_depth - 1
     *  demotions (kb_spawn_opts.pct_depth, docs/scheduling.md) */
    KB_SCHED_PCT = 2,
    /** Every order of the first rounds, one per exhaustive_index (kb_spawn_opts.exhaustive_limit) */
    KB_SCHED_EXHAUSTIVE = 3,
    /** Round-robin with delays at the turns kb_spawn_opts.delays lists (a delay moves the rank whose
     *  turn it is behind the ranks still to run in that round; docs/scheduling.md) */
    KB_SCHED_DELAYS = 4
} kb_schedule;

/** The largest kb_spawn_opts.pct_depth. */
#define KB_SCHED_PCT_MAX_DEPTH 4096

struct kb_spawn_stats;

/** How a cancelled rank leaves its suspension point. */
typedef enum kb_cancel_mode {
    KB_CANCEL_UNWIND = 0, /**< the thread unwinds (pthread_exit): cleanup handlers run */
    KB_CANCEL_RETURN = 1  /**< kb_yield/kb_wait/kb_barrier return KB_ECANCELED */
} kb_cancel_mode;

/** Spawn options. All-zero or NULL = defaults. Later versions add fields:
 *  initialise with designated initializers or `= {0}` (C), `{}` (C++). */
typedef struct kb_spawn_opts {
    /** Stack size of each rank thread; 0 = the platform default. Below
     *  PTHREAD_STACK_MIN: KB_EINVAL. */
    size_t stack_size;
    /** KB_CANCEL_UNWIND (default) or KB_CANCEL_RETURN; others: KB_EINVAL. */
    kb_cancel_mode cancel_mode;
    /** Stall watchdog: when one rank has held the baton longer than this
     *  many milliseconds, the driver prints once per stall, on stderr, which
     *  rank, for how long, and that thread's frames (the frames writer's,
     *  see kb_set_frames_writer, then its C backtrace; taken by signalling
     *  the thread with KB_STALL_SIGNAL; a sleep it is in returns early with
     *  EINTR), then keeps waiting (or aborts, see stall_abort). 0 = off,
     *  unless the environment sets KB_STALL_MS. Only ranks are watched: a
     *  slow engine hook runs on the driver itself. */
    unsigned stall_ms;
    /** With the watchdog on: abort() after reporting a stall. 0 = keep
     *  waiting, unless the environment sets KB_STALL_ABORT=1. */
    int stall_abort;
    /** Crash report: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT in a rank
     *  thread, print "kbthreads: rank 3 (kb-rank-3) crashed: SIGSEGV" and
     *  its frames (the frames writer's, then the C backtrace) on stderr, then re-raise with the default
     * action (core dumps still happen). The handlers are installed process-wide on the first spawn that asks
     * and stay; signals in other threads go to the handler that was there before. 0 = off, unless the
     * environment sets KB_CRASH_REPORT=1. */
    int crash_report;
    /** 0 (default): threads run wherever the OS puts them, and how a
     *  waiting rank waits for its turn (kb_wait_mode) adapts to what
     *  handoffs cost: the library starts from the rank count and the CPUs
     *  the driver may use, measures the wall time per handoff, now and
     *  then tries another mode for a short while (a bounded share of the
     *  time), and moves to one that measured faster (kb_spawn_stats
     *  reports the mode and the figures). The environment's
     *  KB_WAIT_POLICY=spin, look, nudge or sleep forces one mode for the
     *  whole spawn, KB_WAIT_POLICY=static keeps the choice from the counts,
     *  auto is the default, and cycle, a test mode, changes the mode every
     *  round. None of them ever changes the order. The library may move a
     *  rank's thread onto another of the driver's CPUs while it waits; it
     *  sets the thread's affinity back at once, so rank code never sees it
     *  changed.
     *  KB_AFFINITY_ONE_CPU: pin every rank thread and the driver to the CPU
     *  the driver is on when the spawn starts (only one runs at a time, so
     *  nothing is lost, and a handoff stays on one CPU's caches); the
     *  driver's own affinity is restored when kb_spawn/kb_join returns.
     *  KB_AFFINITY_SPREAD: pin rank r's thread to the r-th CPU (modulo
     *  their number) of those the driver may run on when the spawn starts;
     *  the driver stays unpinned. A rank handing the baton on also wakes
     *  the rank after the next one ahead of time, when that one sits on
     *  another CPU than the next holder, and a rank so woken watches its
     *  slot on its own CPU for up to about 50 microseconds before it sleeps
     *  again: a handoff between ranks on different CPUs then needs no
     *  wake-up of a sleeping thread. Costs a CPU's worth of spinning while
     *  ranks are handing the baton on; pays where waking a sleeping thread
     *  on another CPU is expensive (docs/benchmarks.md). Under Valgrind
     *  the ranks are pinned but nobody is woken ahead. With one usable
     *  CPU it pins everything there like KB_AFFINITY_ONE_CPU's ranks.
     *  Other values: KB_EINVAL. Either option in a library without
     *  KB_FEATURE_AFFINITY (kb_features(); a system without thread
     *  affinity, or KB_PORTABLE=ON): KB_ENOTSUP before any rank runs. */
    int affinity;
    /** The order of the ranks within a round: KB_SCHED_ROUND_ROBIN (default,
     *  rank order, the reference's), KB_SCHED_SEEDED (each round visits the
     *  live ranks in a permutation drawn from seed), KB_SCHED_PCT (see
     *  pct_depth), KB_SCHED_EXHAUSTIVE (see exhaustive_limit) or
     *  KB_SCHED_DELAYS (see delays); the same
     *  options and program give the same trace, always. Drain, failure and
     *  cancellation rules are unchanged; cancellation stays in rank order.
     *  When schedule is KB_SCHED_ROUND_ROBIN the environment may select one:
     *  KB_SCHED_SEED=n (seeded, seed n), KB_SCHED_PCT=seed:depth[:rounds]
     *  KB_SCHED_EXHAUSTIVE=index:limit (the index taken modulo the
     *  count, so one serves spawns of any size) or KB_SCHED_DELAYS=t,t,...
     *  (one list per spawn, separated by '/'); malformed values are ignored
     *  with a warning. Others: KB_EINVAL. */
    kb_schedule schedule;
    /** The seed of KB_SCHED_SEEDED and KB_SCHED_PCT. */
    uint64_t seed;
    /** Write the executed schedule (docs/scheduling.md has the format) to
     *  this file, one write per round as the spawn runs (a process that
     *  crashes or is killed leaves every round it began); also
     *  KB_RECORD=path, where the process's first spawn truncates the file
     *  and each later one appends its own recording. A file that cannot be
     *  created fails the spawn before any rank runs with its negative
     *  errno. */
    const char *record_path;
    /** Force the schedule recorded in this file: each round visits the
     *  ranks in the recorded order. When the program no longer matches (a
     *  round's live ranks differ from the recording, or it runs more or
     *  fewer rounds) the spawn fails with KB_EDIVERGED, naming the turn.
     *  Overrides schedule. Also KB_REPLAY=path; a file of several
     *  recordings gives the process's k-th spawn that reads KB_REPLAY the
     *  k-th (KB_EDIVERGED before any rank runs when it has none). A
     *  partial schedule (a "partial" line) forces only the rounds it lists
     *  and never diverges. An unreadable or malformed file: its negative
     *  errno or KB_EINVAL before any rank runs. */
    const char *replay_path;
    /** Write a Chrome trace-event JSON timeline (Perfetto, chrome://tracing)
     *  to this file when the spawn ends: a track per rank and one for the
     *  driver, a slice per turn, drains with their engine waits, instants
     *  for waits, collectives, barriers, cancellations and failures. Events
     *  are kept in memory while the spawn runs. Also KB_TRACE=path. */
    const char *trace_path;
    /** Fail the spawn with KB_ETIMEDOUT (siblings cancelled, abort, queues
     *  cleared) when this many rounds have run and ranks are still live;
     *  the report names every live rank's last suspension point. 0 = no
     *  limit, unless the environment sets KB_MAX_ROUNDS. */
    uint64_t max_rounds;
    /** Filled with the spawn's statistics when kb_spawn returns (or
     *  kb_join, each time); NULL = none. */
    struct kb_spawn_stats *stats;
    /** KB_SCHED_PCT: the depth d, 1 to KB_SCHED_PCT_MAX_DEPTH (else
     *  KB_EINVAL). Every rank gets a distinct random priority when the
     *  spawn starts and each round visits the live ranks by descending
     *  priority; at d - 1 distinct rounds drawn from the first pct_rounds,
     *  the rank that runs first in that round drops to the lowest priority
     *  from the next round on. All draws come from seed (docs/scheduling.md
     *  gives the exact draws and what a run guarantees). */
    unsigned pct_depth;
    /** KB_SCHED_PCT: R, the number of rounds the change points are drawn
     *  from, an estimate of the rounds the spawn runs; 0 = 2 * nprocs (at
     *  least 1). */
    uint64_t pct_rounds;
    /** KB_SCHED_EXHAUSTIVE: which schedule, 0 to count - 1 (else
     *  KB_EINVAL), where count = (nprocs!)^k for the largest k with count
     *  <= exhaustive_limit. Read in base nprocs!, digit i (least
     *  significant first) is the order of round i + 1, as the index of a
     *  permutation of the live ranks in lexicographic order (taken modulo
     *  m! when m < nprocs ranks are live); rounds after the first k run in
     *  rank order. Index 0 is round-robin. */
    uint64_t exhaustive_index;
    /** KB_SCHED_EXHAUSTIVE: the most schedules to enumerate, at least 1
     *  (else KB_EINVAL). */
    uint64_t exhaustive_limit;
    /** KB_SCHED_DELAYS: the turns at which to delay, ndelays of them, in
     *  ascending order (else KB_EINVAL); a turn listed c times is delayed c
     *  times. Turns are numbered from 1 over the spawn, one per rank per
     *  round, as kb_spawn_error_turn counts them (turn 0: KB_EINVAL). Each
     *  round visits its live ranks in rank order, except that at a delayed
     *  turn the rank whose turn it is moves behind the ranks still to run in
     *  that round, and the next of them takes the turn; c delays at one turn
     *  do that c times. Delaying the last rank of a round changes nothing;
     *  turns past the end of the spawn are never reached. The array is read
     *  when the spawn starts (kb_spawn, kb_start) and not kept. */
    const uint64_t *delays;
    /** KB_SCHED_DELAYS: the number of entries of delays (0: round-robin;
     *  delays may then be NULL). */
    size_t ndelays;
} kb_spawn_opts;

/** kb_spawn_opts.affinity: everything on the driver's CPU. */
#define KB_AFFINITY_ONE_CPU 1
/** kb_spawn_opts.affinity: ranks spread over the driver's CPUs, the next
 *  holder woken one turn ahead. */
#define KB_AFFINITY_SPREAD 2

/** How a rank waits for its next turn (kb_spawn_stats.wait_mode; the
 *  figures behind each are in docs/design.md, "the wait policy"). */
typedef enum kb_wait_mode {
    KB_WAIT_SLEEP = 0, /**< sleeps at once; the post wakes it */
    KB_WAIT_LOOK = 1,  /**< looks at its slot, yielding the CPU between looks, up to ~50 us, then sleeps */
    KB_WAIT_NUDGE = 2, /**< sleeps at once; the holder before it wakes it one turn ahead, and it then looks */
    KB_WAIT_SPIN = 3 /**< looks at its slot with a CPU pause between looks (a CPU of its own), then sleeps */
} kb_wait_mode;
/** The number of kb_wait_mode values (the size of kb_spawn_stats.wait_ns). */
#define KB_WAIT_MODES 4

/** The name of a kb_wait_mode ("sleep", "look", "nudge", "spin"), or "unknown". */
KB_API const char *kb_wait_mode_name(int mode);

/** Statistics of a spawn (kb_spawn_opts.stats). The caller may point
 *  rank_turns / rank_cpu_ns at arrays of rank_cap entries to get per-rank
 *  figures for ranks 0..rank_cap-1 (NULL: not wanted). */
typedef struct kb_spawn_stats {
    uint64_t rounds;       /**< rounds run */
    uint64_t turns;        /**< rank turns (a rank holding the baton once) */
    uint64_t handoffs;     /**< baton handoffs, the driver's included */
    uint64_t drains;       /**< drains run (one per round) */
    uint64_t engine_waits; /**< handles waited for through the engine (drains and driver-side
                                waits), counted also when the engine has no wait hook */
    uint64_t collectives;  /**< collectives submitted */
    uint64_t wall_ns;      /**< wall time from the start of the spawn */
    uint64_t *rank_turns;  /**< caller's array: turns of each rank, or NULL */
    uint64_t *rank_cpu_ns; /**< caller's array: CPU time each rank spent on the baton, or NULL */
    size_t rank_cap;       /**< entries in those arrays */
    /** The kb_wait_mode ranks wait in at the end (the one chosen, not a
     *  mode being tried); with an affinity option, the mode it implies
     *  (KB_AFFINITY_ONE_CPU: sleep; KB_AFFINITY_SPREAD: spin with a CPU per
     *  rank, else nudge). */
    int wait_mode;
    /** 1 when the mode adapted to what handoffs cost (default affinity,
     *  KB_WAIT_POLICY unset or auto, not under Valgrind), else 0 (a fixed
     *  choice: nothing measured, wait_ns all 0). */
    int wait_reactive;
    uint64_t wait_switches; /**< times the adapting policy changed the mode it chose
                                 (KB_WAIT_POLICY=cycle: every round) */
    /** Its last figure for each kb_wait_mode: wall nanoseconds per
     *  handoff, rank code and drains included (so only comparable within
     *  one spawn); 0 = never measured (not a candidate, or not tried). A
     *  mode much faster than wait_mode here is worth forcing with
     *  KB_WAIT_POLICY. */
    uint64_t wait_ns[KB_WAIT_MODES];
} kb_spawn_stats;

/** The signal a rank thread writes its frames on: the stall watchdog sends
 *  it to a stalled rank, kbthreads-dump to each rank of a process with a
 *  frames writer (docs/debugging.md). SIGRTMIN + 3, a real-time signal
 *  glibc leaves to programs. The library installs its handler once per
 *  process, on the first spawn with the watchdog on or at
 *  kb_set_frames_writer; signals from other senders are ignored. */
#define KB_STALL_SIGNAL (SIGRTMIN + 3)

/**
 * A binding's frames writer: writes the calling thread's frames in the
 * binding's language (its interpreter's stack, innermost last) to fd, at
 * most max_frames of them (the innermost; 0: all it has), as lines that
 * start with two spaces. The library calls it on a rank's own thread, in a
 * signal handler, wherever that thread stopped (maybe holding the
 * interpreter's lock): for the stall report and the crash report (before
 * the C backtrace) and for kbthreads-dump. It may use only
 * async-signal-safe calls: no malloc, no locks, no stdio.
 */
typedef void (*kb_frames_writer)(int fd, int max_frames, void *arg);

/** Install the process-wide frames writer (NULL: none; arg is passed back),
 *  and KB_STALL_SIGNAL's handler. Set it once, before spawning: replacing
 *  it while a report is being written is not supported. 0. */
KB_API int kb_set_frames_writer(kb_frames_writer fn, void *arg);

/** One root-cause rank. message is never NULL and lives as long as the
 *  kb_spawn_error it came from. */
typedef struct kb_rank_error {
    int rank;            /**< the root-cause rank */
    int code;            /**< its failure code (a nonzero return, or the kb_raise/kb_fail code) */
    const char *message; /**< the kb_raise/kb_fail text, or "rank function returned <code>" */
} kb_rank_error;

/** The report of a spawn that failed once its ranks existed (KB_ESPAWN,
 *  KB_ETIMEDOUT, KB_EDIVERGED, KB_ENOMEM: kb_spawn_error_code). */
typedef struct kb_spawn_error kb_spawn_error;

/** Number of root-cause ranks (0 for NULL). */
KB_API size_t kb_spawn_error_count(const kb_spawn_error *e);
/** The i-th root-cause rank, in the order the failures were recorded; NULL
 *  out of range or for NULL e. */
KB_API const kb_rank_error *kb_spawn_error_get(const kb_spawn_error *e, size_t i);
/** "spawn failed on ranks [1, 3]: rank 1 raised code 5: ..." (sorted ranks,
 *  first recorded rank named); a drain failure names its code and handle.
 *  "" for NULL e. */
KB_API const char *kb_spawn_error_message(const kb_spawn_error *e);
/** The engine's code if the drain failed, else 0. */
KB_API int kb_spawn_error_drain_code(const kb_spawn_error *e);
/** The handle whose engine wait failed in the drain, else 0. */
KB_API kb_handle kb_spawn_error_drain_handle(const kb_spawn_error *e);
/** What failed the spawn: KB_ESPAWN (ranks or the drain), KB_ETIMEDOUT
 *  (max_rounds), KB_EDIVERGED (replay) or KB_ENOMEM (out of memory
 *  checking a round against a replay); 0 for NULL e. */
KB_API int kb_spawn_error_code(const kb_spawn_error *e);
/** With KB_EDIVERGED: the 1-based turn at which the program stopped
 *  matching the recording; else 0. */
KB_API uint64_t kb_spawn_error_turn(const kb_spawn_error *e);

/** Where a live rank was when a spawn stopped (KB_ETIMEDOUT, KB_EDIVERGED,
 *  KB_ENOMEM). */
typedef enum kb_rank_where {
    KB_AT_START = 0,   /**< never ran */
    KB_AT_YIELD = 1,   /**< suspended in kb_yield */
    KB_AT_WAIT = 2,    /**< suspended in kb_wait on handle */
    KB_AT_BARRIER = 3, /**< suspended in kb_barrier */
} kb_rank_where;

/** A live rank's last suspension point. */
typedef struct kb_live_rank {
    int rank;            /**< the rank */
    kb_rank_where where; /**< where it was suspended */
    kb_handle handle;    /**< with KB_AT_WAIT: the handle */
} kb_live_rank;

/** Number of ranks that were live when the spawn stopped for KB_ETIMEDOUT,
 *  KB_EDIVERGED or KB_ENOMEM (0 otherwise). */
KB_API size_t kb_spawn_error_live_count(const kb_spawn_error *e);
/** The i-th of them, in rank order; NULL out of range. */
KB_API const kb_live_rank *kb_spawn_error_live_get(const kb_spawn_error *e, size_t i);

/** Free a report; NULL is a no-op. */
KB_API void kb_spawn_error_free(kb_spawn_error *e);

/**
 * Run fn(rank, arg) for ranks 0..nprocs-1 to completion (join=True).
 *
 * Returns 0 when every rank finished; when the spawn fails, after cancelling
 * every live rank, aborting the engine and clearing the queues:
 * KB_ESPAWN (a rank or the drain failed), KB_ETIMEDOUT (max_rounds reached),
 * KB_EDIVERGED (a replayed schedule stopped matching) or KB_ENOMEM (checking
 * a round against a replayed schedule ran out of memory), each with *err
 * set (err may be NULL; *err is NULL only if the report itself could not
 * be allocated). Before any rank ran, with *err NULL: KB_EINVAL (NULL
 * ctx/fn, nprocs < 0, bad opts, a malformed replay file), KB_EPERM (called
 * from a rank), KB_EBUSY (ctx busy, or from an engine hook), KB_ENOTSUP
 * (an affinity option the library cannot honour, see kb_features()),
 * KB_EAGAIN (more ranks than the system lets this process create threads
 * for, found before anything is allocated: kb_spawn_check names the limit;
 * or a rank thread could not be created), KB_ENOMEM, KB_EDIVERGED
 * (a replay file recorded for another nprocs, or with fewer recordings
 * than this process's spawns) or the negative errno of a record/replay/trace
 * file that cannot be opened. nprocs 0 is valid (no round, no drain). When it
 * returns no rank runs or waits any more.
 */
KB_API int kb_spawn(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                    kb_spawn_error **err);

/**
 * Would a spawn of nprocs ranks with opts fit on this machine now? The
 * check kb_spawn and kb_start make before they allocate anything: 0, or
 * KB_EAGAIN when the threads the spawn needs (a thread per rank beyond
 * ctx's parked threads of its stack size; ctx may be NULL: none) are more
 * than one of these limits leaves room for, with why (if why_size > 0) set
 * to a sentence naming it, e.g. "40000 ranks need 40000 new threads (0
 * parked threads reused): pid_max (32768, /proc/sys/kernel/pid_max) leaves
 * room for 32611 (157 threads on the system)". The limits (Linux; a file
 * that cannot be read skips its limit):
 *   - pid_max and threads-max (kernel.*), less the threads of the system;
 *   - RLIMIT_NPROC, less this process's threads (not for root or a process
 *     with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, which the kernel exempts);
 *   - the cgroup's (and its ancestors') pids.max, less pids.current;
 *   - address space: RLIMIT_AS less the address space in use, over a stack
 *     (kb_spawn_opts.stack_size, or the default thread stack size) and its
 *     guard page; with vm.overcommit_memory 2, CommitLimit less
 *     Committed_AS, over a stack;
 *   - memory: 24 KiB a thread that no overcommit lends (its kernel stack and
 *     the first pages of its own stack), against MemAvailable and the
 *     cgroup's memory.max less memory.current (a stack's full size is
 *     virtual and not counted here);
 *   - vm.max_map_count, two mappings a thread, when the spawn needs more
 *     than a quarter of it.
 * Each gives an upper bound on the room (a spawn that would fit is never
 * refused; one that passes can still meet KB_EAGAIN as threads are
 * created). The library's own limit is nprocs's type, int. Nothing is read
 * when ctx's parked threads suffice. KB_EINVAL as kb_spawn (nprocs < 0,
 * bad opts; also why NULL with why_size > 0), KB_ENOTSUP, KB_EPERM from a
 * rank, KB_EBUSY while ctx is busy or from an engine hook.
 */
KB_API int kb_spawn_check(const kb_ctx *ctx, int nprocs, const kb_spawn_opts *opts, char *why,
                          size_t why_size);

/** A spawn started with kb_start (join=False). */
typedef struct kb_process_context kb_process_context;

/** Create and bind the ranks of a spawn without running them; the ctx is busy
 *  until kb_process_context_free. The errors kb_spawn gives before any rank
 *  ran; the failures come from kb_join. */
KB_API int kb_start(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
                    kb_process_context **out);

/**
 * Drive rounds on the calling thread (any thread, one at a time) until every
 * rank finished (1), the timeout passed at the end of a round, after its
 * drain (0; at least one round per call), or failure (KB_ESPAWN,
 * KB_ETIMEDOUT, KB_EDIVERGED or KB_ENOMEM, with *err set, as for kb_spawn).
 * timeout_ms < 0: no limit. Once finished it returns the same result again
 * with *err NULL. KB_EINVAL for a NULL pc, KB_EPERM from a rank, KB_EBUSY
 * from an engine hook or while another thread is joining.
 *
 * A timed join costs what kb_spawn costs: ranks hand the baton on across
 * rounds with nothing to drain without waking the driver, which sleeps
 * until the deadline at most. The call then returns at the end of the first
 * round that ends after the deadline (a round that runs long delays it);
 * timeout_ms 0 runs exactly one round.
 */
KB_API int kb_join(kb_process_context *pc, long timeout_ms, kb_spawn_error **err);

/** The statistics of a process context so far (rounds, turns, ... as in
 *  kb_spawn_stats, per-rank arrays filled when given). KB_EINVAL for NULL
 *  arguments; KB_EBUSY while another thread joins it. */
KB_API int kb_process_context_stats(kb_process_context *pc, kb_spawn_stats *stats);

/** Free a process context. A live one (ranks not finished, no failure
 *  reported): cancel live ranks in rank order (cleanup runs), engine abort,
 *  clear both queues, join threads. NULL: no-op. From a rank or an engine
 *  hook: a program error (diagnostic, abort()). */
KB_API void kb_process_context_free(kb_process_context *pc);

#ifdef __cplusplus
}
#endif

#endif /* KBTHREADS_H */
