/* SPDX-License-Identifier: MIT */
/* The thread calls of system.h on Linux: kernel thread ids, thread names
 * and CPU affinity. src/CMakeLists.txt builds this file on Linux, unless
 * KB_PORTABLE=ON, and system_posix.c (the fallbacks) everywhere else. */
#include "system.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int kb__sys_tid(void)
{
    /* The system call, not glibc's gettid() wrapper (glibc 2.30 and later
     * only): every Linux libc can make it. */
    return (int)syscall(SYS_gettid);
}

void kb__sys_name_thread(pthread_t t, const char *name)
{
    /* Linux keeps 15 bytes and refuses more (ERANGE): cut, not lose. */
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    pthread_setname_np(t, cut);
}

int kb__sys_get_affinity(struct kb_cpumask *m)
{
    return pthread_getaffinity_np(pthread_self(), sizeof m->set, &m->set) == 0 ? 0 : -1;
}

int kb__sys_set_affinity(const struct kb_cpumask *m)
{
    return pthread_setaffinity_np(pthread_self(), sizeof m->set, &m->set) == 0 ? 0 : -1;
}

int kb__sys_pin_self(int cpu)
{
    struct kb_cpumask one;
    CPU_ZERO(&one.set);
    CPU_SET(cpu, &one.set);
    return kb__sys_set_affinity(&one);
}

int kb__sys_seat_self(int cpu)
{
    struct kb_cpumask was;
    if (cpu < 0 || cpu >= CPU_SETSIZE || kb__sys_get_affinity(&was) != 0 || !CPU_ISSET(cpu, &was.set))
        return -1;
    if (sched_getcpu() == cpu)
        return 0; /* there already: two system calls saved */
    if (kb__sys_pin_self(cpu) != 0)
        return -1;
    if (kb__sys_set_affinity(&was) != 0) {
        /* None of the old mask may be used any more (a cpuset shrank, or
         * CPUs went offline, between the two calls); the kernel has then
         * moved the thread off cpu itself. Take the process's mask, its
         * main thread's (what taskset or a cpuset gave the process), never
         * every CPU: a process confined with taskset would run outside
         * its CPUs. If that cannot be set either, the thread keeps what
         * the kernel left it. */
        struct kb_cpumask proc;
        if (sched_getaffinity(getpid(), sizeof proc.set, &proc.set) == 0)
            kb__sys_set_affinity(&proc);
    }
    return 0;
}

int kb__sys_mask_count(const struct kb_cpumask *m)
{
    return CPU_COUNT(&m->set);
}

int kb__sys_mask_cpus(const struct kb_cpumask *m, int *cpus, int cap)
{
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < cap; cpu++)
        if (CPU_ISSET(cpu, &m->set))
            cpus[n++] = cpu;
    return n;
}

int kb__sys_current_cpu(void)
{
    int cpu = sched_getcpu();
    return cpu >= 0 ? cpu : 0;
}
