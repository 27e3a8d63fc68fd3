/* SPDX-License-Identifier: MIT */
/*
 * The system seams of src/system.h: built twice (tests/CMakeLists.txt),
 * as test_internal_system against the files this build chose (the static
 * library), and as test_internal_system_fallbacks, compiled with
 * src/system_posix.c and src/system_backtrace_none.c and none of the
 * KB_HAVE_* definitions, so that every POSIX fallback is compiled and
 * checked in every build although Linux has the real calls.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "system.h"

/* What the calling thread's backtrace writes to a pipe. */
static void backtrace_text(char *buf, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    kb__sys_backtrace_warm();
    kb__sys_backtrace_fd(fds[1]);
    close(fds[1]);
    ssize_t n = read(fds[0], buf, cap - 1);
    close(fds[0]);
    assert_true(n > 0);
    buf[n] = '\0';
}

/* A thread that stays alive (its name readable) until fd's other end closes. */
static void *named_thread(void *arg)
{
    char c;
    while (read(*(int *)arg, &c, 1) > 0)
        ;
    return NULL;
}

/* Each test checks the real call where this build has it (KB_HAVE_*,
 * src/CMakeLists.txt) and the documented fallback where it does not. */

static void test_thread_id_is_the_kernel_one_or_zero(void **state)
{
    (void)state;
#ifdef KB_HAVE_GETTID
    assert_int_equal(kb__sys_tid(), (int)syscall(SYS_gettid));
#else
    assert_int_equal(kb__sys_tid(), 0);
#endif
}

static void test_naming_cuts_to_fifteen_bytes_or_leaves_the_name(void **state)
{
    (void)state;
    pthread_t t;
    char before[16], after[16];
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(pthread_create(&t, NULL, named_thread, &fds[0]), 0);
    assert_int_equal(pthread_getname_np(t, before, sizeof before), 0);
    kb__sys_name_thread(t, "kb-rank-12345678");
    assert_int_equal(pthread_getname_np(t, after, sizeof after), 0);
#ifdef KB_HAVE_SETNAME
    assert_string_equal(after, "kb-rank-1234567");
#else
    assert_string_equal(after, before);
#endif
    close(fds[1]);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(fds[0]);
}

static void test_affinity_round_trips_and_pins_or_fails(void **state)
{
    (void)state;
    struct kb_cpumask saved;
    int cpus[1024];
#ifdef KB_HAVE_AFFINITY
    assert_int_equal(kb__sys_get_affinity(&saved), 0);
    int n = kb__sys_mask_count(&saved);
    assert_true(n >= 1);
    assert_int_equal(kb__sys_mask_cpus(&saved, cpus, 1024), n);
    for (int i = 1; i < n; i++)
        assert_true(cpus[i - 1] < cpus[i]);
    assert_int_equal(kb__sys_pin_self(cpus[0]), 0);
    assert_int_equal(kb__sys_current_cpu(), cpus[0]);
    assert_int_equal(kb__sys_set_affinity(&saved), 0);
#else
    cpus[0] = -1;
    assert_int_equal(kb__sys_get_affinity(&saved), -1);
    assert_int_equal(kb__sys_set_affinity(&saved), -1);
    assert_int_equal(kb__sys_pin_self(0), -1);
    assert_int_equal(kb__sys_mask_count(&saved), 0);
    assert_int_equal(kb__sys_mask_cpus(&saved, cpus, 1024), 0);
    assert_int_equal(cpus[0], -1);
    assert_int_equal(kb__sys_current_cpu(), 0);
#endif
}

/* Seating: the thread is moved onto the CPU (seen there right after, in
 * one of a few attempts: unpinned, the kernel may move it again at any
 * time) and its affinity mask is what it was; a CPU it may not use
 * changes nothing. */
static void test_seating_moves_the_thread_and_leaves_its_affinity(void **state)
{
    (void)state;
    struct kb_cpumask before, after;
    int cpus[1024];
#ifdef KB_HAVE_AFFINITY
    assert_int_equal(kb__sys_get_affinity(&before), 0);
    int n = kb__sys_mask_cpus(&before, cpus, 1024);
    int seen = 0;
    for (int k = 0; k < 10 && !seen; k++) {
        int cpu = cpus[(k + 1) % n]; /* another one than last time when there are two */
        assert_int_equal(kb__sys_seat_self(cpu), 0);
        seen = kb__sys_current_cpu() == cpu;
        assert_int_equal(kb__sys_get_affinity(&after), 0);
        assert_memory_equal(&after, &before, sizeof before);
    }
    assert_true(seen);
    assert_int_equal(kb__sys_seat_self(CPU_SETSIZE + 1), -1);
    assert_int_equal(kb__sys_seat_self(-1), -1);
    int outside = 0;
    while (outside < CPU_SETSIZE && CPU_ISSET(outside, &before.set))
        outside++;
    if (outside < CPU_SETSIZE)
        assert_int_equal(kb__sys_seat_self(outside), -1);
    assert_int_equal(kb__sys_get_affinity(&after), 0);
    assert_memory_equal(&after, &before, sizeof before);
#else
    (void)before;
    (void)after;
    (void)cpus;
    assert_int_equal(kb__sys_seat_self(0), -1);
#endif
}

#ifdef KB_HAVE_AFFINITY
/* The library's pthread_setaffinity_np calls land here (this program
 * defines the symbol, so the static library binds to it): the next
 * fail_in-th call of the calling thread fails with EINVAL, as when a
 * cpuset shrinks between two calls; the others set the calling thread's
 * mask (the library only ever sets its own). */
static _Thread_local int fail_in, failed;

int pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t *set)
{
    if (fail_in > 0 && --fail_in == 0) {
        failed = 1;
        return EINVAL;
    }
    if (!pthread_equal(t, pthread_self()))
        return ENOSYS;
    return syscall(SYS_sched_setaffinity, 0, size, set) == 0 ? 0 : errno;
}

struct widened {
    cpu_set_t process; /* the main thread's mask while the thread ran */
    cpu_set_t after;   /* the thread's mask after its seating */
    int cpus, seated;
};

/* A thread of a process confined to one CPU (as by taskset) that widened
 * its own mask to every online CPU seats itself elsewhere, and setting its
 * mask back fails. */
static void *seat_with_failing_restore(void *arg)
{
    struct widened *w = arg;
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < CPU_SETSIZE; c++)
        CPU_SET(c, &all);
    sched_setaffinity(0, sizeof all, &all); /* the kernel keeps the CPUs it may use */
    sched_getaffinity(0, sizeof all, &all);
    w->cpus = CPU_COUNT(&all);
    for (int k = 0; k < 10 && w->cpus >= 2 && !failed; k++) {
        int here = sched_getcpu(), cpu = 0;
        while (cpu == here || !CPU_ISSET(cpu, &all))
            cpu++;
        fail_in = 2; /* the pin succeeds, setting the old mask back fails */
        w->seated = kb__sys_seat_self(cpu) == 0;
        fail_in = 0;
    }
    sched_getaffinity(0, sizeof w->after, &w->after);
    return NULL;
}

/* When the old mask cannot be set back, the thread gets the process's
 * mask (its main thread's), never every CPU: under taskset it would run
 * outside the process's CPUs. */
static void test_seating_never_widens_a_thread_beyond_the_processs_cpus(void **state)
{
    (void)state;
    cpu_set_t was, one;
    assert_int_equal(sched_getaffinity(0, sizeof was, &was), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0); /* the "taskset" */
    struct widened w;
    memset(&w, 0, sizeof w);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, seat_with_failing_restore, &w), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(sched_setaffinity(0, sizeof was, &was), 0);
    if (w.cpus < 2)
        return; /* one CPU online: nothing to seat on, nothing to widen to */
    assert_true(w.seated);
    assert_true(CPU_EQUAL(&w.after, &one));
}
#endif

static void test_backtrace_names_frames_or_says_there_is_none(void **state)
{
    (void)state;
    char buf[8192];
    backtrace_text(buf, sizeof buf);
#ifdef KB_HAVE_BACKTRACE
    assert_null(strstr(buf, "no backtrace"));
    assert_non_null(strchr(buf, '\n'));
#else
    assert_string_equal(buf, "kbthreads: (no backtrace on this system)\n");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_id_is_the_kernel_one_or_zero),
        cmocka_unit_test(test_naming_cuts_to_fifteen_bytes_or_leaves_the_name),
        cmocka_unit_test(test_affinity_round_trips_and_pins_or_fails),
        cmocka_unit_test(test_seating_moves_the_thread_and_leaves_its_affinity),
#ifdef KB_HAVE_AFFINITY
        cmocka_unit_test(test_seating_never_widens_a_thread_beyond_the_processs_cpus),
#endif
        cmocka_unit_test(test_backtrace_names_frames_or_says_there_is_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
