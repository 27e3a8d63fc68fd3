/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel, handle ids: handles are arbitrary hashable Python
 * objects; the library sees uint64 ids (never 0 or UINT64_MAX). The tables
 * are the Context's h2id and id2h dicts, held by its Core.
 */
#include "_accel.h"

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
PyObject *accel_handle_id(Core *c, PyObject *h, int create)
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

PyObject *accel_core_id(Core *c, PyObject *h)
{
    return accel_handle_id(c, h, 1);
}

PyObject *accel_core_known_id(Core *c, PyObject *h)
{
    return accel_handle_id(c, h, 0);
}

/* The handle object of id i (i itself for an int handle). */
PyObject *accel_core_handle(Core *c, PyObject *i)
{
    PyObject *h = PyDict_GET_SIZE(c->id2h) ? PyDict_GetItemWithError(c->id2h, i) : NULL;
    if (!h && PyErr_Occurred())
        return NULL;
    return Py_NewRef(h ? h : i);
}

int accel_parse_id(PyObject *i, kb_handle *out)
{
    *out = PyLong_AsUnsignedLongLong(i);
    return *out == (kb_handle)-1 && PyErr_Occurred() ? -1 : 0;
}
