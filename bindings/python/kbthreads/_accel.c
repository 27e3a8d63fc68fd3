/*
 * kbthreads._accel: the binding's hot paths in C, an optional CPython
 * extension (built when python3-dev is there; the pure-ctypes path in
 * _core.py does the same work without it, and KBTHREADS_NO_ACCEL=1 forces
 * that path).
 *
 * What it replaces, and why (bench/report-notes.md has the counts): a
 * ctypes foreign call costs several times a C-level call from Python
 * (argument conversion, a libffi frame), and a ctypes callback, which the
 * library's engine wait hook is once per drained handle, costs more still.
 * Here a suspension point is one C call that releases the GIL around the
 * library call; a rank's ctx.wait and collective submit are one C call
 * each (Core, below, holds the Context's handle ids); the engine's wait
 * hook is a C function that takes the GIL and calls engine.wait(h).
 *
 * One library: the entry points are not linked but taken, by address, from
 * the libkbthreads that ctypes loaded (bind()), so this module and the
 * ctypes declarations always talk to the same copy, whichever
 * KBTHREADS_LIBRARY named.
 *
 * Threads: every function here runs on the thread that called it with the
 * GIL held, and releases it only around library calls that may block
 * (kb_yield, kb_barrier, kb_wait), exactly as ctypes does, so that the
 * thread that gets the baton can take the GIL. wait_hook runs on the
 * driver thread inside kb_join, which released the GIL, and takes it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>

#include <kbthreads.h>

static int (*lib_yield)(void);
static int (*lib_barrier)(void);
static int (*lib_wait)(kb_ctx *, kb_handle);
static int (*lib_is_completed)(const kb_ctx *, kb_handle);
static int (*lib_rank)(void);
static int (*lib_collective_submit)(kb_ctx *, kb_handle, int, void *);
static PyObject *kb_error; /* kbthreads._lib.KbError(code, what) */

/* The answer of a suspension point, as _core._suspension gives it. */
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
    PyObject *e = PyObject_CallFunction(kb_error, "is", rc, what);
    if (e) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
    return NULL;
}

static int bound(void)
{
    if (lib_yield)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "kbthreads._accel: bind() was not called");
    return 0;
}

/* A suspension point: fn (kb_yield or kb_barrier) with the GIL released. */
static PyObject *suspend(int (**fn)(void), const char *what)
{
    if (!bound())
        return NULL;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = (*fn)();
    PyEval_RestoreThread(ts);
    return suspension_result(rc, what);
}

static PyObject *accel_yield(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return suspend(&lib_yield, "yield_");
}

static PyObject *accel_barrier(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return suspend(&lib_barrier, "barrier");
}

/* ---- Core: one per Context --------------------------------------------------
 *
 * Holds what a rank's ctx.wait and the engine's wait hook need without
 * Python frames: the kb_ctx, the Context's two handle dicts (the same dict
 * objects _core.py reads and writes) and the next handle id. The kb_ctx's
 * engine self is the Core, which the Context keeps alive (in _hooks) as
 * long as the kb_ctx.
 */
typedef struct {
    PyObject ob_base; /* PyObject_HEAD */
    kb_ctx *ctx;
    PyObject *context; /* the kbthreads.Context (a cycle the GC sees: traverse/clear) */
    PyObject *h2id, *id2h;
    unsigned long long next_id;
    int wait_overridden; /* type(context).wait is not Context.wait */
} Core;

static PyObject *str_engine, *str_wait, *str_driver_wait; /* interned attribute names */

/* Engine hooks running on this thread (ours; _core.py adds its own count). */
static _Thread_local int hook_depth;

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
 * an integral float, an object with __index__), else 0 (_core.py:
 * _int_value). */
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

/* The id of handle h (_core.py's module doc, Handles): an int 1..2^63-1
 * is its own id; anything else is looked up, or given one. */
static PyObject *handle_id(Core *c, PyObject *h)
{
    if (PyLong_CheckExact(h)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(h, &overflow);
        if (!overflow && x >= 1)
            return Py_NewRef(h);
        if (x == -1 && PyErr_Occurred())
            return NULL;
    }
    PyObject *i = PyDict_GetItemWithError(c->h2id, h); /* borrowed; TypeError if unhashable */
    if (i)
        return Py_NewRef(i);
    if (PyErr_Occurred())
        return NULL;
    unsigned long long v;
    if (!int_value(h, &v))
        return new_id(c, h);
    PyObject *vi = PyLong_FromUnsignedLongLong(v);
    PyObject *got = vi ? PyDict_SetDefault(c->h2id, h, vi) : NULL; /* borrowed */
    if (got && !PyDict_SetDefault(c->id2h, vi, h))
        got = NULL;
    Py_XDECREF(vi);
    return got ? Py_NewRef(got) : NULL;
}

static PyObject *core_id(Core *c, PyObject *h)
{
    return handle_id(c, h);
}

/* Core.wait(h, _meta=None): ctx.wait(h). On a rank: a completed handle
 * returns at once, without releasing the GIL (the reference's fast path,
 * checked first also in a cancelled rank, where kb_wait answers
 * KB_ECANCELED before it looks at the handle); else kb_wait, with the GIL
 * released; a failure goes to the Context's _raise (SystemExit, a stashed
 * engine exception, KbError). Off a rank: the Context's _driver_wait (the
 * driver side, under its lock). _meta is accepted and ignored, as the
 * Python method does. */
static PyObject *core_wait(Core *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 1 || nargs + nkw > 2 ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "_meta") != 0)) {
        PyErr_SetString(PyExc_TypeError, "wait(h, _meta=None)");
        return NULL;
    }
    if (!bound())
        return NULL;
    PyObject *i = handle_id(c, args[0]);
    if (!i)
        return NULL;
    if (lib_rank() < 0) {
        PyObject *r = PyObject_CallMethodOneArg(c->context, str_driver_wait, i);
        Py_DECREF(i);
        return r;
    }
    kb_handle id = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    int rc = 0;
    if (lib_is_completed(c->ctx, id) != 1) {
        PyThreadState *ts = PyEval_SaveThread();
        rc = lib_wait(c->ctx, id);
        PyEval_RestoreThread(ts);
    }
    if (rc == 0)
        Py_RETURN_NONE;
    PyObject *r = PyObject_CallMethod(c->context, "_raise", "is", rc, "wait");
    Py_XDECREF(r); /* _raise always raises */
    return NULL;
}

/* Core.submit(h, sip_id, token): a rank's kb_collective_submit(ctx,
 * id(h), sip_id, token as meta), token an int or None (_core.py keeps the
 * Python meta under it). 0 or a KB_E* code; NotImplemented off a rank
 * (the caller takes the driver path, with its lock). */
static PyObject *core_submit(Core *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bound())
        return NULL;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "submit(h, sip_id, token)");
        return NULL;
    }
    int sip = (int)PyLong_AsLong(args[1]);
    void *token = args[2] == Py_None ? NULL : PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (lib_rank() < 0)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *i = handle_id(c, args[0]);
    if (!i)
        return NULL;
    kb_handle id = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    return PyLong_FromLong(lib_collective_submit(c->ctx, id, sip, token));
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

/* The engine's wait for handle object h, as _core.Context._wait_hook does
 * it: engine.wait(h) if the engine has one (the library already skipped a
 * completed handle, and marks h completed when this returns 0). A Python
 * exception is stashed by the Context, which returns the code the drain
 * fails with. */
static int engine_wait(Core *c, PyObject *h, kb_wait_origin origin)
{
    PyObject *r = NULL, *engine = PyObject_GetAttr(c->context, str_engine);
    if (engine && engine != Py_None) {
        /* engine.wait(h) without a bound method object; an engine without
         * a wait completes every handle at once (AttributeError only:
         * anything else its attribute raises fails the drain). */
        r = PyObject_CallMethodOneArg(engine, str_wait, h);
        if (!r && PyErr_ExceptionMatches(PyExc_AttributeError) && !PyObject_HasAttr(engine, str_wait))
            PyErr_Clear();
    }
    Py_XDECREF(engine);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        return 0;
    PyObject *e = take_exception();
    PyObject *code = PyObject_CallMethod(c->context, "_stash_exc", "OOi", e, h, (int)origin);
    Py_XDECREF(e);
    int rc = code ? (int)PyLong_AsLong(code) : KB_ENOMEM;
    Py_XDECREF(code);
    return rc;
}

/* The engine's wait hook (kb_engine.wait), self the Core: on the driver
 * thread inside kb_join, which released the GIL. A collective whose
 * Context overrides wait goes through the Context's Python hook (the
 * reference's drain calls ctx.wait there); everything else is
 * engine_wait. Never lets a Python exception out; should Python itself
 * fail (no memory), the drain fails with KB_ENOMEM. */
static int wait_hook(void *self, kb_handle h, void *meta, kb_wait_origin origin)
{
    Core *c = self;
    PyGILState_STATE g = PyGILState_Ensure();
    hook_depth++;
    int rc = KB_ENOMEM;
    PyObject *hid = PyLong_FromUnsignedLongLong(h);
    if (hid && origin == KB_WAIT_COLLECTIVE && c->wait_overridden) {
        PyObject *m = meta ? PyLong_FromVoidPtr(meta) : Py_NewRef(Py_None);
        PyObject *o = PyLong_FromLong((long)origin);
        PyObject *r =
            m && o ? PyObject_CallMethod(c->context, "_wait_hook", "OOOO", Py_None, hid, m, o) : NULL;
        if (r)
            rc = (int)PyLong_AsLong(r);
        Py_XDECREF(r);
        Py_XDECREF(m);
        Py_XDECREF(o);
    } else if (hid) {
        /* An int handle has no entry unless an equal object was seen. */
        PyObject *handle = PyDict_GET_SIZE(c->id2h) ? PyDict_GetItemWithError(c->id2h, hid) : NULL;
        if (handle || !PyErr_Occurred())
            rc = engine_wait(c, handle ? handle : hid, origin);
    }
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(c->context);
        rc = KB_ENOMEM;
    }
    Py_XDECREF(hid);
    hook_depth--;
    PyGILState_Release(g);
    return rc;
}

/* Core(context, h2id, id2h, first_id, wait_overridden); attach() gives it
 * the kb_ctx once that exists (its engine self is this Core). */
static PyObject *core_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)kwds;
    PyObject *context, *h2id, *id2h;
    unsigned long long first;
    int overridden;
    if (!PyArg_ParseTuple(args, "OO!O!Kp", &context, &PyDict_Type, &h2id, &PyDict_Type, &id2h, &first,
                          &overridden))
        return NULL;
    Core *c = (Core *)type->tp_alloc(type, 0);
    if (!c)
        return NULL;
    c->context = Py_NewRef(context);
    c->h2id = Py_NewRef(h2id);
    c->id2h = Py_NewRef(id2h);
    c->next_id = first;
    c->wait_overridden = overridden;
    return (PyObject *)c;
}

static int core_traverse(Core *c, visitproc visit, void *arg)
{
    Py_VISIT(c->context);
    Py_VISIT(c->h2id);
    Py_VISIT(c->id2h);
    return 0;
}

static int core_clear(Core *c)
{
    Py_CLEAR(c->context);
    Py_CLEAR(c->h2id);
    Py_CLEAR(c->id2h);
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

/* hook_depth() -> int: engine hooks the C hook runs on this thread now. */
static PyObject *accel_hook_depth(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyLong_FromLong(hook_depth);
}

static int take_address(PyObject *addrs, const char *name, void **out)
{
    PyObject *v = PyDict_GetItemString(addrs, name); /* borrowed */
    if (!v) {
        PyErr_Format(PyExc_KeyError, "bind: no address for %s", name);
        return -1;
    }
    *out = PyLong_AsVoidPtr(v);
    if (!*out && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "bind: NULL address for %s", name);
    return *out ? 0 : -1;
}

/* bind(addresses, KbError): the library's entry points by name (ctypes
 * addresses of the loaded library) and the binding's error class. */
static PyObject *accel_bind(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *addrs, *err;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &addrs, &err))
        return NULL;
    void *y, *b, *w, *c, *r, *cs;
    if (take_address(addrs, "kb_yield", &y) || take_address(addrs, "kb_barrier", &b) ||
        take_address(addrs, "kb_wait", &w) || take_address(addrs, "kb_is_completed", &c) ||
        take_address(addrs, "kb_rank", &r) || take_address(addrs, "kb_collective_submit", &cs))
        return NULL;
    /* Function pointers from object pointers: POSIX guarantees the round
     * trip (dlsym works the same way). */
    lib_yield = (int (*)(void))(uintptr_t)y;
    lib_barrier = (int (*)(void))(uintptr_t)b;
    lib_wait = (int (*)(kb_ctx *, kb_handle))(uintptr_t)w;
    lib_is_completed = (int (*)(const kb_ctx *, kb_handle))(uintptr_t)c;
    lib_rank = (int (*)(void))(uintptr_t)r;
    lib_collective_submit = (int (*)(kb_ctx *, kb_handle, int, void *))(uintptr_t)cs;
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
    {"bind", accel_bind, METH_VARARGS, "bind(addresses, KbError): the loaded library's entry points."},
    {"yield_", accel_yield, METH_NOARGS, "kb_yield, raising as kbthreads.yield_ does."},
    {"barrier", accel_barrier, METH_NOARGS, "kb_barrier, raising as kbthreads.barrier does."},
    {"hook_depth", accel_hook_depth, METH_NOARGS, "Engine hooks the C hook runs on this thread now."},
    {"wait_hook_address", accel_wait_hook_address, METH_NOARGS, "The C engine wait hook's address."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef accel_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kbthreads._accel",
    .m_doc = "The kbthreads binding's hot paths in C (optional).",
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
    if (!str_engine || !str_wait || !str_driver_wait)
        return NULL;
    PyObject *m = PyModule_Create(&accel_module);
    if (m && PyModule_AddObjectRef(m, "Core", (PyObject *)&core_type) < 0)
        Py_CLEAR(m);
    return m;
}
