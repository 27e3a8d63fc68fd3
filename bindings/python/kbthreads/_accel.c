/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel: the package's compiled part, always present, and the
 * binding's only way into libkbthreads: every call the Python code makes
 * on the library is made here, from include/kbthreads.h's declarations
 * (no ctypes, no copied constants: the KB_* constants below are the
 * header's macros). This file: the module, its constants, the
 * where-am-I queries, the suspension points (kbthreads.yield_,
 * kbthreads.barrier) and the state switch a rank runs when it resumes
 * (kbthreads.torch's per-rank process state). _accel_core.c: a Context's Core (its kb_ctx, queues,
 * waits); _accel_handles.c: handle ids; _accel_hooks.c: the engine hooks;
 * _accel_spawn.c: spawning, joining, the failure report; _accel_frames.c:
 * the Python frames writer of the stall and crash reports and
 * kbthreads-dump.
 *
 * Why C for all of it: a ctypes foreign call costs several times a
 * C-level call from Python, and a ctypes callback (a rank's entry, the
 * engine's wait hook once per drained handle) more still, through libffi
 * (docs/benchmarks-history.md has the counts).
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

/* ---- the state switch -------------------------------------------------------------
 *
 * kbthreads.torch keeps process-wide state per rank (sys.argv, os.environ,
 * torch's generator, ...) by swapping it when another thread takes the
 * baton. What is swapped is a table set up by switch_setup: places, each a
 * (dict, key) pair (sys.__dict__["argv"], sys.modules["__main__"], ...),
 * and accessors, each a (get, set) pair of callables (torch's generator
 * state). A record is a list holding one value per place then one per
 * accessor (the sentinel `absent` for a key not in its dict). One record,
 * the owner, has its values in the process; every other holds its own.
 *
 * A thread bound to a record (switch_bind: a rank, at its start) that
 * resumes at a suspension point after another thread was noted (by a
 * resumption or switch_take) takes the process over: it saves the
 * process's values into the owner's record, loads its own, and becomes the
 * owner (the "lazy save": a record's values are read only when another
 * needs the process). Without a table (a plain spawn) a resumption pays
 * one load and branch; a rank resuming after itself (N = 1, or the driver
 * did not run Python in between) pays an id compare. Threads are told
 * apart by PyThreadState_GetID, which the interpreter never reuses (a
 * parked rank thread gets a new thread state at its next entry).
 *
 * The swap runs with the GIL held and, its accessors being C functions
 * (torch's), runs no bytecode until the process holds the new owner's
 * values throughout (old values are released last), so no other thread,
 * signal handler or asynchronous exception sees half a swap. Everything
 * here is read and written with the GIL held. */
#define SWITCH_MAX 16 /* places + accessors */

int accel_switch_on; /* a table is set up */
static PyObject *sw_places, *sw_accessors, *sw_owner, *sw_absent;
static uint64_t sw_last;                 /* the id of the thread state noted last; 0: none */
static _Thread_local PyObject *sw_bound; /* this thread's record (a strong reference), or NULL */

static int record_ok(PyObject *rec)
{
    Py_ssize_t n = PyTuple_GET_SIZE(sw_places) + PyTuple_GET_SIZE(sw_accessors);
    if (PyList_CheckExact(rec) && PyList_GET_SIZE(rec) == n)
        return 0;
    PyErr_Format(PyExc_ValueError, "kbthreads._accel: a switch record is a list of %zd values", n);
    return -1;
}

/* The process's values become rec's; rec becomes the owner. */
static int swap_to(PyObject *rec)
{
    if (rec == sw_owner)
        return 0;
    if (record_ok(rec) < 0)
        return -1;
    Py_ssize_t np = PyTuple_GET_SIZE(sw_places), na = PyTuple_GET_SIZE(sw_accessors), k = 0;
    PyObject *cur[SWITCH_MAX]; /* the process's values now: new references */
    for (; k < np; k++) {      /* reading them changes nothing */
        PyObject *place = PyTuple_GET_ITEM(sw_places, k);
        PyObject *v = PyDict_GetItemWithError(PyTuple_GET_ITEM(place, 0), PyTuple_GET_ITEM(place, 1));
        if (!v && PyErr_Occurred())
            goto fail;
        cur[k] = Py_NewRef(v ? v : sw_absent);
    }
    for (; k < np + na; k++) {
        cur[k] = PyObject_CallNoArgs(PyTuple_GET_ITEM(PyTuple_GET_ITEM(sw_accessors, k - np), 0));
        if (!cur[k])
            goto fail;
    }
    /* the setters (torch's set_state fails only for a bad state) before any place moves */
    for (Py_ssize_t j = 0; j < na; j++) {
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(PyTuple_GET_ITEM(sw_accessors, j), 1),
                                          PyList_GET_ITEM(rec, np + j));
        if (!r)
            goto fail;
        Py_DECREF(r);
    }
    for (Py_ssize_t i = 0; i < np; i++) { /* the previous values stay referenced by cur: nothing is freed */
        PyObject *place = PyTuple_GET_ITEM(sw_places, i), *d = PyTuple_GET_ITEM(place, 0);
        PyObject *key = PyTuple_GET_ITEM(place, 1), *v = PyList_GET_ITEM(rec, i);
        int rc = v == sw_absent ? PyDict_DelItem(d, key) : PyDict_SetItem(d, key, v);
        if (rc < 0 && v == sw_absent && PyErr_ExceptionMatches(PyExc_KeyError))
            PyErr_Clear();
        else if (rc < 0) /* out of memory: the table is half swapped, as little as can be done about it */
            goto fail;
    }
    PyObject *old = sw_owner;
    sw_owner = Py_NewRef(rec);
    for (Py_ssize_t i = 0; i < np + na; i++) /* last: dropping old values may run any code */
        PyList_SetItem(old, i, cur[i]);
    Py_DECREF(old);
    return 0;
fail:
    while (k > 0)
        Py_DECREF(cur[--k]);
    return -1;
}

int accel_switch_run(int rc)
{
    PyObject *mine = sw_bound;
    if (!mine)
        return 0; /* a thread with no record: a rank of a plain spawn */
    uint64_t me = PyThreadState_GetID(PyThreadState_Get());
    if (me == sw_last)
        return 0;
    sw_last = me;
    Py_INCREF(mine);
    int r = swap_to(mine);
    if (r < 0 && rc != 0) { /* the suspension's own error (SystemExit when cancelled) is the one raised */
        PyErr_WriteUnraisable(mine);
        r = 0;
    }
    Py_DECREF(mine);
    return r;
}

/* switch_setup(places, accessors, owner, absent): the table, and the
 * record whose values the process holds now. */
static PyObject *accel_switch_setup(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *places, *accessors, *owner, *absent;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyTuple_Type, &places, &PyTuple_Type, &accessors, &PyList_Type,
                          &owner, &absent))
        return NULL;
    Py_ssize_t np = PyTuple_GET_SIZE(places), na = PyTuple_GET_SIZE(accessors);
    for (Py_ssize_t i = 0; i < np + na; i++) {
        PyObject *t = i < np ? PyTuple_GET_ITEM(places, i) : PyTuple_GET_ITEM(accessors, i - np);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 2 ||
            (i < np
                 ? !PyDict_Check(PyTuple_GET_ITEM(t, 0))
                 : !PyCallable_Check(PyTuple_GET_ITEM(t, 0)) || !PyCallable_Check(PyTuple_GET_ITEM(t, 1)))) {
            PyErr_SetString(PyExc_TypeError, "switch_setup: places are (dict, key), accessors (get, set)");
            return NULL;
        }
    }
    if (np + na > SWITCH_MAX || PyList_GET_SIZE(owner) != np + na) {
        PyErr_Format(PyExc_ValueError, "switch_setup: at most %d values, and an owner holding one each",
                     SWITCH_MAX);
        return NULL;
    }
    Py_XSETREF(sw_places, Py_NewRef(places));
    Py_XSETREF(sw_accessors, Py_NewRef(accessors));
    Py_XSETREF(sw_owner, Py_NewRef(owner));
    Py_XSETREF(sw_absent, Py_NewRef(absent));
    sw_last = 0;
    accel_switch_on = 1;
    Py_RETURN_NONE;
}

/* switch_clear(): no table; the process keeps the owner's values. */
static PyObject *accel_switch_clear(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    accel_switch_on = 0;
    sw_last = 0;
    Py_CLEAR(sw_places);
    Py_CLEAR(sw_accessors);
    Py_CLEAR(sw_owner);
    Py_CLEAR(sw_absent);
    Py_RETURN_NONE;
}

/* switch_bind(record or None): the calling thread's record (a rank's, at
 * its start and, None, at its end). */
static PyObject *accel_switch_bind(PyObject *mod, PyObject *rec)
{
    (void)mod;
    if (rec != Py_None && !PyList_CheckExact(rec)) {
        PyErr_SetString(PyExc_TypeError, "switch_bind: a record (a list) or None");
        return NULL;
    }
    PyObject *old = sw_bound;
    sw_bound = rec == Py_None ? NULL : Py_NewRef(rec);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* switch_take(record): the calling thread takes the process over for
 * record now (a rank that starts, a driver taking it back for its
 * caller), and is noted as the last to run. */
static PyObject *accel_switch_take(PyObject *mod, PyObject *rec)
{
    (void)mod;
    if (!accel_switch_on) {
        PyErr_SetString(PyExc_RuntimeError, "switch_take: no switch table is set up");
        return NULL;
    }
    Py_INCREF(rec);
    int r = swap_to(rec);
    Py_DECREF(rec);
    if (r < 0)
        return NULL;
    sw_last = PyThreadState_GetID(PyThreadState_Get());
    Py_RETURN_NONE;
}

/* switch_owner(): the record whose values the process holds, or None. */
static PyObject *accel_switch_owner(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return Py_NewRef(sw_owner ? sw_owner : Py_None);
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
    {"switch_setup", accel_switch_setup, METH_VARARGS,
     "switch_setup(places, accessors, owner, absent): the process-wide values a rank's resumption swaps."},
    {"switch_clear", accel_switch_clear, METH_NOARGS, "switch_clear(): no more swaps."},
    {"switch_bind", accel_switch_bind, METH_O, "switch_bind(record or None): the calling thread's record."},
    {"switch_take", accel_switch_take, METH_O,
     "switch_take(record): the calling thread takes the process over for record now."},
    {"switch_owner", accel_switch_owner, METH_NOARGS,
     "switch_owner(): the record the process holds, or None."},
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
