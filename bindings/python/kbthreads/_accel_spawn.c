/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel, spawning: kb_start with the binding's options, a
 * rank's entry, kb_join and its failure report as Python values, and
 * freeing a process context; the sizes a spawn needs, checked before
 * anything is allocated; and Ctrl-C while a spawn is driven (below).
 * Process contexts travel to Python as their address (an int): only the
 * package's _spawn.py and _run.py hold them.
 */
#include "_accel.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What a rank returns when its Python entry itself failed to run. */
#define RC_FAILED 1

/* A spawn started here: its rank entry's argument, kept until its process
 * context is freed, and the Python thread id of each rank while the body
 * of its entry runs (0 otherwise: _run.py's _Entry says when, by
 * rank_running), which Ctrl-C's delivery reads. Listed in `spawns`;
 * everything here is touched with the GIL held. */
struct spawn {
    struct spawn *next;
    kb_process_context *pc;
    PyObject *entry; /* entry(rank) -> int, kept alive by its _Run */
    int nprocs;
    unsigned long *ident;
};
static struct spawn *spawns;
/* On a rank thread while its entry runs: its spawn and rank. */
static _Thread_local struct spawn *tls_spawn;
static _Thread_local int tls_rank;

static struct spawn *spawn_of(kb_process_context *pc)
{
    for (struct spawn *s = spawns; s; s = s->next)
        if (s->pc == pc)
            return s;
    return NULL;
}

static void spawn_forget(kb_process_context *pc)
{
    for (struct spawn **p = &spawns; *p; p = &(*p)->next) {
        if ((*p)->pc == pc) {
            struct spawn *s = *p;
            *p = s->next;
            PyMem_RawFree(s->ident);
            PyMem_RawFree(s);
            return;
        }
    }
}

/* The end of a rank's thread state, part one: what it owns is freed here,
 * while the rank's PyGILState_Ensure still counts.
 *
 * Why: PyGILState_Release drops the state's gilstate_counter to 0 and only
 * then clears the state (its thread dict: threading.local values, caches
 * such as DTensor's per-thread sharding cache; its contextvars context).
 * Freeing those runs destructors, and a C++ destructor that takes the GIL
 * through pybind11 (gil_scoped_acquire, as every torch tensor freed from
 * C++ does) finds this state by PyGILState_GetThisThreadState, counts it
 * 0 -> 1 -> 0 and deletes it itself; PyGILState_Release then deletes the
 * freed state again (a segfault in tstate_delete_common, seen after FSDP2
 * training). Freed here, every such destructor counts 1 -> 2 -> 1.
 *
 * The rank's contextvars are dropped before this: its body runs in a
 * context of its own (_run.py), gone when the body returns. Invariant: on
 * return the dict is empty. Destructors may add keys to the dict while it
 * is cleared: it is cleared until it stays empty, up to a bound (what a
 * destructor adds past it is left to the Release). */
static void rank_state_free(void)
{
    PyObject *dict = PyThreadState_GetDict(); /* borrowed; NULL only when it cannot be made */
    for (int i = 0; dict && PyDict_GET_SIZE(dict) > 0 && i < 16; i++)
        PyDict_Clear(dict);
    if (PyErr_Occurred()) /* a destructor's error: reported, as Python reports those */
        PyErr_WriteUnraisable(NULL);
}

/* A rank's entry: arg is its spawn. The rank thread holds the baton but
 * not the GIL. Its thread state is made by PyGILState_Ensure for this
 * rank and deleted at its end (the thread may be parked and serve a rank
 * of a later spawn); rank_state_free says why what it owns is freed
 * first. */
static int rank_entry(int rank, void *arg)
{
    struct spawn *s = arg;
    PyGILState_STATE g = PyGILState_Ensure();
    tls_spawn = s;
    tls_rank = rank;
    int rc = RC_FAILED;
    PyObject *r = PyObject_CallFunction(s->entry, "i", rank);
    if (r) {
        long v = PyLong_AsLong(r);
        rc = v == -1 && PyErr_Occurred() ? RC_FAILED : (int)v;
        Py_DECREF(r);
    }
    if (PyErr_Occurred()) /* the entry catches everything: nothing may escape into C */
        PyErr_WriteUnraisable(s->entry);
    if (s->ident)
        s->ident[rank] = 0;
    tls_spawn = NULL;
    rank_state_free();
    PyGILState_Release(g);
    return rc;
}

/* rank_running(flag): the calling rank's body starts (True) or ends (False)
 * being where Ctrl-C may raise KeyboardInterrupt; no-op off a rank. */
PyObject *accel_rank_running(PyObject *mod, PyObject *flag)
{
    (void)mod;
    struct spawn *s = tls_spawn;
    if (s && s->ident && tls_rank >= 0 && tls_rank < s->nprocs)
        s->ident[tls_rank] = PyObject_IsTrue(flag) == 1 ? PyThread_get_thread_ident() : 0;
    Py_RETURN_NONE;
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
    struct spawn *s = PyMem_RawCalloc(1, sizeof *s);
    if (!s)
        return PyErr_NoMemory();
    /* The result is made before the spawn starts: once kb_start has made
     * the process context, handing it to Python must not fail (one lost
     * would keep the ctx busy for good). Python holds the spawn by the
     * address of its record (parse_pc). */
    PyObject *res = PyTuple_New(2);
    PyObject *handle = res ? PyLong_FromVoidPtr(s) : NULL;
    if (!handle) {
        Py_XDECREF(res);
        PyMem_RawFree(s);
        return NULL;
    }
    s->entry = entry;
    s->nprocs = nprocs;
    kb_process_context *pc = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* the bind hooks take the GIL */
        rc = kb_start(c->ctx, rank_entry, s, nprocs, &opts, &pc);
    Py_END_ALLOW_THREADS if (rc != 0)
    {
        PyMem_RawFree(s);
        Py_DECREF(handle);
        PyObject *code = PyLong_FromLong(rc);
        if (!code) {
            Py_DECREF(res);
            return NULL;
        }
        PyTuple_SET_ITEM(res, 0, code);
        PyTuple_SET_ITEM(res, 1, PyLong_FromLong(0)); /* a cached small int: no allocation */
        return res;
    }
    /* After kb_start, which checked nprocs against the machine: no rank
     * has run yet (they run in kb_join). Without the ids a rank's Ctrl-C
     * falls back to the driver. */
    s->ident = PyMem_RawCalloc(nprocs > 0 ? (size_t)nprocs : 1, sizeof *s->ident);
    s->pc = pc;
    s->next = spawns;
    spawns = s;
    PyTuple_SET_ITEM(res, 0, PyLong_FromLong(0)); /* rc 0: a cached small int, no allocation */
    PyTuple_SET_ITEM(res, 1, handle);
    return res;
}

/* spawn_check(core or None, nprocs, stack_size) -> (rc, why): kb_spawn_check. */
PyObject *accel_spawn_check(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *core;
    int nprocs;
    Py_ssize_t stack_size;
    if (!PyArg_ParseTuple(args, "Oin", &core, &nprocs, &stack_size))
        return NULL;
    if ((core != Py_None && !PyObject_TypeCheck(core, &accel_core_type)) || stack_size < 0) {
        PyErr_SetString(PyExc_TypeError, "spawn_check(core, nprocs, stack_size)");
        return NULL;
    }
    kb_spawn_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.stack_size = (size_t)stack_size;
    opts.cancel_mode = KB_CANCEL_RETURN;
    char why[512];
    int rc;
    const kb_ctx *ctx = core == Py_None ? NULL : ((Core *)core)->ctx;
    Py_BEGIN_ALLOW_THREADS /* it may read a few /proc files */
        rc = kb_spawn_check(ctx, nprocs, &opts, why, sizeof why);
    Py_END_ALLOW_THREADS return Py_BuildValue("(is)", rc, why);
}

/* ctx_dump(core, fd, flags): kb_ctx_dump, KbError on failure. */
PyObject *accel_ctx_dump(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *core;
    int fd;
    unsigned flags;
    if (!PyArg_ParseTuple(args, "OiI", &core, &fd, &flags))
        return NULL;
    if (!PyObject_TypeCheck(core, &accel_core_type)) {
        PyErr_SetString(PyExc_TypeError, "ctx_dump(core, fd, flags)");
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS /* each rank's thread writes its own frames */
        rc = kb_ctx_dump(((Core *)core)->ctx, fd, flags);
    Py_END_ALLOW_THREADS if (rc != 0) return accel_raise_kb_error(rc, "ctx_dump");
    Py_RETURN_NONE;
}

/* ctx_reset(core): kb_ctx_reset, KbError on failure. */
PyObject *accel_ctx_reset(PyObject *mod, PyObject *core)
{
    (void)mod;
    if (!PyObject_TypeCheck(core, &accel_core_type)) {
        PyErr_SetString(PyExc_TypeError, "ctx_reset(core)");
        return NULL;
    }
    int rc = kb_ctx_reset(((Core *)core)->ctx);
    if (rc != 0)
        return accel_raise_kb_error(rc, "reset");
    Py_RETURN_NONE;
}

/* The process context of the spawn Python holds as addr: the address of
 * its record (accel_core_start). */
static kb_process_context *parse_pc(PyObject *addr)
{
    struct spawn *p = PyLong_AsVoidPtr(addr);
    if (!p && PyErr_Occurred())
        return NULL;
    for (struct spawn *s = spawns; s; s = s->next)
        if (s == p)
            return s->pc;
    PyErr_SetString(PyExc_ValueError, "kbthreads._accel: no process context");
    return NULL;
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
    return Py_BuildValue("(KKKKKKKsNKN)", (unsigned long long)st.rounds, (unsigned long long)st.turns,
                         (unsigned long long)st.handoffs, (unsigned long long)st.drains,
                         (unsigned long long)st.engine_waits, (unsigned long long)st.collectives,
                         (unsigned long long)st.wall_ns, kb_wait_mode_name(st.wait_mode),
                         PyBool_FromLong(st.wait_reactive), (unsigned long long)st.wait_switches, ns);
}

PyObject *accel_process_context_free(PyObject *mod, PyObject *addr)
{
    (void)mod;
    kb_process_context *pc = parse_pc(addr);
    if (!pc)
        return NULL;
    Py_BEGIN_ALLOW_THREADS /* cancelled ranks run their cleanup, the abort hook runs */
        kb_process_context_free(pc);
    Py_END_ALLOW_THREADS spawn_forget(pc);
    Py_RETURN_NONE;
}

/* ---- Ctrl-C while a spawn is driven -------------------------------------------
 *
 * Python runs its SIGINT handler on the main thread only, and only when that
 * thread runs Python code; while it drives a spawn it is blocked in kb_join
 * (or kb_process_context_free), and a rank that holds the baton may be
 * anywhere. So, while the main thread drives a spawn (a session, begun and
 * ended by _interrupt.py around its joining and freeing), SIGINT goes to
 * this file's handler, which counts it and wakes the watcher:
 *
 *   watcher   a thread that never takes the GIL. At the first Ctrl-C it wakes
 *             the deliverer and arms the grace period; at the second, or
 *             when the grace period ends with the interrupt not delivered,
 *             it writes every rank's state and Python stack (kb_ctx_dump)
 *             and ends the process by SIGINT, as an uncaught Ctrl-C ends
 *             Python (a shell's status 130).
 *   deliverer a thread that takes the GIL: it raises KeyboardInterrupt
 *             (PyThreadState_SetAsyncExc) in the thread running the spawn's
 *             code, kb_running_rank's: a rank, or the main thread when the
 *             driver holds the baton (an engine hook). The exception is
 *             raised when that thread next runs Python code: at once for a
 *             rank in Python code, when the call returns for one in a C
 *             call. While it is not raised and the baton moves on, it is
 *             taken back and raised in the new holder instead, so a rank
 *             suspended in a suspension point never keeps one (it would
 *             fire in its cleanup when it is cancelled).
 *
 * The session's end takes back an exception not yet raised and says whether
 * one was (delivered): if not, _interrupt.py raises KeyboardInterrupt in
 * the caller. State is under intr.lock; the deliverer and the main thread
 * take it holding the GIL, the watcher and the signal handler never wait
 * for the GIL (the handler only counts and posts a semaphore).
 */

static struct {
    pthread_mutex_t lock;
    sem_t wake_watcher, wake_deliverer;
    int started;  /* the two threads exist (in this process) */
    int active;   /* ck_pr-like: read by the signal handler */
    int presses;  /* Ctrl-C seen in this session (the handler adds) */
    int carried;  /* of them, pressed before it began (interrupt_begin's) */
    unsigned gen; /* session number */
    unsigned deliver_gen;
    kb_ctx *ctx;
    struct spawn *spawn;
    unsigned long main_ident; /* the thread driving the spawn */
    long grace_ms;            /* < 0: only a second Ctrl-C ends the process */
    unsigned long target;     /* the thread with our KeyboardInterrupt pending, 0: none */
    int delivered;            /* a KeyboardInterrupt of ours was raised */
    struct sigaction saved;
} intr = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    for (size_t done = 0; done < len;) {
        ssize_t w = write(2, line + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

static void on_sigint(int sig, siginfo_t *si, void *uctx)
{
    int saved = errno;
    if (__atomic_load_n(&intr.active, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&intr.presses, 1, __ATOMIC_ACQ_REL);
        sem_post(&intr.wake_watcher);
    } else if (intr.saved.sa_flags & SA_SIGINFO) { /* between a session's end and the restore */
        if (intr.saved.sa_sigaction)
            intr.saved.sa_sigaction(sig, si, uctx);
    } else if (intr.saved.sa_handler != SIG_DFL && intr.saved.sa_handler != SIG_IGN) {
        intr.saved.sa_handler(sig);
    }
    errno = saved;
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Who the spawn's code runs on now, as text. */
static void running_text(char *buf, size_t size)
{
    int r = kb_running_rank(intr.ctx);
    if (r >= 0)
        snprintf(buf, size, "rank %d (kb-rank-%d)", r, r);
    else if (r == KB_RUNNING_DRIVER)
        snprintf(buf, size, "the driver (an engine hook?)");
    else
        snprintf(buf, size, "the spawn");
}

/* End the process as an uncaught Ctrl-C ends Python: by SIGINT. */
static _Noreturn void end_by_sigint(void)
{
    signal(SIGINT, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), SIGINT);
    sleep(1);
    _exit(128 + SIGINT);
}

/* The watcher's last act (intr.lock held, the session active). */
static _Noreturn void end_process(const char *why)
{
    say("\nkbthreads: Ctrl-C: %s; every rank's state and stack follow, then the process ends (SIGINT)\n",
        why);
    kb_ctx_dump(intr.ctx, 2, KB_DUMP_HOLDER_C_FRAMES);
    say("kbthreads: Ctrl-C: ending the process\n");
    end_by_sigint();
}

static void *watcher_main(void *unused)
{
    (void)unused;
    unsigned gen = 0;
    int seen = 0, armed = 0, noticed = 0;
    long long first = 0;
    for (;;) {
        if (armed) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += 50 * 1000000L; /* a clock-independent tick: deadlines are monotonic */
            if (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
            }
            sem_timedwait(&intr.wake_watcher, &t);
        } else {
            sem_wait(&intr.wake_watcher);
        }
        pthread_mutex_lock(&intr.lock);
        if (!intr.active) {
            armed = 0;
            pthread_mutex_unlock(&intr.lock);
            continue;
        }
        if (intr.gen != gen) { /* a new session: presses carried in by it count as seen */
            gen = intr.gen;
            seen = intr.carried;
            armed = noticed = 0;
        }
        int presses = __atomic_load_n(&intr.presses, __ATOMIC_ACQUIRE);
        if (presses > seen) {
            if (seen > 0 || presses >= 2)
                end_process("pressed again");
            seen = presses;
            first = now_ms();
            armed = 1;
            intr.deliver_gen = gen;
            sem_post(&intr.wake_deliverer);
        }
        if (armed && intr.delivered)
            armed = 0; /* raised: what follows is the program's, as for any KeyboardInterrupt */
        if (armed) {
            long long waited = now_ms() - first;
            char who[64];
            running_text(who, sizeof who);
            if (intr.grace_ms >= 0 && waited >= intr.grace_ms) {
                char why[160];
                snprintf(why, sizeof why, "%s did not stop within %ld ms (a call Python cannot interrupt)",
                         who, intr.grace_ms);
                end_process(why);
            }
            if (!noticed && waited >= 250) {
                noticed = 1;
                if (intr.grace_ms >= 0)
                    say("kbthreads: Ctrl-C: waiting for %s, which runs a call Python cannot interrupt; the "
                        "process "
                        "ends in %.1f s, or at the next Ctrl-C\n",
                        who, (double)(intr.grace_ms - waited) / 1000);
                else
                    say("kbthreads: Ctrl-C: waiting for %s, which runs a call Python cannot interrupt; "
                        "Ctrl-C "
                        "again ends the process\n",
                        who);
            }
        }
        pthread_mutex_unlock(&intr.lock);
    }
    return NULL;
}

/* Is the KeyboardInterrupt set in thread ident still pending (1), raised
 * (0), or gone with the thread's state (-1: a rank that ended meanwhile)?
 * GIL held. */
static int async_pending(unsigned long ident)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t))
        if (t->thread_id == ident)
            return t->async_exc != NULL;
    return -1;
}

/* One step of the delivery (GIL and intr.lock held): 1 when it is over. */
static int deliver_step(unsigned gen)
{
    if (!intr.active || intr.gen != gen || intr.delivered)
        return 1;
    int r = kb_running_rank(intr.ctx);
    unsigned long want = 0;
    if (r >= 0 && intr.spawn && intr.spawn->ident && r < intr.spawn->nprocs)
        want = intr.spawn->ident[r];
    else if (r == KB_RUNNING_DRIVER)
        want = intr.main_ident;
    if (intr.target) {
        int pending = async_pending(intr.target);
        if (pending == 0) {
            intr.delivered = 1;
            sem_post(&intr.wake_watcher);
            return 1;
        }
        if (pending > 0 && (!want || want == intr.target))
            return 0; /* pending where the code runs, or the baton is between threads */
        if (pending > 0)
            PyThreadState_SetAsyncExc(intr.target, NULL); /* the baton moved on: take it back */
        intr.target = 0;
    }
    if (want && PyThreadState_SetAsyncExc(want, PyExc_KeyboardInterrupt) == 1)
        intr.target = want;
    return 0;
}

static void *deliverer_main(void *unused)
{
    (void)unused;
    for (;;) {
        while (sem_wait(&intr.wake_deliverer) != 0)
            ;
        pthread_mutex_lock(&intr.lock);
        unsigned gen = intr.deliver_gen;
        pthread_mutex_unlock(&intr.lock);
        PyGILState_STATE g = PyGILState_Ensure();
        for (;;) {
            pthread_mutex_lock(&intr.lock);
            int over = deliver_step(gen);
            pthread_mutex_unlock(&intr.lock);
            if (over)
                break;
            Py_BEGIN_ALLOW_THREADS usleep(2000);
            Py_END_ALLOW_THREADS
        }
        PyGILState_Release(g);
    }
    return NULL;
}

static void after_fork_in_child(void)
{
    /* The threads are the parent's: a child makes its own when it drives a spawn. */
    pthread_mutex_init(&intr.lock, NULL);
    intr.started = 0;
    intr.active = 0;
}

static int start_threads(void)
{
    if (intr.started)
        return 0;
    static int atfork;
    if (!atfork) {
        pthread_atfork(NULL, NULL, after_fork_in_child);
        atfork = 1;
    }
    if (sem_init(&intr.wake_watcher, 0, 0) != 0 || sem_init(&intr.wake_deliverer, 0, 0) != 0)
        return -1;
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, (size_t)256 << 10);
    int ok = pthread_create(&t, &attr, watcher_main, NULL) == 0;
#ifdef __linux__
    if (ok)
        pthread_setname_np(t, "kb-ctrl-c");
#endif
    if (ok)
        ok = pthread_create(&t, &attr, deliverer_main, NULL) == 0;
#ifdef __linux__
    if (ok)
        pthread_setname_np(t, "kb-ctrl-c-send");
#endif
    pthread_attr_destroy(&attr);
    if (!ok)
        return -1; /* a watcher without a deliverer still ends the process: not undone */
    intr.started = 1;
    return 0;
}

/* interrupt_begin(core, pc, grace_ms, presses) -> bool: Ctrl-C is this
 * file's until interrupt_end() (main thread, Python's own SIGINT handler in
 * place: _interrupt.py checks). presses: Ctrl-C already pressed (the next
 * one ends the process). False when it cannot take Ctrl-C (no threads):
 * Python's handler stays. */
PyObject *accel_interrupt_begin(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *core, *addr;
    long grace_ms;
    int presses;
    if (!PyArg_ParseTuple(args, "OOli", &core, &addr, &grace_ms, &presses))
        return NULL;
    if (!PyObject_TypeCheck(core, &accel_core_type)) {
        PyErr_SetString(PyExc_TypeError, "interrupt_begin(core, pc, grace_ms, presses)");
        return NULL;
    }
    kb_process_context *pc = parse_pc(addr);
    if (!pc)
        return NULL;
    pthread_mutex_lock(&intr.lock);
    if (intr.active || start_threads() != 0) { /* nested (cannot happen: one main thread) */
        pthread_mutex_unlock(&intr.lock);
        Py_RETURN_FALSE;
    }
    intr.gen++;
    intr.ctx = ((Core *)core)->ctx;
    intr.spawn = spawn_of(pc);
    intr.main_ident = PyThread_get_thread_ident();
    intr.grace_ms = grace_ms;
    intr.target = 0;
    intr.delivered = presses > 0; /* the first Ctrl-C was the caller's: no grace period */
    intr.carried = presses;
    __atomic_store_n(&intr.presses, presses, __ATOMIC_RELEASE);
    __atomic_store_n(&intr.active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&intr.lock);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGINT, &sa, &intr.saved);
    sem_post(&intr.wake_watcher); /* it learns of the session */
    Py_RETURN_TRUE;
}

/* interrupt_end() -> (presses, delivered): Python's SIGINT handler back;
 * a KeyboardInterrupt of ours not yet raised is taken back. */
PyObject *accel_interrupt_end(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    pthread_mutex_lock(&intr.lock);
    __atomic_store_n(&intr.active, 0, __ATOMIC_RELEASE);
    int presses = __atomic_load_n(&intr.presses, __ATOMIC_ACQUIRE);
    if (intr.target) {
        int pending = async_pending(intr.target);
        if (pending > 0)
            PyThreadState_SetAsyncExc(intr.target, NULL);
        else if (pending == 0)
            intr.delivered = 1;
        intr.target = 0;
    }
    int delivered = intr.delivered;
    intr.ctx = NULL;
    intr.spawn = NULL;
    intr.gen++;
    pthread_mutex_unlock(&intr.lock);
    sigaction(SIGINT, &intr.saved, NULL);
    sem_post(&intr.wake_watcher);
    return Py_BuildValue("(iO)", presses, delivered ? Py_True : Py_False);
}
