/* SPDX-License-Identifier: MIT */
/*
 * The system-dependent calls: one interface, two implementations of each
 * concern in its own file, chosen by src/CMakeLists.txt (the one #ifdef
 * left is struct kb_cpumask's, below):
 *   thread ids, names, CPU affinity   system_linux.c | system_posix.c
 *   backtraces                        system_backtrace_execinfo.c |
 *                                     system_backtrace_none.c
 * KB_PORTABLE=ON builds the POSIX side of both on Linux too. What each
 * fallback does is in kbthreads.h (kb_features) and docs/design.md
 * ("Portability"); the KB_HAVE_* definitions say which side was built.
 */
#ifndef KB_SYSTEM_H
#define KB_SYSTEM_H

#include <pthread.h>
#include <sched.h>

/* A thread's CPU affinity. Without KB_HAVE_AFFINITY it holds nothing and
 * every call below fails (kb_spawn refuses the affinity options first:
 * KB_ENOTSUP). */
struct kb_cpumask {
#ifdef KB_HAVE_AFFINITY
    cpu_set_t set;
#else
    int none;
#endif
};

/* The calling thread's kernel thread id for debuggers, 0 where there is
 * none to give (the gdb script then matches threads by pthread_t). */
int kb__sys_tid(void);
/* Name thread t (at most 15 bytes are kept); nothing where the system
 * cannot name another thread. */
void kb__sys_name_thread(pthread_t t, const char *name);
/* The calling thread's affinity: 0, or -1 (none to read). */
int kb__sys_get_affinity(struct kb_cpumask *m);
/* Set the calling thread's affinity: 0, or -1. */
int kb__sys_set_affinity(const struct kb_cpumask *m);
/* Pin the calling thread to cpu: 0, or -1 (not allowed, or no affinity). */
int kb__sys_pin_self(int cpu);
/* The CPUs in m, ascending, into cpus (room for cap; cap >= the count):
 * their number. kb__sys_mask_count(m) first tells how many. */
int kb__sys_mask_count(const struct kb_cpumask *m);
int kb__sys_mask_cpus(const struct kb_cpumask *m, int *cpus, int cap);
/* Move the calling thread onto cpu and leave its affinity as it was:
 * pin it there (the kernel migrates a running thread before the call
 * returns), then set the mask it had back, so it stays there until the
 * scheduler moves it and no code finds it confined. 0; -1 when it could
 * not be moved (cpu not allowed, no affinity: nothing changed). If the old
 * mask cannot be set back (a cpuset shrank meanwhile), the process's mask
 * (its main thread's) is set instead: never wider than what the process
 * was given. */
int kb__sys_seat_self(int cpu);
/* The CPU the calling thread runs on, 0 if unknown. */
int kb__sys_current_cpu(void);
/* Write the calling thread's backtrace to fd, or a line saying there is
 * none; async-signal-safe once kb__sys_backtrace_warm has run. */
void kb__sys_backtrace_fd(int fd);
/* Load what the backtrace needs (libgcc_s) now, not in a signal handler. */
void kb__sys_backtrace_warm(void);

#endif
