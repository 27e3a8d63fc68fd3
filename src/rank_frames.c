/* SPDX-License-Identifier: MIT */
/*
 * A rank thread's frames, written by the thread itself in a handler of
 * KB_STALL_SIGNAL: first what the frames writer a binding installed writes
 * (kb_set_frames_writer: its interpreter's stack, which only that thread
 * can read safely while it is stopped in the handler), then, for the
 * reports, the C backtrace.
 *
 * The handler is installed once per process, by the first run with the
 * stall watchdog on or by kb_set_frames_writer. It answers two requests,
 * told apart by who sent the signal:
 *
 *   the stall watchdog   pthread_kill from this process (si_code SI_TKILL):
 *                        the frames on stderr, then a post of frames_done,
 *                        which the reporting driver waits for;
 *   kbthreads-dump       rt_tgsigqueueinfo from another process (SI_QUEUE,
 *                        si_value = fd | max_frames << 16): the frames
 *                        writer's output, between two marker lines, is
 *                        appended to /proc/<si_pid>/fd/<fd>, a file the
 *                        tool holds open (docs/debugging.md, "How
 *                        kbthreads-dump reads a rank's Python stack").
 *
 * Any other sender is ignored. The crash handler (crash.c) calls
 * kb__frames_write_self directly: it already runs on the rank's thread.
 * Everything the handler does is async-signal-safe (sigsafe.h, open,
 * write, close, sem_post, backtrace after a warm-up); the writer must be.
 */
#include "rank_frames.h"

#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "annotate.h"
#include "kbthreads.h"
#include "sigsafe.h"
#include "system.h"

/* The frames writer. Published by a ck_pr store of the pointer to the one
 * struct, read by handlers with a load; kb_set_frames_writer unpublishes it
 * while it changes the fields. */
struct frames_hook {
    kb_frames_writer fn;
    void *arg;
};
static struct frames_hook hook_store;
static struct frames_hook *hook;

static sem_t frames_done;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* What a request from this process asks for (kb__frames_of_thread sets it
 * under frames_lock before it signals; the handler reads it). */
static pthread_mutex_t frames_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int fd;
    int c_frames;
} request = {2, 1};

/* The marker lines of a kbthreads-dump answer (tools/kbthreads_tools/dump.py
 * reads them). */
#define MARK_BEGIN "kbthreads-frames begin "
#define MARK_END   "kbthreads-frames end "

void kb__frames_write_self(int fd, int max_frames, int c_frames)
{
    struct frames_hook *h = ck_pr_load_ptr(&hook);
    if (h) {
        kb__hb_acquire(h);
        h->fn(fd, max_frames, h->arg);
        if (c_frames) {
            static const char c_line[] = "  C frames:\n";
            kb__ss_write(fd, c_line, sizeof c_line - 1);
        }
    }
    if (c_frames)
        kb__sys_backtrace_fd(fd);
}

/* A marker line: prefix, then this thread's LWP. */
static void write_marker(int fd, const char *prefix)
{
    char line[64];
    size_t n = kb__ss_put(line, 0, sizeof line, prefix);
    n = kb__ss_put_long(line, n, sizeof line, kb__sys_tid());
    n = kb__ss_put(line, n, sizeof line, "\n");
    kb__ss_write(fd, line, n);
}

/* kbthreads-dump's request: append this thread's frames to the tool's file. */
static void answer_tool(pid_t tool, int value)
{
    int tool_fd = value & 0xffff, max_frames = (value >> 16) & 0x7fff;
    char path[64];
    size_t n = kb__ss_put(path, 0, sizeof path, "/proc/");
    n = kb__ss_put_long(path, n, sizeof path, tool);
    n = kb__ss_put(path, n, sizeof path, "/fd/");
    n = kb__ss_put_long(path, n, sizeof path, tool_fd);
    path[n] = '\0';
    /* A tool that is gone, or a file that is no longer ours to write:
     * nothing to answer. O_NONBLOCK: never wait on a FIFO in a handler. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return;
    write_marker(fd, MARK_BEGIN);
    struct frames_hook *h = ck_pr_load_ptr(&hook);
    if (h) {
        kb__hb_acquire(h);
        h->fn(fd, max_frames, h->arg);
    }
    write_marker(fd, MARK_END);
    close(fd);
}

static void on_signal(int sig, siginfo_t *si, void *uctx)
{
    (void)sig;
    (void)uctx;
    int saved = errno;
    if (si->si_code == SI_QUEUE && si->si_pid != getpid()) {
        answer_tool(si->si_pid, si->si_value.sival_int);
    } else if (si->si_code == SI_TKILL && si->si_pid == getpid()) {
        kb__hb_acquire(&request);
        kb__frames_write_self(ck_pr_load_int(&request.fd), 0, ck_pr_load_int(&request.c_frames));
        sem_post(&frames_done);
    }
    errno = saved;
}

static void install(void)
{
    kb__sys_backtrace_warm(); /* loads libgcc_s now, not inside the handler */
    sem_init(&frames_done, 0, 0);
    kb__hb_sync_word(&request, sizeof request);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: the rank's interrupted system calls go on; a sleep
     * returns early (docs/debugging.md). */
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(KB_STALL_SIGNAL, &sa, NULL);
}

void kb__frames_install(void)
{
    pthread_once(&install_once, install);
}

int kb__frames_of_thread(pthread_t t, int fd, int c_frames)
{
    if (pthread_equal(t, pthread_self())) {
        kb__frames_write_self(fd, 0, c_frames);
        return 0;
    }
    pthread_mutex_lock(&frames_lock);
    while (sem_trywait(&frames_done) == 0) /* a late answer of an earlier report */
        ;
    ck_pr_store_int(&request.fd, fd);
    ck_pr_store_int(&request.c_frames, c_frames);
    kb__hb_release(&request); /* the handler's thread reads it: the signal orders it, unseen by the tools */
    int rc = -1;
    if (pthread_kill(t, KB_STALL_SIGNAL) == 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        while ((rc = sem_timedwait(&frames_done, &until)) != 0 && errno == EINTR)
            ;
    }
    pthread_mutex_unlock(&frames_lock);
    return rc == 0 ? 0 : -1;
}

int kb_set_frames_writer(kb_frames_writer fn, void *arg)
{
    kb__frames_install();
    ck_pr_store_ptr(&hook, NULL);
    ck_pr_fence_store();
    if (!fn)
        return 0;
    hook_store.fn = fn;
    hook_store.arg = arg;
    kb__hb_release(&hook_store);
    ck_pr_fence_store();
    ck_pr_store_ptr(&hook, &hook_store);
    return 0;
}
