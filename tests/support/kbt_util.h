/* SPDX-License-Identifier: MIT */
/*
 * Small header-only helpers shared by the api/baton/resources/determinism/
 * fault tests: thread and memory counters from /proc, a forked-child runner
 * that captures stderr, and Valgrind detection. Everything is static inline
 * so each test program (built from one .c file) can include it freely.
 */
#ifndef KBT_UTIL_H
#define KBT_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <valgrind/valgrind.h>

#include "kbthreads.h"

/* What a backtrace printed by the library must contain to show frame: the
 * frame itself, or the library's line saying it has no backtrace on this
 * system (kb_features(), KB_FEATURE_BACKTRACE). */
static inline const char *kbt_backtrace_shows(const char *frame)
{
    return (kb_features() & KB_FEATURE_BACKTRACE) ? frame : "(no backtrace on this system)";
}

static inline int kbt_on_valgrind(void)
{
    return RUNNING_ON_VALGRIND ? 1 : 0;
}

/* A small file's text, NUL-terminated, in a static buffer (the next call
 * reuses it), or NULL when it cannot be read. */
static inline const char *kbt_slurp(const char *file)
{
    static char buf[65536];
    FILE *f = fopen(file, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Write text to file: 0, or -1. */
static inline int kbt_spit(const char *file, const char *text)
{
    FILE *f = fopen(file, "w");
    if (!f)
        return -1;
    int rc = fputs(text, f) < 0 ? -1 : 0;
    return fclose(f) != 0 ? -1 : rc;
}

/* Remove a test's scratch directory and everything in it: 0, or -1. */
static inline int kbt_rm_rf(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* 1 when built with AddressSanitizer or ThreadSanitizer. */
static inline int kbt_under_sanitizer(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return 1;
#else
    return 0;
#endif
#else
    return 0;
#endif
}

/* The CPUs the calling thread may run on (its affinity mask), or the
 * online CPUs where the library has no affinity to read. */
static inline int kbt_real_cpus(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if ((kb_features() & KB_FEATURE_AFFINITY) && sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The CPU count the wait policy makes its choices for
 * (src/wait_policy.c): KB_TEST_CPUS when the suite is run with it
 * (tests give the policy 1, 2, 4 or 64 CPUs that way on any machine),
 * else the real count. Seating and the affinity options pin to the real
 * CPUs whatever it says. */
static inline int kbt_policy_cpus(void)
{
    const char *v = getenv("KB_TEST_CPUS");
    char *end = NULL;
    long n = v && *v ? strtol(v, &end, 10) : 0;
    return end && *end == '\0' && n >= 1 && n <= 65536 ? (int)n : kbt_real_cpus();
}

/* Number of threads of this process (entries in /proc/self/task), or -1. */
static inline long kbt_task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static inline void kbt_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Joined threads can linger in /proc/self/task for a moment (FIELD-NOTES):
 * poll until the count is at most target or max_ms passed; return the last
 * count seen. */
static inline long kbt_settle_tasks(long target, long max_ms)
{
    long n = kbt_task_count();
    for (long waited = 0; n > target && waited < max_ms; waited += 2) {
        kbt_sleep_ms(2);
        n = kbt_task_count();
    }
    return n;
}

static inline void *kbt_noop_thread(void *arg)
{
    return arg;
}

/* The thread count to compare against later: start and join one plain
 * thread first, so runtime helper threads that appear with the first
 * pthread_create (ThreadSanitizer's background thread) already exist, then
 * wait until the count reaches 1 or stops falling (joined threads linger)
 * for 100 ms, at most 2 s. */
static inline long kbt_thread_baseline(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, kbt_noop_thread, NULL) == 0)
        pthread_join(t, NULL);
    long n = kbt_task_count(), stable_ms = 0;
    for (long waited = 0; n > 1 && stable_ms < 100 && waited < 2000; waited += 2) {
        kbt_sleep_ms(2);
        long m = kbt_task_count();
        stable_ms = m < n ? 0 : stable_ms + 2;
        n = m < n ? m : n;
    }
    return n;
}

/* Resident set size in pages (second field of /proc/self/statm), or -1. */
static inline long kbt_rss_pages(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    long size = 0, rss = -1;
    if (fscanf(f, "%ld %ld", &size, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss;
}

/* Bytes the allocator has handed out and not got back (all arenas, mmapped
 * chunks included). */
static inline size_t kbt_heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Result of a forked child. */
struct kbt_child {
    int status;     /* waitpid status */
    int timed_out;  /* 1 if the child was killed for running too long */
    char out[8192]; /* what the child wrote to stderr, NUL-terminated */
    size_t out_len;
};

/* Fork; in the child route stderr into a pipe (stdout to /dev/null), disable core dumps,
 * run fn(arg) and _exit(fn's return value). The parent collects the output,
 * kills the child after timeout_ms and reaps it. Returns 0, or -1 if fork or
 * pipe failed. Call it only while this process has no other threads. */
static inline int kbt_run_forked(int (*fn)(void *), void *arg, long timeout_ms, struct kbt_child *res)
{
    int fds[2];
    memset(res, 0, sizeof *res);
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        if (!freopen("/dev/null", "w", stdout))
            close(STDOUT_FILENO);
        int rc = fn(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    close(fds[1]);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (now.tv_sec - t0.tv_sec) * 1000L + (now.tv_nsec - t0.tv_nsec) / 1000000L;
        if (elapsed >= timeout_ms) {
            res->timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int pr = poll(&p, 1, (int)(timeout_ms - elapsed));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        char tmp[1024];
        ssize_t n = read(fds[0], tmp, sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t room = sizeof res->out - 1 - res->out_len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(res->out + res->out_len, tmp, take);
        res->out_len += take;
    }
    res->out[res->out_len] = '\0';
    close(fds[0]);
    while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR) {
    }
    return 0;
}

/* Directory of the running executable (for helper programs built beside the
 * tests), written into buf; 0 on success. */
static inline int kbt_exe_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

/* The calling process's stderr into a temporary file from kbt_stderr_begin
 * to kbt_stderr_end, which puts what was written in buf (cap bytes,
 * NUL-terminated): for a warning printed by a call whose result the test
 * also needs (kbt_child_* captures a child's instead). 0, or -1 when stderr
 * could not be redirected. */
struct kbt_stderr {
    FILE *tmp;
    int saved;
};

static inline int kbt_stderr_begin(struct kbt_stderr *c)
{
    fflush(stderr);
    c->tmp = tmpfile();
    c->saved = c->tmp ? dup(2) : -1;
    if (c->saved < 0 || dup2(fileno(c->tmp), 2) < 0) {
        if (c->saved >= 0)
            close(c->saved);
        if (c->tmp)
            fclose(c->tmp);
        return -1;
    }
    return 0;
}

static inline void kbt_stderr_end(struct kbt_stderr *c, char *buf, size_t cap)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    rewind(c->tmp);
    size_t len = fread(buf, 1, cap - 1, c->tmp);
    buf[len] = '\0';
    fclose(c->tmp);
}

#endif
