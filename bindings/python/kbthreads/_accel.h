/* SPDX-License-Identifier: MIT */
/*
 * What the files of kbthreads._accel share (one extension module in three
 * files: _accel.c the module, its constants and the suspension points;
 * _accel_core.c a Context's Core, its handle ids, queues and engine hooks;
 * _accel_spawn.c spawning, joining and the failure report; _accel_frames.c
 * the Python frames writer).
 *
 * Threads: every function runs on the thread that called it with the GIL
 * held, and releases it around every library call that may block or run
 * an engine hook (kb_yield, kb_barrier, kb_wait, kb_start, kb_join,
 * kb_process_context_free, kb_ctx_destroy), so that the thread that gets
 * the baton can take the GIL. The C hooks and a rank's entry run on
 * threads that released it (or never had it) and take it.
 */
#ifndef KBTHREADS_ACCEL_H
#define KBTHREADS_ACCEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <kbthreads.h>

/* One per kbthreads.Context: its kb_ctx (whose engine self this Core is)
 * and the dicts _context.py reads too (handle ids both ways, collective
 * metas by token, engine exceptions stashed by code). */
typedef struct {
    PyObject ob_base; /* PyObject_HEAD */
    kb_ctx *ctx;
    PyObject *context; /* the kbthreads.Context (a cycle the GC sees: traverse/clear) */
    PyObject *h2id, *id2h, *metas, *stash;
    unsigned long long next_id;
    unsigned long next_code;
    int wait_overridden; /* type(context).wait is not Context.wait */
} Core;

/* Int handles below this are their own ids; table ids start here. */
#define ACCEL_INT_IDS (1ULL << 63)

extern PyTypeObject accel_core_type;

/* Interned attribute names (made by the module's init). */
extern PyObject *accel_str_engine, *accel_str_wait, *accel_str_driver_wait, *accel_str_meta;
extern PyObject *accel_str_engine_takes_meta;
extern PyObject *accel_str_bind_hook, *accel_str_abort_hook;

/* _accel.c, the state switch (switch_setup): a rank calls
 * accel_resumed(rc) with the GIL held right after it took the baton back
 * at a suspension point (rc: the suspension's own result). It returns 0,
 * or -1 with an exception set when the swap failed (only when rc is 0: a
 * swap failing in a failed suspension is written as unraisable, and the
 * suspension's error is the one raised). */
extern int accel_switch_on;
int accel_switch_run(int rc);
static inline int accel_resumed(int rc)
{
    return accel_switch_on ? accel_switch_run(rc) : 0;
}

/* Raise KbError(rc, what). Returns NULL. */
PyObject *accel_raise_kb_error(int rc, const char *what);

/* _accel_handles.c: the id of handle h (create 0: None for a handle never
 * seen), Core.id, Core.known_id, Core.handle, and an id's value. */
PyObject *accel_handle_id(Core *c, PyObject *h, int create);
PyObject *accel_core_id(Core *c, PyObject *h);
PyObject *accel_core_known_id(Core *c, PyObject *h);
PyObject *accel_core_handle(Core *c, PyObject *i);
int accel_parse_id(PyObject *i, kb_handle *out);

/* _accel_hooks.c: the engine of c's kb_ctx (self c, the C hooks). */
kb_engine accel_engine(Core *c);

/* Core.start(entry, nprocs, stack_size) -> (rc, pc address). */
PyObject *accel_core_start(Core *c, PyObject *args);
/* join(pc, timeout_ms) -> (rc, report or None); the report is freed. */
PyObject *accel_join(PyObject *mod, PyObject *args);
/* process_context_stats(pc) -> (rounds, turns, handoffs, drains,
 * engine_waits, collectives, wall_ns, wait_mode, wait_reactive,
 * wait_switches, {mode name: ns per handoff}). */
PyObject *accel_process_context_stats(PyObject *mod, PyObject *pc);
/* process_context_free(pc). */
PyObject *accel_process_context_free(PyObject *mod, PyObject *pc);
/* spawn_check(core or None, nprocs, stack_size) -> (rc, why). */
PyObject *accel_spawn_check(PyObject *mod, PyObject *args);
/* rank_running(flag): a rank's body may take Ctrl-C's KeyboardInterrupt. */
PyObject *accel_rank_running(PyObject *mod, PyObject *flag);
/* ctx_dump(core, fd, flags). */
PyObject *accel_ctx_dump(PyObject *mod, PyObject *args);
/* ctx_reset(core). */
PyObject *accel_ctx_reset(PyObject *mod, PyObject *core);
/* interrupt_begin(core, pc, grace_ms, presses) -> bool; interrupt_end()
 * -> (presses, delivered): Ctrl-C while the main thread drives a spawn. */
PyObject *accel_interrupt_begin(PyObject *mod, PyObject *args);
PyObject *accel_interrupt_end(PyObject *mod, PyObject *unused);

/* _accel_frames.c: set_frames_writer(fd, signum). */
PyObject *accel_set_frames_writer(PyObject *mod, PyObject *args);

#endif /* KBTHREADS_ACCEL_H */
