/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel, spawning: kb_start with the binding's options, a
 * rank's entry, kb_join and its failure report as Python values, and
 * freeing a process context. Process contexts travel to Python as their
 * address (an int): only the package's _spawn.py holds them.
 */
#include "_accel.h"

#include <string.h>

/* What a rank returns when its Python entry itself failed to run. */
#define RC_FAILED 1

/* A rank's entry: arg is the Python callable entry(rank) -> int, kept
 * alive by its _Run until the process context is freed. The rank thread
 * holds the baton but not the GIL. */
static int rank_entry(int rank, void *arg)
{
    PyObject *entry = arg;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = RC_FAILED;
    PyObject *r = PyObject_CallFunction(entry, "i", rank);
    if (r) {
        long v = PyLong_AsLong(r);
        rc = v == -1 && PyErr_Occurred() ? RC_FAILED : (int)v;
        Py_DECREF(r);
    }
    if (PyErr_Occurred()) /* the entry catches everything: nothing may escape into C */
        PyErr_WriteUnraisable(entry);
    PyGILState_Release(g);
    return rc;
}

PyObject *accel_core_start(Core *c, PyObject *args)
{
    PyObject *entry;
    int nprocs;
    Py_ssize_t stack_size;
    if (!PyArg_ParseTuple(args, "Oin", &entry, &nprocs, &stack_size))
        return NULL;
    if (!PyCallable_Check(entry) || stack_size < 0) {
        PyErr_SetString(PyExc_TypeError, "start(entry, nprocs, stack_size)");
        return NULL;
    }
    /* The options this binding sets; every other field zero, its default
     * (so KB_STALL_MS, KB_MAX_ROUNDS, KB_REPLAY, ... still apply). */
    kb_spawn_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.stack_size = (size_t)stack_size;
    opts.cancel_mode = KB_CANCEL_RETURN; /* no C unwinding crosses a Python frame */
    kb_process_context *pc = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* the bind hooks take the GIL */
        rc = kb_start(c->ctx, rank_entry, entry, nprocs, &opts, &pc);
    Py_END_ALLOW_THREADS return Py_BuildValue("(iN)", rc, PyLong_FromVoidPtr(pc));
}

static kb_process_context *parse_pc(PyObject *addr)
{
    void *p = PyLong_AsVoidPtr(addr);
    if (!p && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "kbthreads._accel: no process context");
    return p;
}

/* [(rank, code, message)] of the root-cause ranks, in recording order. */
static PyObject *report_ranks(const kb_spawn_error *e)
{
    size_t n = kb_spawn_error_count(e);
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < n; i++) {
        const kb_rank_error *r = kb_spawn_error_get(e, i);
        PyObject *t =
            Py_BuildValue("(iiN)", r->rank, r->code,
                          PyUnicode_DecodeUTF8(r->message, (Py_ssize_t)strlen(r->message), "replace"));
        if (!t || PyList_Append(list, t) < 0)
            Py_CLEAR(list);
        Py_XDECREF(t);
    }
    return list;
}

/* [(rank, where, handle id)] of the ranks live when the spawn stopped. */
static PyObject *report_live(const kb_spawn_error *e)
{
    size_t n = kb_spawn_error_live_count(e);
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < n; i++) {
        const kb_live_rank *r = kb_spawn_error_live_get(e, i);
        PyObject *t = Py_BuildValue("(iiK)", r->rank, (int)r->where, (unsigned long long)r->handle);
        if (!t || PyList_Append(list, t) < 0)
            Py_CLEAR(list);
        Py_XDECREF(t);
    }
    return list;
}

/* The report as (code, message, ranks, drain_code, drain_handle, live,
 * turn); None for a NULL report (it could not be allocated). */
static PyObject *report_value(const kb_spawn_error *e)
{
    if (!e)
        Py_RETURN_NONE;
    const char *msg = kb_spawn_error_message(e);
    return Py_BuildValue("(iNNiKNK)", kb_spawn_error_code(e),
                         PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace"), report_ranks(e),
                         kb_spawn_error_drain_code(e), (unsigned long long)kb_spawn_error_drain_handle(e),
                         report_live(e), (unsigned long long)kb_spawn_error_turn(e));
}

PyObject *accel_join(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *addr;
    long ms;
    if (!PyArg_ParseTuple(args, "Ol", &addr, &ms))
        return NULL;
    kb_process_context *pc = parse_pc(addr);
    if (!pc)
        return NULL;
    kb_spawn_error *err = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* the ranks and the engine hooks take the GIL */
        rc = kb_join(pc, ms, &err);
    Py_END_ALLOW_THREADS PyObject *report = report_value(err);
    kb_spawn_error_free(err); /* read into report: the caller never sees it */
    return report ? Py_BuildValue("(iN)", rc, report) : NULL;
}

PyObject *accel_process_context_stats(PyObject *mod, PyObject *addr)
{
    (void)mod;
    kb_process_context *pc = parse_pc(addr);
    if (!pc)
        return NULL;
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    int rc = kb_process_context_stats(pc, &st);
    if (rc != 0)
        return accel_raise_kb_error(rc, "process_context_stats");
    PyObject *ns = PyDict_New();
    for (int m = 0; ns && m < KB_WAIT_MODES; m++) {
        PyObject *v = PyLong_FromUnsignedLongLong((unsigned long long)st.wait_ns[m]);
        if (!v || PyDict_SetItemString(ns, kb_wait_mode_name(m), v) < 0)
            Py_CLEAR(ns);
        Py_XDECREF(v);
    }
    if (!ns)
        return NULL;
    return Py_BuildValue("(KKKKKKKsNKKNK)", (unsigned long long)st.rounds, (unsigned long long)st.turns,
                         (unsigned long long)st.handoffs, (unsigned long long)st.drains,
                         (unsigned long long)st.engine_waits, (unsigned long long)st.collectives,
                         (unsigned long long)st.wall_ns, kb_wait_mode_name(st.wait_mode),
                         PyBool_FromLong(st.wait_reactive), (unsigned long long)st.wait_switches,
                         (unsigned long long)st.wait_probes, ns, (unsigned long long)st.wait_seats);
}

PyObject *accel_process_context_free(PyObject *mod, PyObject *addr)
{
    (void)mod;
    kb_process_context *pc = parse_pc(addr);
    if (!pc)
        return NULL;
    Py_BEGIN_ALLOW_THREADS /* cancelled ranks run their cleanup, the abort hook runs */
        kb_process_context_free(pc);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}
