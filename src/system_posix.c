/* SPDX-License-Identifier: MIT */
/* The thread calls of system.h where only POSIX is there to call (any
 * system but Linux, and every KB_PORTABLE=ON build): no kernel thread id,
 * no thread names, no CPU affinity. Each answer is the documented fallback
 * (docs/design.md, "Portability"; kb_features() has none of the bits). */
#include "system.h"

#include <pthread.h>

int kb__sys_tid(void)
{
    return 0; /* the gdb script then matches threads by pthread_t */
}

void kb__sys_name_thread(pthread_t t, const char *name)
{
    /* Naming another thread is not POSIX (macOS names only the calling
     * thread): rank threads keep the name they inherit. */
    (void)t;
    (void)name;
}

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

int kb__sys_seat_self(int cpu)
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
