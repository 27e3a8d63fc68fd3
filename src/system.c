/* The system-dependent calls (system.h): Linux first, then the POSIX
 * fallback. */
#include "system.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>
#ifdef KB_HAVE_BACKTRACE
#include <execinfo.h>
#endif

int kb__sys_tid(void)
{
#ifdef KB_HAVE_GETTID
    return (int)gettid();
#else
    return 0;
#endif
}

void kb__sys_name_thread(pthread_t t, const char *name)
{
#ifdef KB_HAVE_SETNAME
    /* Linux keeps 15 bytes and refuses more (ERANGE): cut, not lose. */
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    pthread_setname_np(t, cut);
#else
    (void)t; /* macOS names only the calling thread: docs/design.md, Portability */
    (void)name;
#endif
}

#ifdef KB_HAVE_AFFINITY
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
#else
int kb__sys_get_affinity(struct kb_cpumask *m)
{
    m->none = 0;
    return -1;
}

int kb__sys_set_affinity(const struct kb_cpumask *m)
{
    (void)m;
    return -1;
}

int kb__sys_pin_self(int cpu)
{
    (void)cpu;
    return -1;
}

int kb__sys_mask_count(const struct kb_cpumask *m)
{
    (void)m;
    return 0;
}

int kb__sys_mask_cpus(const struct kb_cpumask *m, int *cpus, int cap)
{
    (void)m;
    (void)cpus;
    (void)cap;
    return 0;
}

int kb__sys_current_cpu(void)
{
    return 0;
}
#endif

void kb__sys_backtrace_fd(int fd)
{
#ifdef KB_HAVE_BACKTRACE
    void *frames[64];
    int depth = backtrace(frames, 64);
    backtrace_symbols_fd(frames, depth, fd);
#else
    static const char none[] = "kbthreads: (no backtrace on this system)\n";
    ssize_t w = write(fd, none, sizeof none - 1);
    (void)w;
#endif
}

void kb__sys_backtrace_warm(void)
{
#ifdef KB_HAVE_BACKTRACE
    void *warm[1];
    backtrace(warm, 1);
#endif
}
