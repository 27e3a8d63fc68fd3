/* SPDX-License-Identifier: MIT */
/*
 * Sizes checked before memory is spent: how many more threads this process
 * can create, for kb_spawn_check and for kb_spawn / kb_start before they
 * allocate anything (spawn_limits.h).
 *
 * A spawn needs a thread for each rank beyond the ctx's parked threads of
 * its stack size. Every limit below gives an upper bound on how many more
 * threads can be created now (the real room may be smaller: a thread that
 * cannot be created later still gives KB_EAGAIN, as before), so a spawn
 * that would fit is never refused; one that cannot fit is refused at once,
 * naming the tightest limit:
 *
 *   pid_max          every thread takes a pid: kernel.pid_max minus the
 *                    threads of the system (/proc/loadavg's count)
 *   threads-max      kernel.threads-max minus the same count
 *   RLIMIT_NPROC     the soft limit minus this process's threads (the user's
 *                    others count too); not for root or a process with
 *                    CAP_SYS_RESOURCE or CAP_SYS_ADMIN, which the kernel
 *                    exempts
 *   pids.max         the cgroup's, and each ancestor's: pids.max minus
 *                    pids.current
 *   RLIMIT_AS        the soft limit minus the address space in use, over a
 *                    stack and its guard page
 *   commit limit     with vm.overcommit_memory 2 only: CommitLimit minus
 *                    Committed_AS, over a stack (glibc charges each stack)
 *   memory           KB_THREAD_MIN_BYTES per thread that no overcommit
 *                    lends (its kernel stack and the pages of its own stack
 *                    a thread touches first): MemAvailable, and the
 *                    cgroup's memory.max minus memory.current
 *   vm.max_map_count two mappings per thread (its stack and guard page):
 *                    read only when a spawn needs more than a quarter of
 *                    vm.max_map_count in new mappings (counting the
 *                    process's mappings reads all of /proc/self/maps)
 *
 * Files that cannot be read (another system, a sandbox) skip their limit.
 * Nothing here allocates: files are read with open/read into stack buffers.
 */
#include "spawn_limits.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ctx.h"

/* What a thread costs at least in memory nothing can lend: a 16 KiB kernel
 * stack (x86-64, arm64), and two pages of its own stack that glibc and the
 * thread's first frames touch. Measured: 32 000 ranks took about 280 MB of
 * resident memory besides the kernel's. */
#define KB_THREAD_MIN_BYTES ((long long)24 << 10)
#define KB_GUARD_BYTES      ((long long)4096)

/* The tightest limit found so far. */
struct limit {
    long long room; /* more threads it leaves room for; LLONG_MAX: none found */
    char text[200]; /* "pid_max (32768) leaves room for 32611 (157 threads on the system)" */
};

static void consider(struct limit *best, long long room, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void consider(struct limit *best, long long room, const char *fmt, ...)
{
    if (room < 0)
        room = 0;
    if (room >= best->room)
        return;
    best->room = room;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(best->text, sizeof best->text, fmt, ap);
    va_end(ap);
}

/* Read a small file into buf (NUL-terminated): its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* The first integer of a file, or -1 ("max" and unreadable files: -1). */
static long long read_number(const char *path)
{
    char buf[64];
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    char *end;
    long long v = strtoll(buf, &end, 10);
    return end == buf ? -1 : v;
}

/* The number after "key" in a "Key:  value" file (/proc/self/status,
 * /proc/meminfo), or -1. */
static long long field_of(const char *text, const char *key)
{
    size_t len = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, len) == 0) {
            char *end;
            long long v = strtoll(p + len, &end, 10);
            return end == p + len ? -1 : v;
        }
    }
    return -1;
}

/* The threads of the system: /proc/loadavg's "running/total" field, or -1. */
static long long system_threads(void)
{
    char buf[128];
    if (read_small("/proc/loadavg", buf, sizeof buf) <= 0)
        return -1;
    const char *slash = strchr(buf, '/');
    if (!slash)
        return -1;
    char *end;
    long long v = strtoll(slash + 1, &end, 10);
    return end == slash + 1 ? -1 : v;
}

/* Does this process have CAP_SYS_RESOURCE (24) or CAP_SYS_ADMIN (21)? */
static int exempt_from_nproc(const char *status)
{
    if (getuid() == 0)
        return 1;
    const char *p = status ? strstr(status, "CapEff:") : NULL;
    if (!p)
        return 0;
    unsigned long long caps = strtoull(p + 7, NULL, 16);
    return (caps >> 24 & 1) || (caps >> 21 & 1);
}

/* Lines of /proc/self/maps (the process's mappings), or -1. */
static long long count_mappings(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    long long lines = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < r; i++)
            lines += buf[i] == '\n';
    close(fd);
    return r < 0 ? -1 : lines;
}

/* The cgroup v2 limits of this process's cgroup and each ancestor's. */
static void cgroup_limits(struct limit *best)
{
    char buf[512];
    if (read_small("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return;
    char *p = strstr(buf, "0::/"); /* the unified hierarchy's line */
    if (!p || (p != buf && p[-1] != '\n'))
        return;
    p += 3;
    char *nl = strchr(p, '\n');
    if (nl)
        *nl = '\0';
    char dir[600];
    for (;;) {
        char path[700];
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(p, "/") == 0 ? "" : p);
        snprintf(path, sizeof path, "%s/pids.max", dir);
        long long max = read_number(path);
        snprintf(path, sizeof path, "%s/pids.current", dir);
        long long cur = max >= 0 ? read_number(path) : -1;
        if (max >= 0 && cur >= 0)
            consider(best, max - cur, "the cgroup's pids.max (%lld, %s) leaves room for %lld (%lld in use)",
                     max, dir, max - cur, cur);
        snprintf(path, sizeof path, "%s/memory.max", dir);
        max = read_number(path);
        snprintf(path, sizeof path, "%s/memory.current", dir);
        cur = max >= 0 ? read_number(path) : -1;
        if (max >= 0 && cur >= 0)
            consider(
                best, (max - cur) / KB_THREAD_MIN_BYTES,
                "the cgroup's memory.max (%lld bytes, %s) leaves room for %lld (%lld bytes in use, at least "
                "%lld bytes a thread)",
                max, dir, (max - cur) / KB_THREAD_MIN_BYTES, cur, KB_THREAD_MIN_BYTES);
        char *slash = strrchr(p, '/');
        if (!slash || strcmp(p, "/") == 0)
            return;
        if (slash == p)
            p[1] = '\0'; /* the root */
        else
            *slash = '\0';
    }
}

/* The limits on threads in number. */
static void count_limits(struct limit *best, const char *status)
{
    long long threads = system_threads();
    long long pid_max = read_number("/proc/sys/kernel/pid_max");
    if (threads >= 0 && pid_max > 0)
        consider(best, pid_max - threads,
                 "pid_max (%lld, /proc/sys/kernel/pid_max) leaves room for %lld (%lld threads on the system)",
                 pid_max, pid_max - threads, threads);
    long long tmax = read_number("/proc/sys/kernel/threads-max");
    if (threads >= 0 && tmax > 0)
        consider(best, tmax - threads,
                 "threads-max (%lld, /proc/sys/kernel/threads-max) leaves room for %lld (%lld threads on the "
                 "system)",
                 tmax, tmax - threads, threads);
#ifdef RLIMIT_NPROC
    struct rlimit nproc;
    if (getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY &&
        nproc.rlim_cur < (rlim_t)LLONG_MAX && !exempt_from_nproc(status)) {
        long long own = status ? field_of(status, "Threads:") : -1;
        if (own < 0)
            own = 1;
        consider(best, (long long)nproc.rlim_cur - own,
                 "RLIMIT_NPROC (%lld, ulimit -u) leaves room for %lld at most (%lld threads in this process)",
                 (long long)nproc.rlim_cur, (long long)nproc.rlim_cur - own, own);
    }
#else
    (void)status;
#endif
    cgroup_limits(best);
}

/* The limits on memory and address space, for threads of stack bytes. */
static void memory_limits(struct limit *best, const char *status, long long stack, long long want)
{
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < (rlim_t)LLONG_MAX) {
        long long used = status ? field_of(status, "VmSize:") : -1; /* kB */
        used = used < 0 ? 0 : used << 10;
        long long per = stack + KB_GUARD_BYTES;
        consider(
            best, ((long long)as.rlim_cur - used) / per,
            "RLIMIT_AS (%lld bytes, ulimit -v) leaves room for %lld stacks of %lld bytes (%lld bytes in use)",
            (long long)as.rlim_cur, ((long long)as.rlim_cur - used) / per, per, used);
    }
    char info[4096];
    if (read_small("/proc/meminfo", info, sizeof info) > 0) {
        long long avail = field_of(info, "MemAvailable:"); /* kB */
        if (avail >= 0)
            consider(
                best, (avail << 10) / KB_THREAD_MIN_BYTES,
                "the memory available (MemAvailable %lld kB) leaves room for %lld (at least %lld bytes a "
                "thread)",
                avail, (avail << 10) / KB_THREAD_MIN_BYTES, KB_THREAD_MIN_BYTES);
        if (read_number("/proc/sys/vm/overcommit_memory") == 2) {
            long long limit = field_of(info, "CommitLimit:"), committed = field_of(info, "Committed_AS:");
            if (limit >= 0 && committed >= 0)
                consider(
                    best, ((limit - committed) << 10) / stack,
                    "the commit limit (vm.overcommit_memory 2: CommitLimit %lld kB, Committed_AS %lld kB) "
                    "leaves room for %lld stacks of %lld bytes",
                    limit, committed, ((limit - committed) << 10) / stack, stack);
        }
    }
    long long maps_max = read_number("/proc/sys/vm/max_map_count");
    if (maps_max > 0 && 2 * want > maps_max / 4) {
        long long maps = count_mappings();
        if (maps >= 0)
            consider(best, (maps_max - maps) / 2,
                     "vm.max_map_count (%lld) leaves room for %lld (%lld mappings in use, 2 a thread)",
                     maps_max, (maps_max - maps) / 2, maps);
    }
}

size_t kb__default_stack_size(void)
{
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_attr_init(&attr) == 0) {
        if (pthread_attr_getstacksize(&attr, &size) != 0)
            size = 0;
        pthread_attr_destroy(&attr);
    }
    return size ? size : (size_t)8 << 20;
}

/* The ctx's parked threads a spawn of stack_size reuses, and those it ends
 * (another stack size): kb__worker_get's rule. */
static void parked(const kb_ctx *ctx, size_t stack_size, long long *reused, long long *ended)
{
    *reused = *ended = 0;
    if (!ctx || !ctx->pool)
        return;
    if (ctx->pool_stack_size == stack_size)
        *reused = (long long)ctx->pool_count;
    else
        *ended = (long long)ctx->pool_count;
}

int kb__spawn_room(const kb_ctx *ctx, int nprocs, size_t stack_size, char *why, size_t why_size)
{
    if (why && why_size)
        why[0] = '\0';
    long long reused, ended;
    parked(ctx, stack_size, &reused, &ended);
    long long want = (long long)nprocs - reused;
    if (want <= 0)
        return 0; /* every rank gets a parked thread: nothing to read */
    char status[4096];
    const char *st = read_small("/proc/self/status", status, sizeof status) > 0 ? status : NULL;
    struct limit best = {LLONG_MAX, ""};
    count_limits(&best, st);
    long long stack = (long long)(stack_size ? stack_size : kb__default_stack_size());
    memory_limits(&best, st, stack, want);
    if (best.room != LLONG_MAX)
        best.room += ended; /* those threads end before any is created */
    if (best.room >= want)
        return 0;
    if (why && why_size)
        snprintf(why, why_size, "%d ranks need %lld new threads (%lld parked threads reused): %s", nprocs,
                 want, reused, best.text);
    return KB_EAGAIN;
}
