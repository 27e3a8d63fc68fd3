/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel: the package's compiled part, always present, and the
 * binding's only way into libkbthreads: every call the Python code makes
 * on the library is made here, from include/kbthreads.h's declarations
 * (no ctypes, no copied constants: the KB_* constants below are the
 * header's macros). This file: the module, its constants, the
 * where-am-I queries and the suspension points (kbthreads.yield_,
 * kbthreads.barrier). _accel_core.c: a Context's Core (its kb_ctx, queues,
 * waits); _accel_handles.c: handle ids; _accel_hooks.c: the engine hooks;
 * _accel_spawn.c: spawning, joining, the failure report; _accel_frames.c:
 * the Python frames writer of the stall and crash reports and
 * kbthreads-dump.
 *
 * Why C for all of it: a ctypes foreign call costs several times a
 * C-level call from Python, and a ctypes callback (a rank's entry, the
 * engine's wait hook once per drained handle) more still, through libffi
 * (bench/report-notes.md has the counts).
 *
 * One library: this module is linked with libkbthreads. A pip-built
 * package compiles the library into this module; the CMake build links it
 * with the libkbthreads.so built or installed beside it.
 *
 * Threads: see _accel.h (the GIL is released around every library call
 * that may block or run an engine hook, as ctypes did).
 */
#include "_accel.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

static PyObject *kb_error; /* kbthreads._errors.KbError(code, what), given by init() */
PyObject *accel_str_engine, *accel_str_wait, *accel_str_driver_wait, *accel_str_meta;
PyObject *accel_str_engine_takes_meta;
PyObject *accel_str_bind_hook, *accel_str_abort_hook;

/* ---- errors ------------------------------------------------------------------ */

/* Raise KbError(rc, what). Returns NULL. */
PyObject *accel_raise_kb_error(int rc, const char *what)
{
    if (!kb_error) {
        PyErr_SetString(PyExc_RuntimeError, "kbthreads._accel: init() was not called");
        return NULL;
    }
    PyObject *e = PyObject_CallFunction(kb_error, "is", rc, what);
    if (e) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
    return NULL;
}

/* The answer of a suspension point: None, or SystemExit when the rank is
 * being cancelled, RuntimeError outside a rank, KbError otherwise. */
static PyObject *suspension_result(int rc, const char *what)
{
    if (rc == 0)
        Py_RETURN_NONE;
    if (rc == KB_ECANCELED) {
        PyErr_SetNone(PyExc_SystemExit);
        return NULL;
    }
    if (rc == KB_EPERM) {
        PyErr_Format(PyExc_RuntimeError, "kbthreads.%s() called outside a rank", what);
        return NULL;
    }
    return accel_raise_kb_error(rc, what);
}

/* A suspension point: fn (kb_yield or kb_barrier) with the GIL released. */
static PyObject *suspend(int (*fn)(void), const char *what)
{
    PyThreadState *ts = PyEval_SaveThread();
    int rc = fn();
    PyEval_RestoreThread(ts);
    if (accel_resumed(rc) < 0)
        return NULL;
    return suspension_result(rc, what);
}

/* ---- the switch hook ------------------------------------------------------------
 *
 * kbthreads.torch keeps process-wide state (sys.argv, os.environ, torch's
 * generator, ...) per rank by swapping it when another thread takes the
 * baton. The hook is a Python callable, None until set_switch_hook installs
 * one (so a plain spawn pays one load and branch per resumption). A rank
 * that resumes at a suspension point calls it when the last thread noted
 * (by an earlier resumption or note_switch) is another one: the hook then
 * saves the process's state for its previous owner and loads the rank's.
 * Threads are told apart by PyThreadState_GetID, which the interpreter
 * never reuses (a rank thread parked for a context's next spawn gets a new
 * thread state, so a new id, at its next entry). Both statics are read and
 * written only with the GIL held. */
PyObject *accel_switch_hook;
static uint64_t switch_last; /* the id of the thread state noted last; 0: none */

int accel_switch_run(int rc)
{
    uint64_t me = PyThreadState_GetID(PyThreadState_Get());
    if (me == switch_last)
        return 0;
    switch_last = me;
    PyObject *hook = Py_NewRef(accel_switch_hook); /* it may remove itself */
    PyObject *r = PyObject_CallNoArgs(hook);
    if (r) {
        Py_DECREF(r);
        Py_DECREF(hook);
        return 0;
    }
    if (rc != 0) { /* the suspension's own error (SystemExit when cancelled) is the one raised */
        PyErr_WriteUnraisable(hook);
        Py_DECREF(hook);
        return 0;
    }
    Py_DECREF(hook);
    return -1;
}

/* set_switch_hook(hook or None): install or remove the hook; no thread is
 * noted afterwards, so the next resumption calls the new hook. */
static PyObject *accel_set_switch_hook(PyObject *mod, PyObject *hook)
{
    (void)mod;
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "set_switch_hook: hook must be callable or None, not %.100s",
                     Py_TYPE(hook)->tp_name);
        return NULL;
    }
    Py_XSETREF(accel_switch_hook, hook == Py_None ? NULL : Py_NewRef(hook));
    switch_last = 0;
    Py_RETURN_NONE;
}

/* note_switch(): the calling thread is noted as the last to run (it loaded
 * its own state itself: a rank that starts, a driver that took the process
 * back), so a rank resuming next calls the hook. */
static PyObject *accel_note_switch(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    switch_last = PyThreadState_GetID(PyThreadState_Get());
    Py_RETURN_NONE;
}

static PyObject *accel_yield(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return suspend(kb_yield, "yield_");
}

static PyObject *accel_barrier(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return suspend(kb_barrier, "barrier");
}

/* ---- module functions --------------------------------------------------------- */

static PyObject *accel_in_hook(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyBool_FromLong(kb_in_hook());
}

/* init(KbError): the binding's error class. */
static PyObject *accel_init(PyObject *mod, PyObject *err)
{
    (void)mod;
    Py_XSETREF(kb_error, Py_NewRef(err));
    Py_RETURN_NONE;
}

static PyObject *accel_rank(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromLong(kb_rank());
}

static PyObject *accel_world_size(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromLong(kb_world_size());
}

static PyObject *accel_cancelled(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyBool_FromLong(kb_cancelled());
}

static PyObject *accel_features(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromUnsignedLong(kb_features());
}

static PyObject *accel_version(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(kb_version());
}

static PyObject *accel_strerror(PyObject *mod, PyObject *code)
{
    (void)mod;
    int overflow;
    long c = PyLong_AsLongAndOverflow(code, &overflow);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    const char *s = kb_strerror(overflow || c < INT_MIN || c > INT_MAX ? INT_MIN : (int)c);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyMethodDef accel_methods[] = {
    {"init", accel_init, METH_O, "init(KbError): the binding's error class."},
    {"yield_", accel_yield, METH_NOARGS, "kb_yield, raising as kbthreads.yield_ does."},
    {"barrier", accel_barrier, METH_NOARGS, "kb_barrier, raising as kbthreads.barrier does."},
    {"set_switch_hook", accel_set_switch_hook, METH_O,
     "set_switch_hook(hook or None): hook() runs on a rank that resumes at a suspension point after "
     "another thread ran."},
    {"note_switch", accel_note_switch, METH_NOARGS,
     "note_switch(): the calling thread is the last to run (the next rank to resume calls the hook)."},
    {"in_hook", accel_in_hook, METH_NOARGS, "kb_in_hook(): True while this thread runs an engine hook."},
    {"rank", accel_rank, METH_NOARGS, "kb_rank(): this thread's rank, or -1."},
    {"world_size", accel_world_size, METH_NOARGS, "kb_world_size(): the ranks of this rank's spawn, or 0."},
    {"cancelled", accel_cancelled, METH_NOARGS, "kb_cancelled(): this rank is being cancelled."},
    {"features", accel_features, METH_NOARGS, "kb_features(): an OR of KB_FEATURE_* bits."},
    {"version", accel_version, METH_NOARGS, "kb_version(): the library's version string."},
    {"strerror", accel_strerror, METH_O, "kb_strerror(code): a description of a KB_E* code."},
    {"join", accel_join, METH_VARARGS,
     "join(pc, timeout_ms) -> (rc, report): kb_join; report None or (code, message, ranks, drain_code, "
     "drain_handle, live, turn), the kb_spawn_error read and freed."},
    {"process_context_stats", accel_process_context_stats, METH_O,
     "process_context_stats(pc) -> (rounds, turns, handoffs, drains, engine_waits, collectives, wall_ns, "
     "wait_mode, wait_reactive, wait_switches, wait_ns): kb_process_context_stats."},
    {"process_context_free", accel_process_context_free, METH_O, "kb_process_context_free(pc)."},
    {"spawn_check", accel_spawn_check, METH_VARARGS,
     "spawn_check(core or None, nprocs, stack_size) -> (rc, why): kb_spawn_check with the binding's "
     "options."},
    {"ctx_reset", accel_ctx_reset, METH_O, "ctx_reset(core): kb_ctx_reset; KbError on failure."},
    {"ctx_dump", accel_ctx_dump, METH_VARARGS,
     "ctx_dump(core, fd, flags): kb_ctx_dump, every rank's state and frames written to fd."},
    {"rank_running", accel_rank_running, METH_O,
     "rank_running(flag): this rank's body starts (True) or ends (False) taking Ctrl-C."},
    {"interrupt_begin", accel_interrupt_begin, METH_VARARGS,
     "interrupt_begin(core, pc, grace_ms, presses) -> bool: Ctrl-C goes to the running rank (or ends the "
     "process) until interrupt_end()."},
    {"interrupt_end", accel_interrupt_end, METH_NOARGS,
     "interrupt_end() -> (presses, delivered): Python's SIGINT handler back."},
    {"set_frames_writer", accel_set_frames_writer, METH_VARARGS,
     "set_frames_writer(fd, signum): kb_set_frames_writer with the Python frames writer, which reads "
     "the stack faulthandler writes to fd on signum."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef accel_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kbthreads._accel",
    .m_doc = "The kbthreads binding's compiled part: its one way into libkbthreads.",
    .m_size = -1,
    .m_methods = accel_methods,
};

/* The header's constants, by their names there: each macro's own value. */
#define CONSTANT(m, name)   (PyModule_AddIntConstant(m, #name, (long)(name)) < 0)
#define ERROR_NAME(d, name) (add_error_name(d, name, #name) < 0)

/* errorcode[code] = "KB_E...": like errno.errorcode, for the KB_E* codes. */
static int add_error_name(PyObject *d, int code, const char *name)
{
    PyObject *k = PyLong_FromLong(code), *v = PyUnicode_FromString(name);
    int rc = k && v ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return rc;
}

static int add_error_codes(PyObject *m)
{
    PyObject *d = PyDict_New();
    if (!d || CONSTANT(m, KB_EINVAL) || CONSTANT(m, KB_ENOMEM) || CONSTANT(m, KB_EAGAIN) ||
        CONSTANT(m, KB_EBUSY) || CONSTANT(m, KB_EPERM) || CONSTANT(m, KB_ECANCELED) ||
        CONSTANT(m, KB_ESPAWN) || CONSTANT(m, KB_ETIMEDOUT) || CONSTANT(m, KB_EDIVERGED) ||
        CONSTANT(m, KB_EEXITED) || CONSTANT(m, KB_ENOTSUP) || ERROR_NAME(d, KB_EINVAL) ||
        ERROR_NAME(d, KB_ENOMEM) || ERROR_NAME(d, KB_EAGAIN) || ERROR_NAME(d, KB_EBUSY) ||
        ERROR_NAME(d, KB_EPERM) || ERROR_NAME(d, KB_ECANCELED) || ERROR_NAME(d, KB_ESPAWN) ||
        ERROR_NAME(d, KB_ETIMEDOUT) || ERROR_NAME(d, KB_EDIVERGED) || ERROR_NAME(d, KB_EEXITED) ||
        ERROR_NAME(d, KB_ENOTSUP) || PyModule_AddObjectRef(m, "errorcode", d) < 0) {
        Py_XDECREF(d);
        return -1;
    }
    Py_DECREF(d);
    return 0;
}

static int add_constants(PyObject *m)
{
    if (add_error_codes(m) < 0)
        return -1;
    return CONSTANT(m, KB_WAIT_QUEUED) || CONSTANT(m, KB_WAIT_COLLECTIVE) || CONSTANT(m, KB_WAIT_DRIVER) ||
                   CONSTANT(m, KB_CANCEL_UNWIND) || CONSTANT(m, KB_CANCEL_RETURN) ||
                   CONSTANT(m, KB_AT_START) || CONSTANT(m, KB_AT_YIELD) || CONSTANT(m, KB_AT_WAIT) ||
                   CONSTANT(m, KB_AT_BARRIER) || CONSTANT(m, KB_WAIT_SLEEP) || CONSTANT(m, KB_WAIT_LOOK) ||
                   CONSTANT(m, KB_WAIT_NUDGE) || CONSTANT(m, KB_WAIT_SPIN) ||
                   CONSTANT(m, KB_FEATURE_AFFINITY) || CONSTANT(m, KB_FEATURE_THREAD_NAMES) ||
                   CONSTANT(m, KB_FEATURE_BACKTRACE) || CONSTANT(m, KB_FEATURE_THREAD_IDS) ||
                   CONSTANT(m, KB_FEATURE_GDB_SECTION) || CONSTANT(m, KB_VERSION_MAJOR) ||
                   CONSTANT(m, KB_RUNNING_DRIVER) || CONSTANT(m, KB_DUMP_C_FRAMES) ||
                   CONSTANT(m, KB_DUMP_HOLDER_C_FRAMES)
               ? -1
               : 0;
}

static int intern_names(void)
{
    accel_str_engine = PyUnicode_InternFromString("engine");
    accel_str_wait = PyUnicode_InternFromString("wait");
    accel_str_driver_wait = PyUnicode_InternFromString("_driver_wait");
    accel_str_meta = PyUnicode_InternFromString("_meta");
    accel_str_engine_takes_meta = PyUnicode_InternFromString("_engine_takes_meta");
    accel_str_bind_hook = PyUnicode_InternFromString("_bind_hook");
    accel_str_abort_hook = PyUnicode_InternFromString("_abort_hook");
    return accel_str_engine && accel_str_wait && accel_str_driver_wait && accel_str_meta &&
                   accel_str_engine_takes_meta && accel_str_bind_hook && accel_str_abort_hook
               ? 0
               : -1;
}

PyMODINIT_FUNC PyInit__accel(void);
PyMODINIT_FUNC PyInit__accel(void)
{
    if (PyType_Ready(&accel_core_type) < 0 || intern_names() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&accel_module);
    if (m && (PyModule_AddObjectRef(m, "Core", (PyObject *)&accel_core_type) < 0 || add_constants(m) < 0))
        Py_CLEAR(m);
    return m;
}
