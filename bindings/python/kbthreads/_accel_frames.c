/* SPDX-License-Identifier: MIT */
/*
 * kbthreads._accel, the Python frames writer (kb_set_frames_writer): a
 * rank thread's Python stack in the stall report, the crash report and
 * kbthreads-dump, read the way faulthandler reads it.
 *
 * The library calls the writer on the rank's own thread, in a signal
 * handler, wherever the thread stopped: in a C loop holding the GIL, in
 * time.sleep without it, suspended in kb_yield. Taking the GIL there could
 * deadlock, and a frame object cannot be made without it. CPython's own
 * frame walker that needs neither is faulthandler's: _frames.py registers
 * faulthandler for one signal (all_threads=False) with a memfd as its
 * file. The writer empties the memfd, raises that signal on its own thread
 * (faulthandler then writes this thread's stack into the memfd, innermost
 * first, read through the thread's own thread state), reads it back and
 * writes it out innermost last, as a traceback does:
 *
 *   Python stack (most recent call last):
 *     File "sim.py", line 12, in main
 *     File "sim.py", line 3, in load_checkpoint
 *
 * Everything here is async-signal-safe: lseek, ftruncate, raise, pread,
 * write and plain loops over a static buffer. One writer runs at a time
 * (the library serialises the reports; kbthreads-dump asks one rank after
 * the other); a second one concurrently writes a line saying so.
 */
#include "_accel.h"

#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

static int frames_fd = -1; /* faulthandler's file for frames_sig (a memfd) */
static int frames_sig;     /* the signal faulthandler is registered for */
static int frames_busy;    /* a writer is running (one static buffer) */
static char text[1 << 16]; /* what faulthandler wrote */
static char out[1024];     /* one output line */

#define MAX_LINES 256 /* faulthandler writes at most 100 frames */
/* The frame lines found in text (static: the crash report runs on a small
 * alternate signal stack). */
static const char *lines[MAX_LINES], *ends[MAX_LINES];

static void put_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void put_str(int fd, const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    put_all(fd, s, n);
}

static int starts_with(const char *p, const char *end, const char *prefix)
{
    for (; *prefix; p++, prefix++)
        if (p >= end || *p != *prefix)
            return 0;
    return 1;
}

/* One faulthandler frame line, `  File "F", line N in NAME`, written as a
 * traceback's `    File "F", line N, in NAME`. The file name may hold
 * anything, so the last `", line ` of the line ends it. */
static void put_frame(int fd, const char *line, const char *end)
{
    const char *cut = NULL;
    for (const char *p = line; p < end; p++)
        if (starts_with(p, end, "\", line "))
            cut = p;
    size_t n = 0;
    const char *src = line + 2; /* past faulthandler's indent */
#define OUT(c)                                                                                               \
    do {                                                                                                     \
        if (n + 2 < sizeof out)                                                                              \
            out[n++] = (c);                                                                                  \
    } while (0)
    OUT(' ');
    OUT(' ');
    OUT(' ');
    OUT(' ');
    if (!cut) {
        for (const char *p = src; p < end; p++)
            OUT(*p);
    } else {
        const char *p = src;
        for (; p < cut + 8; p++) /* File "F", line */
            OUT(*p);
        for (; p < end && *p != ' '; p++) /* N */
            OUT(*p);
        if (starts_with(p, end, " in ")) {
            OUT(',');
            OUT(' ');
            p++;
        }
        for (; p < end; p++)
            OUT(*p);
    }
#undef OUT
    out[n++] = '\n';
    put_all(fd, out, n);
}

static void python_frames_writer(int fd, int max_frames, void *arg)
{
    (void)arg;
    if (__atomic_exchange_n(&frames_busy, 1, __ATOMIC_ACQUIRE)) {
        put_str(fd, "  Python stack: not read (another report is reading one)\n");
        return;
    }
    ssize_t len = -1;
    if (lseek(frames_fd, 0, SEEK_SET) == 0 && ftruncate(frames_fd, 0) == 0 && raise(frames_sig) == 0)
        len = pread(frames_fd, text, sizeof text - 1, 0);
    if (len < 0)
        len = 0;
    int nframes = 0, truncated = 0, header = 0;
    const char *end = text + len;
    for (const char *p = text; p < end;) {
        const char *e = p;
        while (e < end && *e != '\n')
            e++;
        if (starts_with(p, e, "Stack (most recent call first):"))
            header = 1;
        else if (starts_with(p, e, "  File \"") && nframes < MAX_LINES) {
            lines[nframes] = p;
            ends[nframes++] = e;
        } else if (starts_with(p, e, "  ..."))
            truncated = 1;
        p = e < end ? e + 1 : e;
    }
    if (!header) {
        put_str(fd, "  Python stack: none (this thread runs no Python code, or faulthandler no longer "
                    "writes it: the signal kbthreads registered for it was taken)\n");
    } else if (nframes == 0) {
        put_str(fd, "  Python stack: no Python frame\n");
    } else {
        put_str(fd, "  Python stack (most recent call last):\n");
        int shown = max_frames > 0 && max_frames < nframes ? max_frames : nframes;
        if (truncated || shown < nframes)
            put_str(fd, "    ... (older frames not shown)\n");
        for (int i = shown - 1; i >= 0; i--) /* faulthandler writes the innermost first */
            put_frame(fd, lines[i], ends[i]);
    }
    __atomic_store_n(&frames_busy, 0, __ATOMIC_RELEASE);
}

/* set_frames_writer(fd, signum): faulthandler writes this thread's stack to
 * fd on signum (registered by _frames.py); install the writer. */
PyObject *accel_set_frames_writer(PyObject *mod, PyObject *args)
{
    (void)mod;
    int fd, sig;
    if (!PyArg_ParseTuple(args, "ii:set_frames_writer", &fd, &sig))
        return NULL;
    if (fd < 0 || sig <= 0 || sig >= NSIG) {
        PyErr_Format(PyExc_ValueError, "set_frames_writer: bad file descriptor %d or signal %d", fd, sig);
        return NULL;
    }
    frames_fd = fd;
    frames_sig = sig;
    int rc = kb_set_frames_writer(python_frames_writer, NULL);
    if (rc != 0)
        return accel_raise_kb_error(rc, "kb_set_frames_writer");
    Py_RETURN_NONE;
}
