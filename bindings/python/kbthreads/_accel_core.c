/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel, Core: one per kbthreads.Context. It owns the kb_ctx
 * (created with the C engine hooks, its engine self this Core) and makes
 * every call on it: a rank's ctx.wait and collective submit without Python
 * frames, the driver side's waits, the queues and the completed set. The
 * Context keeps its Core alive as long as the kb_ctx.
 */
#include "_accel.h"

#include <limits.h>

/* Raise what a failed ctx.wait raises for rc: SystemExit when the rank is
 * being cancelled, the engine's exception stashed under a positive code,
 * else KbError. Returns NULL. */
static PyObject *raise_rc(Core *c, int rc, const char *what)
{
    if (rc == KB_ECANCELED) {
        PyErr_SetNone(PyExc_SystemExit);
        return NULL;
    }
    if (rc > 0) {
        PyObject *key = PyLong_FromLong(rc);
        PyObject *stashed = key ? PyObject_CallMethod(c->stash, "pop", "OO", key, Py_None) : NULL;
        Py_XDECREF(key);
        if (!stashed)
            return NULL;
        if (PyTuple_Check(stashed) && PyTuple_GET_SIZE(stashed) >= 1) {
            PyObject *e = PyTuple_GET_ITEM(stashed, 0);
            PyErr_SetObject((PyObject *)Py_TYPE(e), e);
            Py_DECREF(stashed);
            return NULL;
        }
        Py_DECREF(stashed);
    }
    return accel_raise_kb_error(rc, what);
}

/* Core.wait(h, _meta=None): ctx.wait(h). On a rank: a completed handle
 * returns at once, without releasing the GIL (the reference's fast path,
 * checked first also in a cancelled rank, where kb_wait answers
 * KB_ECANCELED before it looks at the handle); else kb_wait, with the GIL
 * released. Off a rank: the Context's _driver_wait (the driver side,
 * under its lock). _meta is accepted and ignored (the drain passes it for
 * a collective, as the reference's does). */
static PyObject *core_wait(Core *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 1 || nargs + nkw > 2 ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "_meta") != 0)) {
        PyErr_SetString(PyExc_TypeError, "wait(h, _meta=None)");
        return NULL;
    }
    PyObject *i = accel_handle_id(c, args[0], 1);
    if (!i)
        return NULL;
    if (kb_rank() < 0) {
        PyObject *r = PyObject_CallMethodOneArg(c->context, accel_str_driver_wait, i);
        Py_DECREF(i);
        return r;
    }
    kb_handle id;
    int bad = accel_parse_id(i, &id);
    Py_DECREF(i);
    if (bad)
        return NULL;
    int rc = 0;
    if (kb_is_completed(c->ctx, id) != 1) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = kb_wait(c->ctx, id);
        PyEval_RestoreThread(ts);
        if (accel_resumed(rc) < 0)
            return NULL;
    }
    if (rc == 0)
        Py_RETURN_NONE;
    return raise_rc(c, rc, "wait");
}

/* Core.driver_wait(i): ctx.wait off a rank, for handle id i (the
 * Context's _driver_wait, under its lock): a completed handle returns at
 * once; else kb_wait (the engine's wait hook runs), with the GIL released.
 * Raises as a failed ctx.wait does. */
static PyObject *core_driver_wait(Core *c, PyObject *i)
{
    kb_handle id;
    if (accel_parse_id(i, &id) < 0)
        return NULL;
    if (kb_is_completed(c->ctx, id) == 1)
        Py_RETURN_NONE;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = kb_wait(c->ctx, id);
    Py_END_ALLOW_THREADS if (rc == 0) Py_RETURN_NONE;
    return raise_rc(c, rc, "wait");
}

/* Core.submit(h, sip_id, token): a rank's kb_collective_submit(ctx,
 * id(h), sip_id, token as meta), token an int or None (_containers.py keeps the
 * Python meta under it). 0 or a KB_E* code; NotImplemented off a rank
 * (the caller takes the driver path, with its lock), once sip_id passed
 * its checks. */
static PyObject *core_submit(Core *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "submit(h, sip_id, token)");
        return NULL;
    }
    /* sip_id: an integer (__index__: TypeError for a float, a str, None)
     * that fits a C int, checked here on the driver side too */
    int overflow;
    long sip = PyLong_AsLongAndOverflow(args[1], &overflow);
    if (sip == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || sip < INT_MIN || sip > INT_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "pending_collectives.append: sip_id must fit a C int (-2**31 .. 2**31-1)");
        return NULL;
    }
    void *token = args[2] == Py_None ? NULL : PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (kb_rank() < 0)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *i = accel_handle_id(c, args[0], 1);
    if (!i)
        return NULL;
    kb_handle id;
    int bad = accel_parse_id(i, &id);
    Py_DECREF(i);
    if (bad)
        return NULL;
    return PyLong_FromLong(kb_collective_submit(c->ctx, id, (int)sip, token));
}

/* Core(context, h2id, id2h, metas, stash, wait_overridden); create()
 * makes its kb_ctx. */
static PyObject *core_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)kwds;
    PyObject *context, *h2id, *id2h, *metas, *stash;
    int overridden;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!p", &context, &PyDict_Type, &h2id, &PyDict_Type, &id2h,
                          &PyDict_Type, &metas, &PyDict_Type, &stash, &overridden))
        return NULL;
    Core *c = (Core *)type->tp_alloc(type, 0);
    if (!c)
        return NULL;
    c->context = Py_NewRef(context);
    c->h2id = Py_NewRef(h2id);
    c->id2h = Py_NewRef(id2h);
    c->metas = Py_NewRef(metas);
    c->stash = Py_NewRef(stash);
    c->next_id = ACCEL_INT_IDS;
    c->next_code = 1;
    c->wait_overridden = overridden;
    return (PyObject *)c;
}

static int core_traverse(Core *c, visitproc visit, void *arg)
{
    Py_VISIT(c->context);
    Py_VISIT(c->h2id);
    Py_VISIT(c->id2h);
    Py_VISIT(c->metas);
    Py_VISIT(c->stash);
    return 0;
}

static int core_clear(Core *c)
{
    Py_CLEAR(c->context);
    Py_CLEAR(c->h2id);
    Py_CLEAR(c->id2h);
    Py_CLEAR(c->metas);
    Py_CLEAR(c->stash);
    return 0;
}

static void core_dealloc(Core *c)
{
    PyObject_GC_UnTrack(c);
    core_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* ---- the kb_ctx and the calls on it -------------------------------------------- */

/* Core.create() -> rc: kb_ctx_create with the C engine hooks. */
static PyObject *core_create(Core *c, PyObject *unused)
{
    (void)unused;
    if (c->ctx)
        return PyLong_FromLong(KB_EBUSY);
    kb_engine e = accel_engine(c);
    return PyLong_FromLong(kb_ctx_create(&e, &c->ctx));
}

/* Core.destroy() -> rc: kb_ctx_destroy (it joins the parked rank threads);
 * 0 for a Core whose kb_ctx is already gone. */
static PyObject *core_destroy(Core *c, PyObject *unused)
{
    (void)unused;
    if (!c->ctx)
        return PyLong_FromLong(0);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = kb_ctx_destroy(c->ctx);
    Py_END_ALLOW_THREADS if (rc == 0) c->ctx = NULL;
    return PyLong_FromLong(rc);
}

static PyObject *core_alive(Core *c, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(c->ctx != NULL);
}

/* Core.address() -> the kb_ctx's address, as the dump's run table shows it. */
static PyObject *core_address(Core *c, PyObject *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(c->ctx);
}

/* A call fn(ctx, id) on handle id i -> its rc (kb_enqueue_wait,
 * kb_complete, kb_is_completed: none blocks or runs a hook). */
static PyObject *id_call(Core *c, PyObject *i, int (*fn)(kb_ctx *, kb_handle))
{
    kb_handle id;
    if (accel_parse_id(i, &id) < 0)
        return NULL;
    return PyLong_FromLong(fn(c->ctx, id));
}

static int is_completed(kb_ctx *ctx, kb_handle h)
{
    return kb_is_completed(ctx, h);
}

static PyObject *core_enqueue_wait(Core *c, PyObject *i)
{
    return id_call(c, i, kb_enqueue_wait);
}

static PyObject *core_complete(Core *c, PyObject *i)
{
    return id_call(c, i, kb_complete);
}

static PyObject *core_is_completed(Core *c, PyObject *i)
{
    return id_call(c, i, is_completed);
}

/* Core.collective_submit(i, sip_id, token) -> rc: the driver side's
 * kb_collective_submit (token an int, 0 or None: no meta). */
static PyObject *core_collective_submit(Core *c, PyObject *args)
{
    PyObject *i, *token;
    int sip;
    kb_handle id;
    if (!PyArg_ParseTuple(args, "OiO", &i, &sip, &token) || accel_parse_id(i, &id) < 0)
        return NULL;
    void *meta = token == Py_None ? NULL : PyLong_AsVoidPtr(token);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(kb_collective_submit(c->ctx, id, sip, meta));
}

/* The ids a kb_pending_waits-style copy lists now, as a list of ints. */
static PyObject *handle_list(Core *c, size_t (*copy)(const kb_ctx *, kb_handle *, size_t))
{
    size_t n = copy(c->ctx, NULL, 0);
    kb_handle *v = n ? PyMem_Malloc(n * sizeof *v) : NULL;
    if (n && !v)
        return PyErr_NoMemory();
    if (n) {
        size_t got = copy(c->ctx, v, n);
        n = got < n ? got : n;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; list && k < n; k++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[k]);
        if (!x)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k, x);
    }
    PyMem_Free(v);
    return list;
}

static PyObject *core_pending_waits(Core *c, PyObject *unused)
{
    (void)unused;
    return handle_list(c, kb_pending_waits);
}

static PyObject *core_completed_handles(Core *c, PyObject *unused)
{
    (void)unused;
    return handle_list(c, kb_completed_handles);
}

/* Core.pending_collectives() -> [(id, sip_id, token)], FIFO (token 0: none). */
static PyObject *core_pending_collectives(Core *c, PyObject *unused)
{
    (void)unused;
    size_t n = kb_pending_collectives(c->ctx, NULL, 0);
    kb_collective *v = n ? PyMem_Malloc(n * sizeof *v) : NULL;
    if (n && !v)
        return PyErr_NoMemory();
    if (n) {
        size_t got = kb_pending_collectives(c->ctx, v, n);
        n = got < n ? got : n;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; list && k < n; k++) {
        PyObject *t = Py_BuildValue("(KiN)", (unsigned long long)v[k].handle, v[k].sip_id,
                                    PyLong_FromVoidPtr(v[k].meta));
        if (!t)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k, t);
    }
    PyMem_Free(v);
    return list;
}

static PyMethodDef core_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))core_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait(h, _meta=None): wait until handle h is completed (kbthreads.Context.wait)."},
    {"driver_wait", (PyCFunction)core_driver_wait, METH_O, "driver_wait(i): ctx.wait off a rank, for id i."},
    {"id", (PyCFunction)accel_core_id, METH_O, "The handle id of h (a new one for a new handle)."},
    {"known_id", (PyCFunction)accel_core_known_id, METH_O,
     "The handle id of h, or None for a handle never seen."},
    {"handle", (PyCFunction)accel_core_handle, METH_O, "The handle of id i."},
    {"submit", (PyCFunction)(void (*)(void))core_submit, METH_FASTCALL,
     "A rank's collective submit: 0, a KB_E* code, or NotImplemented off a rank."},
    {"create", (PyCFunction)core_create, METH_NOARGS, "kb_ctx_create with the C engine hooks: rc."},
    {"destroy", (PyCFunction)core_destroy, METH_NOARGS, "kb_ctx_destroy: rc (0 once destroyed)."},
    {"alive", (PyCFunction)core_alive, METH_NOARGS, "True while the kb_ctx exists."},
    {"address", (PyCFunction)core_address, METH_NOARGS,
     "The kb_ctx's address (what kbthreads-dump prints as the run's ctx), or 0 once destroyed."},
    {"enqueue_wait", (PyCFunction)core_enqueue_wait, METH_O, "kb_enqueue_wait(ctx, i): rc."},
    {"complete", (PyCFunction)core_complete, METH_O, "kb_complete(ctx, i): rc."},
    {"is_completed", (PyCFunction)core_is_completed, METH_O, "kb_is_completed(ctx, i): 1, 0 or rc."},
    {"collective_submit", (PyCFunction)core_collective_submit, METH_VARARGS,
     "collective_submit(i, sip_id, token): the driver side's kb_collective_submit: rc."},
    {"pending_waits", (PyCFunction)core_pending_waits, METH_NOARGS, "The pending worker waits' ids, FIFO."},
    {"completed_handles", (PyCFunction)core_completed_handles, METH_NOARGS, "The completed handles' ids."},
    {"pending_collectives", (PyCFunction)core_pending_collectives, METH_NOARGS,
     "The pending collectives: [(id, sip_id, token)], FIFO."},
    {"start", (PyCFunction)accel_core_start, METH_VARARGS,
     "start(entry, nprocs, stack_size) -> (rc, pc): kb_start, entry(rank) -> int on each rank."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject accel_core_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kbthreads._accel.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A Context's kb_ctx, handle ids and hot paths (rank waits, the engine hooks).",
    .tp_new = core_new,
    .tp_traverse = (traverseproc)core_traverse,
    .tp_clear = (inquiry)core_clear,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_methods = core_methods,
};
