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
#include <pthread.h>
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
        cmocka_unit_test(test_backtrace_names_frames_or_says_there_is_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
