/* SPDX-License-Identifier: MIT */
/*
 * The frames writer (kb_set_frames_writer): a binding's frames of a rank,
 * written on the rank's own thread, show in the stall report and the crash
 * report between the rank's header line and its C backtrace, and answer a
 * kbthreads-dump request (KB_STALL_SIGNAL sent with rt_tgsigqueueinfo from
 * another process) in the sender's file between marker lines. Each case
 * runs in a forked child whose stderr the test reads.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"

/* The writer: one line naming the rank, the frame limit and whether it runs
 * on the rank's own thread (its LWP against the one the rank recorded). */
static volatile int rank_tid[4];

static void put_num(char *buf, size_t *n, long v)
{
    char d[24];
    int k = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do
        d[k++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        buf[(*n)++] = '-';
    while (k > 0)
        buf[(*n)++] = d[--k];
}

static void test_writer(int fd, int max_frames, void *arg)
{
    char line[128];
    size_t n = 0;
    const char *pre = (const char *)arg;
    while (*pre)
        line[n++] = *pre++;
    int r = kb_rank();
    put_num(line, &n, r);
    memcpy(line + n, " max ", 5);
    n += 5;
    put_num(line, &n, max_frames);
    int own = r >= 0 && r < 4 && rank_tid[r] == (int)syscall(SYS_gettid);
    const char *where = own ? " on its own thread\n" : " on another thread\n";
    size_t wl = strlen(where);
    memcpy(line + n, where, wl);
    n += wl;
    ssize_t w = write(fd, line, n);
    (void)w;
}

int kbt_frames_stalling_rank(int rank, void *arg);
int kbt_frames_stalling_rank(int rank, void *arg)
{
    (void)arg;
    rank_tid[rank] = (int)syscall(SYS_gettid);
    if (rank == 1)
        kbt_sleep_ms(500); /* goes on sleeping after the stall signal */
    return kb_yield();
}

static int stall_child(void *p)
{
    (void)p;
    kb_set_frames_writer(test_writer, "  test frames of rank ");
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 90;
    kb_spawn_opts o = {.stall_ms = 150};
    int rc = kb_spawn(ctx, kbt_frames_stalling_rank, NULL, 3, &o, NULL);
    kb_ctx_destroy(ctx);
    return rc == 0 ? 0 : 91;
}

static void test_stall_report_shows_the_writers_frames_before_the_c_backtrace(void **state)
{
    (void)state;
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(stall_child, NULL, 20000, &c), 0);
    assert_true(WIFEXITED(c.status));
    assert_int_equal(WEXITSTATUS(c.status), 0);
    const char *head = strstr(c.out, "kbthreads: stall: rank 1 (kb-rank-1) has held the baton for");
    const char *frames = strstr(c.out, "  test frames of rank 1 max 0 on its own thread\n");
    const char *c_line = strstr(c.out, "  C frames:\n");
    assert_non_null(head);
    assert_non_null(frames);
    assert_non_null(c_line);
    assert_true(head < frames && frames < c_line);
    assert_non_null(strstr(c_line, kbt_backtrace_shows("kbt_frames_stalling_rank")));
}

int kbt_frames_crashing_rank(int rank, void *arg);
int kbt_frames_crashing_rank(int rank, void *arg)
{
    (void)arg;
    rank_tid[rank] = (int)syscall(SYS_gettid);
    if (kb_yield() != 0)
        return 1;
    if (rank == 2) {
        volatile int *volatile p = NULL;
        *p = 1;
    }
    return 0;
}

static int crash_child(void *p)
{
    (void)p;
    kb_set_frames_writer(test_writer, "  test frames of rank ");
    kb_ctx *ctx;
    if (kb_ctx_create(NULL, &ctx) != 0)
        return 90;
    kb_spawn_opts o = {.crash_report = 1};
    kb_spawn(ctx, kbt_frames_crashing_rank, NULL, 3, &o, NULL);
    return 92; /* not reached: the process dies of SIGSEGV */
}

static void test_crash_report_shows_the_writers_frames_before_the_c_backtrace(void **state)
{
    (void)state;
    struct kbt_child c;
    assert_int_equal(kbt_run_forked(crash_child, NULL, 20000, &c), 0);
    assert_true(WIFSIGNALED(c.status));
    assert_int_equal(WTERMSIG(c.status), SIGSEGV);
    const char *head = strstr(c.out, "kbthreads: rank 2 (kb-rank-2) crashed: SIGSEGV\n");
    const char *frames = strstr(c.out, "  test frames of rank 2 max 0 on its own thread\n");
    const char *c_line = strstr(c.out, "  C frames:\n");
    assert_non_null(head);
    assert_non_null(frames);
    assert_non_null(c_line);
    assert_true(head < frames && frames < c_line);
}

/* ThreadSanitizer runs a signal handler only when the thread next enters a
 * call it intercepts, and a rank suspended in the baton's futex makes none
 * until its turn: under TSan the request goes to rank 0 instead, which waits
 * for the sender in a usleep loop (intercepted, so the handler runs there). */
#if defined(__SANITIZE_THREAD__)
#define KBT_ASKED_RANK 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KBT_ASKED_RANK 0
#endif
#endif
#ifndef KBT_ASKED_RANK
#define KBT_ASKED_RANK 1 /* suspended in kb_yield while rank 0 asks */
#endif

/* kbthreads-dump's request, made by a forked sender as the tool makes it. */
static int queue_to_thread(pid_t pid, int tid, int value)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = KB_STALL_SIGNAL;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = value;
    return (int)syscall(SYS_rt_tgsigqueueinfo, pid, tid, KB_STALL_SIGNAL, &si);
}

struct request {
    pid_t target;
    int sender_ok; /* the sender's exit status: 0 found the answer */
    char answer[512];
};
static struct request req;

/* In the sender: ask KBT_ASKED_RANK for 7 frames into a temp file, wait for the
 * end marker (up to 5 s), copy the file into a pipe the target reads. */
static int sender(int out_fd)
{
    char path[] = "/tmp/kbt-frames-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 10;
    unlink(path);
    if (queue_to_thread(req.target, rank_tid[KBT_ASKED_RANK], fd | 7 << 16) != 0)
        return 11;
    char buf[512];
    for (int i = 0; i < 500; i++) {
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            if (strstr(buf, "kbthreads-frames end ")) {
                ssize_t w = write(out_fd, buf, (size_t)n);
                return w == n ? 0 : 12;
            }
        }
        usleep(10000);
    }
    return 13;
}

int kbt_frames_asked_rank(int rank, void *arg);
int kbt_frames_asked_rank(int rank, void *arg)
{
    (void)arg;
    rank_tid[rank] = (int)syscall(SYS_gettid);
    if (kb_yield() != 0) /* rank 1 is suspended here while rank 0 asks */
        return 1;
    if (rank != 0)
        return 0;
    int fds[2];
    if (pipe(fds) != 0)
        return 2;
    pid_t pid = fork();
    if (pid == 0)
        _exit(sender(fds[1]));
    close(fds[1]);
    int status = 0;
    /* Polled with a sleep: a call ThreadSanitizer intercepts (see above). */
    while (waitpid(pid, &status, WNOHANG) == 0)
        usleep(1000);
    ssize_t n = read(fds[0], req.answer, sizeof req.answer - 1);
    req.answer[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    req.sender_ok = WIFEXITED(status) ? WEXITSTATUS(status) : 99;
    return 0;
}

static void test_a_request_from_another_process_is_answered_in_its_file(void **state)
{
    (void)state;
    memset(&req, 0, sizeof req);
    req.target = getpid();
    assert_int_equal(kb_set_frames_writer(test_writer, "  test frames of rank "), 0);
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    assert_int_equal(kb_spawn(ctx, kbt_frames_asked_rank, NULL, 2, NULL, NULL), 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    assert_int_equal(kb_set_frames_writer(NULL, NULL), 0);
    assert_int_equal(req.sender_ok, 0);
    char expect[256];
#ifdef KB_TEST_PORTABLE
    int marker_tid = 0; /* a KB_PORTABLE library knows no kernel thread id (docs/debugging.md) */
#else
    int marker_tid = rank_tid[KBT_ASKED_RANK];
#endif
    snprintf(expect, sizeof expect,
             "kbthreads-frames begin %d\n  test frames of rank %d max 7 on its own thread\nkbthreads-frames "
             "end %d\n",
             marker_tid, KBT_ASKED_RANK, marker_tid);
    assert_string_equal(req.answer, expect);
}

static void test_set_frames_writer_null_removes_it(void **state)
{
    (void)state;
    assert_int_equal(kb_set_frames_writer(test_writer, "x"), 0);
    assert_int_equal(kb_set_frames_writer(NULL, NULL), 0);
    assert_int_equal(kb_set_frames_writer(NULL, "ignored"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* forking tests first: no library thread exists yet */
        cmocka_unit_test(test_stall_report_shows_the_writers_frames_before_the_c_backtrace),
        cmocka_unit_test(test_crash_report_shows_the_writers_frames_before_the_c_backtrace),
        cmocka_unit_test(test_a_request_from_another_process_is_answered_in_its_file),
        cmocka_unit_test(test_set_frames_writer_null_removes_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
