/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel, the engine hooks a Context's kb_ctx runs (its engine
 * self is the Core): wait calls the Python engine's wait (or the
 * Context's overridden wait for a collective), bind and abort the
 * Context's _bind_hook and _abort_hook. They run on the driver thread,
 * which released the GIL, and take it. The library counts them
 * (kb_in_hook); no Python exception leaves a hook.
 */
#include "_accel.h"

/* Keep exception e (for handle h, from a drain phase) in the stash; the
 * positive code (below 2^30) the drain fails with, or KB_ENOMEM. */
static int stash_exception(Core *c, PyObject *e, PyObject *h, kb_wait_origin origin)
{
    unsigned long code;
    do
        code = c->next_code++ % (1UL << 30);
    while (code == 0);
    PyObject *key = PyLong_FromUnsignedLong(code);
    PyObject *entry = key ? Py_BuildValue("(OOi)", e, h, (int)origin) : NULL;
    int rc = entry && PyDict_SetItem(c->stash, key, entry) == 0 ? (int)code : KB_ENOMEM;
    Py_XDECREF(key);
    Py_XDECREF(entry);
    return rc;
}

/* The current exception, taken (normalised, with its traceback). */
static PyObject *take_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb && v)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
#endif
}

/* The meta object of a collective's token when the Context's engine takes
 * it (a new reference), else NULL; NULL with an exception set on failure. */
static PyObject *collective_meta(Core *c, void *meta)
{
    PyObject *takes = PyObject_GetAttr(c->context, accel_str_engine_takes_meta);
    int yes = takes ? PyObject_IsTrue(takes) : -1;
    Py_XDECREF(takes);
    if (yes <= 0)
        return NULL;
    PyObject *token = PyLong_FromVoidPtr(meta);
    PyObject *m = token ? PyDict_GetItemWithError(c->metas, token) : NULL;
    Py_XDECREF(token);
    Py_XINCREF(m);
    return m;
}

/* The engine's wait for handle object h: engine.wait(h) if the engine has
 * one (the library already skipped a completed handle, and marks h
 * completed when this returns 0), engine.wait(h, meta) for a collective
 * when the engine's wait takes a second argument; or, for a collective
 * whose Context overrides wait, ctx.wait(h, _meta=meta) (the reference's drain calls
 * ctx.wait there). A Python exception is stashed: the code the drain fails
 * with. */
static int engine_wait(Core *c, PyObject *h, void *meta, kb_wait_origin origin)
{
    PyObject *r = NULL;
    if (origin == KB_WAIT_COLLECTIVE && c->wait_overridden) {
        PyObject *m = Py_None, *token = meta ? PyLong_FromVoidPtr(meta) : NULL;
        if (token)
            m = PyDict_GetItemWithError(c->metas, token);
        Py_XDECREF(token);
        if (m || !PyErr_Occurred()) {
            PyObject *call[2] = {h, m ? m : Py_None};
            PyObject *kw = PyTuple_Pack(1, accel_str_meta);
            PyObject *fn = kw ? PyObject_GetAttr(c->context, accel_str_wait) : NULL;
            r = fn ? PyObject_Vectorcall(fn, call, 1, kw) : NULL;
            Py_XDECREF(fn);
            Py_XDECREF(kw);
        }
    } else {
        PyObject *engine = PyObject_GetAttr(c->context, accel_str_engine);
        PyObject *m = NULL;
        if (engine && engine != Py_None && origin == KB_WAIT_COLLECTIVE && meta)
            m = collective_meta(c, meta);
        if (m) {
            /* engine.wait(h, meta): a collective's description, for an
             * engine whose wait takes it (Context._engine_takes_meta) */
            PyObject *call[3] = {engine, h, m};
            r = PyObject_VectorcallMethod(accel_str_wait, call, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            Py_DECREF(m);
        } else if (engine && engine != Py_None && !PyErr_Occurred()) {
            /* engine.wait(h) without a bound method object; an engine
             * without a wait completes every handle at once
             * (AttributeError only: anything else its attribute raises
             * fails the drain). */
            r = PyObject_CallMethodOneArg(engine, accel_str_wait, h);
            if (!r && PyErr_ExceptionMatches(PyExc_AttributeError) &&
                !PyObject_HasAttr(engine, accel_str_wait))
                PyErr_Clear();
        }
        Py_XDECREF(engine);
    }
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        return 0;
    PyObject *e = take_exception();
    int rc = stash_exception(c, e, h, origin);
    Py_XDECREF(e);
    return rc;
}

/* The engine's wait hook (kb_engine.wait), self the Core: on the driver
 * thread inside kb_join, which released the GIL. Never lets a Python
 * exception out; should Python itself fail (no memory), the drain fails
 * with KB_ENOMEM. */
static int wait_hook(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    Core *c = self;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = KB_ENOMEM;
    PyObject *hid = PyLong_FromUnsignedLongLong(h);
    PyObject *handle = hid ? accel_core_handle(c, hid) : NULL;
    if (handle)
        rc = engine_wait(c, handle, meta, origin);
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(c->context);
        rc = KB_ENOMEM;
    }
    Py_XDECREF(handle);
    Py_XDECREF(hid);
    PyGILState_Release(g);
    return rc;
}

/* Call the Context's method name(*args) for a hook, counted as one. */
static void context_hook(Core *c, PyObject *name, PyObject *arg)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r =
        arg ? PyObject_CallMethodOneArg(c->context, name, arg) : PyObject_CallMethodNoArgs(c->context, name);
    Py_XDECREF(r);
    if (!r) /* the Python hooks catch everything: only a failure of Python itself */
        PyErr_WriteUnraisable(c->context);
    PyGILState_Release(g);
}

/* kb_engine.bind: Context._bind_hook(rank). */
static void bind_hook(void *self, kb_ctx *ctx, int rank)
{
    (void)ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyLong_FromLong(rank);
    if (r)
        context_hook(self, accel_str_bind_hook, r);
    else
        PyErr_WriteUnraisable(NULL);
    Py_XDECREF(r);
    PyGILState_Release(g);
}

/* kb_engine.abort: Context._abort_hook(). */
static void abort_hook(void *self, kb_ctx *ctx)
{
    (void)ctx;
    context_hook(self, accel_str_abort_hook, NULL);
}

kb_engine accel_engine(Core *c)
{
    kb_engine e = {.self = c, .wait = wait_hook, .bind = bind_hook, .abort = abort_hook};
    return e;
}
