/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel: the package's compiled part, always present. It holds
 * the one implementation of every hot path of the binding: the suspension
 * points (kbthreads.yield_, kbthreads.barrier), handle ids, a rank's
 * ctx.wait and collective submit, the error mapping (a library code to
 * SystemExit, RuntimeError, a stashed engine exception or KbError), the
 * engine's wait hook and the engine-hook depth. _core.py keeps what is not
 * hot (spawning, joining, the containers, teardown), over ctypes.
 *
 * Why C: a ctypes foreign call costs several times a C-level call from
 * Python, and a ctypes callback (the engine's wait hook runs once per
 * drained handle) more still (bench/report-notes.md has the counts).
 *
 * One library: this module is linked with libkbthreads, and _lib.py loads
 * it with ctypes (ctypes.CDLL of this module's file), so the ctypes calls
 * and the calls made here reach the same copy. A pip-built package
 * compiles the library into this module (setup.py); the CMake build links
 * it with the libkbthreads.so built or installed beside it.
 *
 * Threads: every function here runs on the thread that called it with the
 * GIL held, and releases it only around library calls that may block
 * (kb_yield, kb_barrier, kb_wait), as ctypes does, so that the thread that
 * gets the baton can take the GIL. wait_hook runs on the driver thread
 * inside kb_join, which released the GIL, and takes it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdint.h>

#include <kbthreads.h>

#define INT_IDS (1ULL << 63) /* int handles below this are their own ids; table ids start here */

static PyObject *kb_error; /* kbthreads._lib.KbError(code, what), given by init() */
static PyObject *str_engine, *str_wait, *str_driver_wait, *str_meta; /* interned names */

/* Engine hooks running on this thread: the C wait hook, and the Python
 * bind and abort hooks (hook_enter/hook_leave). */
static _Thread_local int hook_depth;

/* ---- errors ------------------------------------------------------------------ */

/* Raise KbError(rc, what). Returns NULL. */
static PyObject *raise_kb_error(int rc, const char *what)
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
    return raise_kb_error(rc, what);
}

/* A suspension point: fn (kb_yield or kb_barrier) with the GIL released. */
static PyObject *suspend(int (*fn)(void), const char *what)
{
    PyThreadState *ts = PyEval_SaveThread();
    int rc = fn();
    PyEval_RestoreThread(ts);
    return suspension_result(rc, what);
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

/* ---- Core: one per Context --------------------------------------------------
 *
 * What a rank's ctx.wait and the engine's wait hook need without Python
 * frames: the kb_ctx, the Context's handle dicts (h2id, id2h), its
 * collective metas (token -> meta) and its stash of engine exceptions
 * (code -> (exception, handle, origin)): the same dict objects _core.py
 * reads. The kb_ctx's engine self is the Core, which the Context keeps
 * alive as long as the kb_ctx.
 */
typedef struct {
    PyObject ob_base; /* PyObject_HEAD */
    kb_ctx *ctx;
    PyObject *context; /* the kbthreads.Context (a cycle the GC sees: traverse/clear) */
    PyObject *h2id, *id2h, *metas, *stash;
    unsigned long long next_id;
    unsigned long next_code;
    int wait_overridden; /* type(context).wait is not Context.wait */
} Core;

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
    return raise_kb_error(rc, what);
}

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

static PyObject *new_id(Core *c, PyObject *h)
{
    PyObject *i = PyLong_FromUnsignedLongLong(c->next_id);
    if (!i)
        return NULL;
    /* A user's __hash__/__eq__ may run Python code and let another thread
     * in: SetDefault keeps the first id given to h. */
    PyObject *got = PyDict_SetDefault(c->h2id, h, i); /* borrowed */
    if (got == i) {
        c->next_id++;
        if (PyDict_SetItem(c->id2h, i, h) < 0) {
            Py_DECREF(i);
            return NULL;
        }
    }
    Py_DECREF(i);
    return got ? Py_NewRef(got) : NULL;
}

/* 1 and *v if handle h equals the int *v, 1 <= *v < 2^63 (an int, a bool,
 * an integral float, an object with __index__), else 0. */
static int int_value(PyObject *h, unsigned long long *v)
{
    PyObject *n;
    if (PyFloat_Check(h)) {
        double d = PyFloat_AS_DOUBLE(h);
        if (!(d >= 1.0 && d < 9223372036854775808.0) || d != (double)(long long)d)
            return 0;
        *v = (unsigned long long)d;
        return 1;
    }
    if (PyLong_Check(h)) {
        n = Py_NewRef(h);
    } else if (PyIndex_Check(h)) {
        n = PyNumber_Index(h);
        int eq = n ? PyObject_RichCompareBool(n, h, Py_EQ) : -1;
        if (eq != 1) {
            PyErr_Clear(); /* an __index__ or __eq__ that raises: not int-valued */
            Py_XDECREF(n);
            return 0;
        }
    } else {
        return 0;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(n, &overflow);
    Py_DECREF(n);
    if (x == -1 && PyErr_Occurred())
        PyErr_Clear();
    if (overflow || x < 1)
        return 0;
    *v = (unsigned long long)x;
    return 1;
}

/* 1 if h is an exact int 1..2^63-1 (its own id, no table entry), 0 if
 * not, -1 on error. */
static int own_id(PyObject *h)
{
    if (!PyLong_CheckExact(h))
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(h, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    return !overflow && x >= 1;
}

/* The id of handle h. Handles are arbitrary hashable objects; the library
 * sees uint64 ids (never 0 or UINT64_MAX). An int h with 1 <= h < 2^63 is
 * its own id and costs no table entry. Every other handle gets an id from
 * 2^63 up, kept both ways (h2id, id2h); except that a handle equal to
 * such an int (a bool, an integral float, an object with __index__) gets
 * that int as its id, since Python's sets take them for one element; the
 * dicts keep the first such object, which the engine and the containers
 * then see for that id. create 0: None for a handle never seen (no
 * entry made). */
static PyObject *handle_id(Core *c, PyObject *h, int create)
{
    int own = own_id(h);
    if (own)
        return own < 0 ? NULL : Py_NewRef(h);
    PyObject *i = PyDict_GetItemWithError(c->h2id, h); /* borrowed; TypeError if unhashable */
    if (i)
        return Py_NewRef(i);
    if (PyErr_Occurred())
        return NULL;
    unsigned long long v;
    if (!int_value(h, &v)) {
        if (create)
            return new_id(c, h);
        Py_RETURN_NONE;
    }
    PyObject *vi = PyLong_FromUnsignedLongLong(v);
    if (!create || !vi)
        return vi;
    PyObject *got = PyDict_SetDefault(c->h2id, h, vi); /* borrowed */
    if (got && !PyDict_SetDefault(c->id2h, vi, h))
        got = NULL;
    Py_DECREF(vi);
    return got ? Py_NewRef(got) : NULL;
}

static PyObject *core_id(Core *c, PyObject *h)
{
    return handle_id(c, h, 1);
}

static PyObject *core_known_id(Core *c, PyObject *h)
{
    return handle_id(c, h, 0);
}

/* The handle object of id i (i itself for an int handle). */
static PyObject *core_handle(Core *c, PyObject *i)
{
    PyObject *h = PyDict_GET_SIZE(c->id2h) ? PyDict_GetItemWithError(c->id2h, i) : NULL;
    if (!h && PyErr_Occurred())
        return NULL;
    return Py_NewRef(h ? h : i);
}

static int parse_id(PyObject *i, kb_handle *out)
{
    *out = PyLong_AsUnsignedLongLong(i);
    return *out == (kb_handle)-1 && PyErr_Occurred() ? -1 : 0;
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
    PyObject *i = handle_id(c, args[0], 1);
    if (!i)
        return NULL;
    if (kb_rank() < 0) {
        PyObject *r = PyObject_CallMethodOneArg(c->context, str_driver_wait, i);
        Py_DECREF(i);
        return r;
    }
    kb_handle id;
    int bad = parse_id(i, &id);
    Py_DECREF(i);
    if (bad)
        return NULL;
    int rc = 0;
    if (kb_is_completed(c->ctx, id) != 1) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = kb_wait(c->ctx, id);
        PyEval_RestoreThread(ts);
    }
    if (rc == 0)
        Py_RETURN_NONE;
    return raise_rc(c, rc, "wait");
}

/* Core.check(rc, what): None for 0, else raise as a failed ctx.wait does
 * (the driver side's kb_wait, in _core.py). */
static PyObject *core_check(Core *c, PyObject *args)
{
    int rc;
    const char *what;
    if (!PyArg_ParseTuple(args, "is", &rc, &what))
        return NULL;
    if (rc == 0)
        Py_RETURN_NONE;
    return raise_rc(c, rc, what);
}

/* Core.submit(h, sip_id, token): a rank's kb_collective_submit(ctx,
 * id(h), sip_id, token as meta), token an int or None (_core.py keeps the
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
    PyObject *i = handle_id(c, args[0], 1);
    if (!i)
        return NULL;
    kb_handle id;
    int bad = parse_id(i, &id);
    Py_DECREF(i);
    if (bad)
        return NULL;
    return PyLong_FromLong(kb_collective_submit(c->ctx, id, (int)sip, token));
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

/* The engine's wait for handle object h: engine.wait(h) if the engine has
 * one (the library already skipped a completed handle, and marks h
 * completed when this returns 0); or, for a collective whose Context
 * overrides wait, ctx.wait(h, _meta=meta) (the reference's drain calls
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
            PyObject *kw = PyTuple_Pack(1, str_meta);
            PyObject *fn = kw ? PyObject_GetAttr(c->context, str_wait) : NULL;
            r = fn ? PyObject_Vectorcall(fn, call, 1, kw) : NULL;
            Py_XDECREF(fn);
            Py_XDECREF(kw);
        }
    } else {
        PyObject *engine = PyObject_GetAttr(c->context, str_engine);
        if (engine && engine != Py_None) {
            /* engine.wait(h) without a bound method object; an engine
             * without a wait completes every handle at once
             * (AttributeError only: anything else its attribute raises
             * fails the drain). */
            r = PyObject_CallMethodOneArg(engine, str_wait, h);
            if (!r && PyErr_ExceptionMatches(PyExc_AttributeError) && !PyObject_HasAttr(engine, str_wait))
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
    hook_depth++;
    int rc = KB_ENOMEM;
    PyObject *hid = PyLong_FromUnsignedLongLong(h);
    PyObject *handle = hid ? core_handle(c, hid) : NULL;
    if (handle)
        rc = engine_wait(c, handle, meta, origin);
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(c->context);
        rc = KB_ENOMEM;
    }
    Py_XDECREF(handle);
    Py_XDECREF(hid);
    hook_depth--;
    PyGILState_Release(g);
    return rc;
}

/* Core(context, h2id, id2h, metas, stash, wait_overridden); attach() gives
 * it the kb_ctx once that exists (its engine self is this Core). */
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
    c->next_id = INT_IDS;
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

/* Core.attach(ctx_address): the kb_ctx whose engine self this Core is;
 * attach(0) once it was destroyed (a later wait then finds no ctx). */
static PyObject *core_attach(Core *c, PyObject *addr)
{
    void *p = PyLong_AsVoidPtr(addr);
    if (!p && PyErr_Occurred())
        return NULL;
    c->ctx = p;
    Py_RETURN_NONE;
}

static PyMethodDef core_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))core_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait(h, _meta=None): wait until handle h is completed (kbthreads.Context.wait)."},
    {"id", (PyCFunction)core_id, METH_O, "The handle id of h (a new one for a new handle)."},
    {"known_id", (PyCFunction)core_known_id, METH_O, "The handle id of h, or None for a handle never seen."},
    {"handle", (PyCFunction)core_handle, METH_O, "The handle of id i."},
    {"check", (PyCFunction)core_check, METH_VARARGS, "check(rc, what): raise as a failed ctx.wait does."},
    {"submit", (PyCFunction)(void (*)(void))core_submit, METH_FASTCALL,
     "A rank's collective submit: 0, a KB_E* code, or NotImplemented off a rank."},
    {"attach", (PyCFunction)core_attach, METH_O, "attach(ctx_address): the kb_ctx (0: none any more)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject core_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kbthreads._accel.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A Context's handle ids and hot paths (rank waits, the engine's wait hook).",
    .tp_new = core_new,
    .tp_traverse = (traverseproc)core_traverse,
    .tp_clear = (inquiry)core_clear,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_methods = core_methods,
};

/* ---- module functions --------------------------------------------------------- */

static PyObject *accel_hook_depth(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromLong(hook_depth);
}

static PyObject *accel_hook_enter(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    hook_depth++;
    Py_RETURN_NONE;
}

static PyObject *accel_hook_leave(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    hook_depth--;
    Py_RETURN_NONE;
}

/* init(KbError): the binding's error class. */
static PyObject *accel_init(PyObject *mod, PyObject *err)
{
    (void)mod;
    Py_XSETREF(kb_error, Py_NewRef(err));
    Py_RETURN_NONE;
}

/* wait_hook_address() -> int: the address of wait_hook, for kb_engine.wait
 * (its self: a Core). */
static PyObject *accel_wait_hook_address(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromVoidPtr((void *)(uintptr_t)wait_hook);
}

static PyMethodDef accel_methods[] = {
    {"init", accel_init, METH_O, "init(KbError): the binding's error class."},
    {"yield_", accel_yield, METH_NOARGS, "kb_yield, raising as kbthreads.yield_ does."},
    {"barrier", accel_barrier, METH_NOARGS, "kb_barrier, raising as kbthreads.barrier does."},
    {"hook_depth", accel_hook_depth, METH_NOARGS, "Engine hooks running on this thread now."},
    {"hook_enter", accel_hook_enter, METH_NOARGS, "An engine hook starts on this thread (Python hooks)."},
    {"hook_leave", accel_hook_leave, METH_NOARGS, "An engine hook ends on this thread (Python hooks)."},
    {"wait_hook_address", accel_wait_hook_address, METH_NOARGS, "The C engine wait hook's address."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef accel_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kbthreads._accel",
    .m_doc = "The kbthreads binding's compiled part: its hot paths, and libkbthreads.",
    .m_size = -1,
    .m_methods = accel_methods,
};

PyMODINIT_FUNC PyInit__accel(void);
PyMODINIT_FUNC PyInit__accel(void)
{
    if (PyType_Ready(&core_type) < 0)
        return NULL;
    str_engine = PyUnicode_InternFromString("engine");
    str_wait = PyUnicode_InternFromString("wait");
    str_driver_wait = PyUnicode_InternFromString("_driver_wait");
    str_meta = PyUnicode_InternFromString("_meta");
    if (!str_engine || !str_wait || !str_driver_wait || !str_meta)
        return NULL;
    PyObject *m = PyModule_Create(&accel_module);
    if (m && PyModule_AddObjectRef(m, "Core", (PyObject *)&core_type) < 0)
        Py_CLEAR(m);
    return m;
}
