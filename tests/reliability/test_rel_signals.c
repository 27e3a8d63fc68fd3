/* SPDX-License-Identifier: MIT */
/*
 * Signals and blocking system calls never break the baton.
 *
 * A SIGUSR1 handler is installed without SA_RESTART, so every futex wait
 * and sleep a signal lands in returns EINTR. A signaller thread sends
 * SIGUSR1 (tgkill) to the rank threads and the driving thread while they
 * run:
 *   - the differential programs (rel_prog.h) give the same trace as without
 *     signals, and as the model: no turn lost or doubled anywhere;
 *   - a long yield loop keeps the one-running invariant and the round-robin
 *     order at every turn, with the exact number of handoffs;
 * and a rank that blocks in read() on a pipe (written later by another
 * thread) or in nanosleep() while holding the baton delays the schedule but
 * leaves its trace unchanged, signals or not.
 */
#include <errno.h>
#ifdef __GLIBC__
#include <execinfo.h>
#endif
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kbt_util.h"
#include "kbthreads.h"
#include "rel_run.h"
#include "trace.h"

/* ---- an abort says where ---------------------------------------------------- */

/* Once, in a Valgrind pass of a KB_PORTABLE=ON build, this program aborted
 * with glibc's "The futex facility returned an unexpected error code."
 * and nothing else (Valgrind, run with --quiet, prints no stack for a
 * SIGABRT the program raises itself). It has not been seen again (issue
 * 45: CHANGELOG). Should it come back, the aborting thread's stack names
 * the call whose futex failed: a condvar wait, a mutex lock or a join,
 * and which of the library's waits made it. */
static void on_abort(int sig)
{
    static const char head[] = "test_rel_signals: SIGABRT; the aborting thread's stack:\n";
    ssize_t unused = write(2, head, sizeof head - 1);
    (void)unused;
#ifdef __GLIBC__
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
#endif
    signal(sig, SIG_DFL); /* abort() raises it again */
}

static void install_abort_report(void)
{
#ifdef __GLIBC__
    void *warm[1];
    backtrace(warm, 1); /* loads the unwinder now, not in the handler */
#endif
    signal(SIGABRT, on_abort);
}

/* ---- a stuck run reports itself ---------------------------------------------- */

/* Once, a CI run's Valgrind pass of this program printed its first test's
 * name and nothing more until ctest's limit (1200 s; it takes seconds) and
 * it has not come back in hundreds of runs since, with and without load.
 * Should it come back, it says where: a watcher thread that sees no
 * progress (the heartbeat below: every program, spawn, join and turn moves
 * it) for STUCK_S seconds prints the seed, whether the storm was on, the
 * signals sent and handled and the live spawn's state (kb_ctx_dump: who
 * holds the baton, each rank's wait and C backtrace), then ends the
 * program with status 3, well inside ctest's limit. */
static atomic_long heartbeat;
static atomic_long at_seed; /* the program being run; 0 in tests 2 and 3 */
static _Atomic(kb_ctx *) live_ctx;
static atomic_int watching;

static void beat(void)
{
    atomic_fetch_add(&heartbeat, 1);
}

static void hook_ctx_live(kb_ctx *ctx)
{
    atomic_store(&live_ctx, ctx);
    beat();
}

static long stuck_limit_s(void)
{
    return kbt_on_valgrind() ? 300 : 60;
}

static void report_stuck(long secs);

static void *watcher(void *arg)
{
    (void)arg;
    long last = atomic_load(&heartbeat), still_ms = 0;
    while (atomic_load(&watching)) {
        kbt_sleep_ms(100);
        long now = atomic_load(&heartbeat);
        still_ms = now == last ? still_ms + 100 : 0;
        last = now;
        if (still_ms >= stuck_limit_s() * 1000)
            report_stuck(still_ms / 1000);
    }
    return NULL;
}

static pthread_t watcher_start(void)
{
    atomic_store(&watching, 1);
    pthread_t t;
    if (pthread_create(&t, NULL, watcher, NULL) != 0)
        abort();
    return t;
}

static void watcher_stop(pthread_t t)
{
    atomic_store(&watching, 0);
    pthread_join(t, NULL);
}

/* ---- the signal storm -------------------------------------------------------- */

static atomic_long delivered; /* handler runs */

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&delivered, 1);
}

static void install_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: interrupted calls return EINTR */
    assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
}

#define MAX_TARGETS 64

/* Threads to signal: the driver first, then rank threads as they start. */
static atomic_int targets[MAX_TARGETS];
static atomic_int ntargets;
static atomic_int storm_on;
static atomic_long sent;
static long storm_gap_us = 5;

static pid_t my_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void add_target(pid_t tid)
{
    int n = atomic_load(&ntargets);
    for (int i = 0; i < n && i < MAX_TARGETS; i++)
        if (atomic_load(&targets[i]) == tid)
            return;
    /* a ring: old rank threads (perhaps gone) are replaced */
    int slot = n < MAX_TARGETS ? n : 1 + (int)((unsigned)tid % (MAX_TARGETS - 1));
    atomic_store(&targets[slot], (int)tid);
    if (n < MAX_TARGETS)
        atomic_store(&ntargets, n + 1);
}

static void *signaller(void *arg)
{
    (void)arg;
    unsigned k = 0;
    pid_t pid = getpid();
    while (atomic_load(&storm_on)) {
        int n = atomic_load(&ntargets);
        if (n > 0) {
            pid_t tid = (pid_t)atomic_load(&targets[k++ % (unsigned)n]);
            /* a rank thread that unwound is gone: ESRCH is fine */
            if (tid > 0 && syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0)
                atomic_fetch_add(&sent, 1);
        }
        struct timespec ts = {0, storm_gap_us * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static pthread_t storm_start(void)
{
    atomic_store(&ntargets, 0);
    add_target(my_tid());
    atomic_store(&storm_on, 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, signaller, NULL), 0);
    return t;
}

static void storm_stop(pthread_t t)
{
    atomic_store(&storm_on, 0);
    pthread_join(t, NULL);
}

static void hook_rank_start(int rank)
{
    (void)rank;
    beat();
    add_target(my_tid());
}

static void hook_driver_enter(void)
{
    beat();
    add_target(my_tid());
}

static void report_stuck(long secs)
{
    kb_ctx *ctx = atomic_load(&live_ctx);
    fprintf(stderr,
            "test_rel_signals: no progress for %ld s (seed %ld, storm %s, %ld SIGUSR1 sent, %ld handled); "
            "the live spawn:\n",
            secs, atomic_load(&at_seed), atomic_load(&storm_on) ? "on" : "off", atomic_load(&sent),
            atomic_load(&delivered));
    fflush(stderr);
    /* The run is stuck inside the ctx, so it is not destroyed meanwhile. */
    if (ctx)
        kb_ctx_dump(ctx, 2, KB_DUMP_C_FRAMES);
    else
        fprintf(stderr, "test_rel_signals: (no program's ctx is live: tests 2 and 3 own theirs)\n");
    _exit(3);
}

/* ---- 1. the differential programs under signals ---------------------------------- */

static long signal_seeds(void)
{
    return kbt_on_valgrind() ? 60 : 300;
}

static void test_programs_give_the_same_trace_under_signals(void **state)
{
    (void)state;
    install_handler();
    struct rp_prog *p = malloc(sizeof *p);
    assert_non_null(p);
    struct rr_hooks hooks = {
        .rank_start = hook_rank_start, .driver_enter = hook_driver_enter, .ctx_live = hook_ctx_live};
    atomic_store(&delivered, 0);
    atomic_store(&sent, 0);
    long n = signal_seeds(), differ = 0;
    for (long seed = 1; seed <= n; seed++) {
        atomic_store(&at_seed, seed);
        beat();
        struct rp_src s;
        rp_src_seed(&s, (uint64_t)seed);
        s.no_exit = 1; /* signals are the subject here, not pthread_exit (docs/reliability.md) */
        rp_generate(p, &s);
        /* quiet run: must match the model */
        if (rel_check(p, stderr) != 0)
            fail_msg("seed %ld: library and model differ without signals", seed);
        char *quiet = strdup(tr_text());
        assert_non_null(quiet);
        /* the same program under the storm */
        struct rp_clock clock;
        pthread_t t = storm_start();
        int rc = rr_run(p, &clock, &hooks);
        storm_stop(t);
        assert_int_equal(rc, 0);
        /* positive join timeouts may run a different number of rounds: the
         * model with this run's clock decides */
        char *loud = strdup(tr_text());
        assert_non_null(loud);
        rm_run(p, &clock, RM_EXACT);
        if (strcmp(loud, tr_text()) != 0) {
            fprintf(stderr, "seed %ld under signals:\n--- library ---\n%s--- model ---\n%s", seed, loud,
                    tr_text());
            differ++;
        }
        int timed = 0;
        for (int i = 0; i < p->nphases; i++)
            for (int j = 0; j < p->phases[i].njoins; j++)
                timed |= p->phases[i].joins[j].timeout_ms > 0;
        if (!timed && strcmp(loud, quiet) != 0) {
            fprintf(stderr, "seed %ld: the trace changed under signals\n", seed);
            differ++;
        }
        free(quiet);
        free(loud);
    }
    free(p);
    atomic_store(&at_seed, 0);
    print_message("%ld programs under signals: %ld SIGUSR1 sent, %ld handled, %ld traces differ\n", n,
                  atomic_load(&sent), atomic_load(&delivered), differ);
    assert_int_equal(differ, 0);
    assert_true(atomic_load(&delivered) > n);
}

/* ---- 2. a long run of handoffs under signals --------------------------------------- */

#define LOOP_NPROCS 4

static atomic_int running;
static atomic_long violations;

struct loop {
    long iters;
    uint64_t turn;
    long bad_order, bad_rc;
};

static int loop_rank(int rank, void *arg)
{
    struct loop *l = arg;
    add_target(my_tid());
    if (atomic_fetch_add(&running, 1) != 0)
        atomic_fetch_add(&violations, 1);
    for (long i = 0; i <= l->iters; i++) {
        beat();
        if (l->turn % LOOP_NPROCS != (uint64_t)rank)
            l->bad_order++;
        l->turn++;
        if (i == l->iters)
            break;
        if (atomic_fetch_sub(&running, 1) != 1)
            atomic_fetch_add(&violations, 1);
        int rc = kb_yield();
        if (atomic_fetch_add(&running, 1) != 0)
            atomic_fetch_add(&violations, 1);
        if (rc != 0)
            l->bad_rc++;
    }
    if (atomic_fetch_sub(&running, 1) != 1)
        atomic_fetch_add(&violations, 1);
    return 0;
}

static void test_handoffs_under_signals_lose_no_turn(void **state)
{
    (void)state;
    install_handler();
    struct loop l;
    memset(&l, 0, sizeof l);
    l.iters = kbt_on_valgrind() ? 2000 : 40000;
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    kb_spawn_stats st;
    memset(&st, 0, sizeof st);
    kb_spawn_opts o = {.stats = &st};
    atomic_store(&delivered, 0);
    atomic_store(&sent, 0);
    atomic_store(&running, 0);
    atomic_store(&violations, 0);
    pthread_t t = storm_start();
    int rc = kb_spawn(ctx, loop_rank, &l, LOOP_NPROCS, &o, NULL);
    storm_stop(t);
    assert_int_equal(rc, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    print_message("%llu handoffs under %ld SIGUSR1 (%ld handled): %ld violations, %ld out-of-order turns\n",
                  (unsigned long long)st.handoffs, atomic_load(&sent), atomic_load(&delivered),
                  atomic_load(&violations), l.bad_order);
    assert_int_equal(atomic_load(&violations), 0);
    assert_int_equal(l.bad_order, 0);
    assert_int_equal(l.bad_rc, 0);
    assert_int_equal(st.rounds, (uint64_t)l.iters + 1);
    assert_int_equal(st.turns, st.rounds * LOOP_NPROCS);
    assert_true(st.handoffs > st.turns && st.handoffs <= st.turns + st.rounds);
    assert_int_equal(l.turn, st.rounds * LOOP_NPROCS);
    assert_true(atomic_load(&delivered) > 100);
}

/* ---- 3. blocking system calls while holding the baton ------------------------------- */

#define BLOCK_NPROCS   4
#define WRITE_DELAY_MS 60
#define SLEEP_MS       30

struct block {
    int fds[2];
    int delays; /* 1: rank 1 reads the pipe, rank 2 sleeps */
    long read_eintr, sleep_eintr;
    long bad;
};

static void *late_writer(void *arg)
{
    struct block *b = arg;
    kbt_sleep_ms(WRITE_DELAY_MS);
    char c = 'x';
    while (write(b->fds[1], &c, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

static int block_rank(int rank, void *arg)
{
    struct block *b = arg;
    add_target(my_tid());
    for (int step = 0; step < 3; step++) {
        if (atomic_fetch_add(&running, 1) != 0)
            atomic_fetch_add(&violations, 1);
        beat();
        tr_add("rank %d step %d", rank, step);
        if (b->delays && step == 1 && rank == 1) {
            /* blocks holding the baton until the writer thread writes */
            char c;
            ssize_t n;
            while ((n = read(b->fds[0], &c, 1)) < 0 && errno == EINTR)
                b->read_eintr++;
            if (n != 1)
                b->bad++;
            tr_add("rank %d read %zd", rank, n);
        }
        if (b->delays && step == 1 && rank == 2) {
            struct timespec ts = {0, SLEEP_MS * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                b->sleep_eintr++;
            tr_add("rank %d slept", rank);
        }
        if (atomic_fetch_sub(&running, 1) != 1)
            atomic_fetch_add(&violations, 1);
        if (step < 2) {
            int rc = step == 0 ? kb_barrier() : kb_wait(kb_current_ctx(), (kb_handle)(rank + 1));
            if (rc != 0)
                b->bad++;
        }
    }
    return 0;
}

/* The trace of the program, with or without the blocking calls and the
 * storm; the lines of the blocking calls are dropped for the comparison. */
static char *block_run(struct block *b, int storm, double *secs)
{
    kb_ctx *ctx = NULL;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    tr_reset();
    pthread_t writer, t;
    if (b->delays)
        assert_int_equal(pthread_create(&writer, NULL, late_writer, b), 0);
    if (storm)
        t = storm_start();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = kb_spawn(ctx, block_rank, b, BLOCK_NPROCS, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (storm)
        storm_stop(t);
    if (b->delays)
        pthread_join(writer, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* keep only the schedule: the "rank R step S" lines */
    const char *text = tr_text();
    char *out = malloc(strlen(text) + 1);
    assert_non_null(out);
    size_t len = 0;
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) + 1 : strlen(l);
        if (strstr(l, " step ") && strstr(l, " step ") < l + n) {
            memcpy(out + len, l, n);
            len += n;
        }
        l += n;
    }
    out[len] = '\0';
    return out;
}

static void test_blocking_syscalls_delay_but_do_not_corrupt(void **state)
{
    (void)state;
    install_handler();
    struct block b;
    memset(&b, 0, sizeof b);
    assert_int_equal(pipe(b.fds), 0);
    atomic_store(&running, 0);
    atomic_store(&violations, 0);
    double quick, slow, loud;
    b.delays = 0;
    char *expect = block_run(&b, 0, &quick);
    b.delays = 1;
    char *blocked = block_run(&b, 0, &slow);
    atomic_store(&delivered, 0);
    char *stormy = block_run(&b, 1, &loud);
    long handled = atomic_load(&delivered);
    close(b.fds[0]);
    close(b.fds[1]);
    print_message("blocking calls: %.1f ms without, %.1f ms with, %.1f ms with %ld signals handled "
                  "(read EINTR %ld, nanosleep EINTR %ld); %ld invariant violations\n",
                  quick * 1e3, slow * 1e3, loud * 1e3, handled, b.read_eintr, b.sleep_eintr,
                  atomic_load(&violations));
    assert_string_equal(blocked, expect);
    assert_string_equal(stormy, expect);
    assert_int_equal(b.bad, 0);
    assert_int_equal(atomic_load(&violations), 0);
    /* rank 1 held the baton while it waited for the writer */
    assert_true(slow >= (WRITE_DELAY_MS - 5) / 1e3);
    assert_true(loud >= (WRITE_DELAY_MS - 5) / 1e3);
    free(expect);
    free(blocked);
    free(stormy);
}

int main(void)
{
    install_abort_report();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_programs_give_the_same_trace_under_signals),
        cmocka_unit_test(test_handoffs_under_signals_lose_no_turn),
        cmocka_unit_test(test_blocking_syscalls_delay_but_do_not_corrupt),
    };
    pthread_t w = watcher_start();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    watcher_stop(w);
    return failed;
}
