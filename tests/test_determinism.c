/* SPDX-License-Identifier: MIT */
/*
 * Determinism: the seeded 48-rank program of support/det_program.h gives one
 * identical trace (hash and text) over 20 runs in this process, and the same
 * hash in separate processes (tests/support/kb_det_helper) while CPU hogs
 * compete for the CPUs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "det_program.h"
#include "kbt_util.h"

static const uint64_t seeds[] = {1, 2, 20240611};
#define NSEEDS (sizeof seeds / sizeof seeds[0])

/* 20 runs of the first seed; fewer of the others keep the test short. */
static int in_process_runs(size_t si)
{
    if (kbt_on_valgrind())
        return 3;
    return si == 0 ? 20 : 5;
}

static int process_runs(size_t si)
{
    if (kbt_on_valgrind())
        return 5;
    return si == 0 ? 10 : 5;
}

static size_t seeds_to_use(void)
{
    return kbt_on_valgrind() ? 1 : NSEEDS;
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The program really exercised what it claims to (else an empty or stuck
 * program would be trivially deterministic). */
static void assert_trace_is_substantial(const char *t)
{
    char buf[64];
    snprintf(buf, sizeof buf, "S0 rc=0 n=0");
    if (!strstr(t, buf))
        fail_msg("spawn 0 did not succeed:\n%.4000s", t);
    if (!strstr(t, "S1 rc=-10000 n=1") || !strstr(t, "S2 rc=-10000 n=1"))
        fail_msg("spawns 1 and 2 did not fail with one root cause each");
    assert_true(count_lines_with(t, "wait_fresh_done rc=0") > 50);
    assert_true(count_lines_with(t, "wait_done_ret rc=0") > 10);
    assert_true(count_lines_with(t, "coll_done rc=0") > 20);
    assert_true(count_lines_with(t, "barrier rc=0") > 100);
    assert_true(count_lines_with(t, "E ") > 100);
    assert_true(count_lines_with(t, "E +") > 0);
    assert_true(count_lines_with(t, "cleanup") > 0); /* UNWIND siblings of spawn 1 */
    assert_true(count_lines_with(t, "cancelled=1") > 0);
    assert_true(count_lines_with(t, "\nA pw=") + (strncmp(t, "A pw=", 5) == 0) == 2);
    assert_non_null(strstr(t, "destroy rc=0"));
    assert_true(tr_lines() > 3000);
}

static void test_same_trace_over_20_runs_in_process(void **state)
{
    (void)state;
    for (size_t si = 0; si < seeds_to_use(); si++) {
        uint64_t h0 = det_run_program(seeds[si]);
        char *t0 = strdup(tr_text());
        assert_non_null(t0);
        assert_trace_is_substantial(t0);
        for (int run = 1; run < in_process_runs(si); run++) {
            uint64_t h = det_run_program(seeds[si]);
            if (h != h0 || strcmp(tr_text(), t0) != 0) {
                tr_assert(t0); /* prints the first differing line */
                fail_msg("seed %llu run %d: hash %016llx, run 0 %016llx", (unsigned long long)seeds[si], run,
                         (unsigned long long)h, (unsigned long long)h0);
            }
        }
        free(t0);
    }
}

static void test_different_seeds_give_different_traces(void **state)
{
    (void)state;
    uint64_t a = det_run_program(seeds[0]);
    uint64_t b = det_run_program(seeds[1]);
    assert_true(a != b);
}

/* ------------------------------------------------------------------------ */
/* Separate processes under CPU load                                         */
/* ------------------------------------------------------------------------ */

static pid_t start_hog(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (;;)
            x++;
    }
    return pid;
}

static void stop_hog(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

static void helper_path(char *buf, size_t cap)
{
    const char *env = getenv("KB_DET_HELPER");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return;
    }
    char dir[4096];
    assert_int_equal(kbt_exe_dir(dir, sizeof dir), 0);
    snprintf(buf, cap, "%s/support/kb_det_helper", dir);
}

/* Run the helper for seed; parse "<hash> <lines>". 0 on success. */
static int run_helper(const char *path, uint64_t seed, uint64_t *hash, size_t *lines)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char s[32];
        snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(path, path, s, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char out[256];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fds[0], out + len, sizeof out - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof out - 1)
            break;
    }
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -2;
    unsigned long long h = 0;
    if (sscanf(out, "%llx %zu", &h, lines) != 2)
        return -3;
    *hash = h;
    return 0;
}

static void test_same_trace_in_separate_processes_under_cpu_load(void **state)
{
    (void)state;
    char path[4200];
    helper_path(path, sizeof path);
    if (access(path, X_OK) != 0)
        fail_msg("%s not found: add_subdirectory(support) in tests/CMakeLists.txt builds it", path);
    uint64_t expect[NSEEDS];
    size_t expect_lines[NSEEDS];
    for (size_t si = 0; si < seeds_to_use(); si++) {
        expect[si] = det_run_program(seeds[si]);
        expect_lines[si] = tr_lines();
    }
    /* No library thread is alive here (every ctx was destroyed), so forking
     * the hogs is safe. One hog per CPU. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    if (ncpu > 8)
        ncpu = 8;
    pid_t hogs[8] = {0};
    for (long i = 0; i < ncpu; i++) {
        hogs[i] = start_hog();
        assert_true(hogs[i] > 0);
    }
    char failure[512] = "";
    for (size_t si = 0; si < seeds_to_use() && !failure[0]; si++) {
        for (int run = 0; run < process_runs(si); run++) {
            uint64_t h = 0;
            size_t lines = 0;
            int rc = run_helper(path, seeds[si], &h, &lines);
            if (rc != 0) {
                snprintf(failure, sizeof failure, "helper run failed (%d) for seed %llu", rc,
                         (unsigned long long)seeds[si]);
                break;
            }
            if (h != expect[si] || lines != expect_lines[si]) {
                snprintf(failure, sizeof failure,
                         "seed %llu process run %d: hash %016llx (%zu lines), in-process %016llx (%zu lines)",
                         (unsigned long long)seeds[si], run, (unsigned long long)h, lines,
                         (unsigned long long)expect[si], expect_lines[si]);
                break;
            }
        }
    }
    for (long i = 0; i < ncpu; i++)
        stop_hog(hogs[i]);
    if (failure[0])
        fail_msg("%s", failure);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_trace_over_20_runs_in_process),
        cmocka_unit_test(test_different_seeds_give_different_traces),
        cmocka_unit_test(test_same_trace_in_separate_processes_under_cpu_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
