/* SPDX-License-Identifier: MIT */
/*
 * The crash report (kb_spawn_opts.crash_report, KB_CRASH_REPORT=1).
 *
 * Handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT are installed
 * process-wide once and stay. In a rank thread the handler writes
 * "kbthreads: rank 3 (kb-rank-3) crashed: SIGSEGV" and the rank's frames
 * (a binding's frames writer's, then the C backtrace: rank_frames.h) to
 * stderr, restores the default action and re-raises, so the process dies
 * of the same signal and core dumps still happen. In any other thread it
 * hands the signal to the handler that was installed before. Rank threads
 * run the handler on an alternate stack, so a stack overflow is reported
 * too. Everything in the handler is async-signal-safe (write, backtrace
 * after a warm-up, sigaction, raise).
 */
#include "crash.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "rank_frames.h"
#include "run.h"
#include "sigsafe.h"
#include "system.h"

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NSIG_CRASH (int)(sizeof crash_signals / sizeof crash_signals[0])
static struct sigaction previous[NSIG_CRASH];
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static const char *signame(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    case SIGABRT:
        return "SIGABRT";
    default:
        return "signal";
    }
}

static int index_of(int sig)
{
    for (int i = 0; i < NSIG_CRASH; i++)
        if (crash_signals[i] == sig)
            return i;
    return -1;
}

static void crash_handler(int sig, siginfo_t *info, void *uctx)
{
    int i = index_of(sig);
    int rank = kb_rank();
    if (rank < 0) {
        /* Not a rank: behave as if we were never installed. */
        struct sigaction *old = &previous[i];
        if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
            old->sa_sigaction(sig, info, uctx);
            return;
        }
        if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
            old->sa_handler(sig);
            return;
        }
        if (old->sa_handler == SIG_IGN)
            return;
    } else {
        char line[128];
        size_t n = 0;
        n = kb__ss_put(line, n, sizeof line, "kbthreads: rank ");
        n = kb__ss_put_long(line, n, sizeof line, rank);
        n = kb__ss_put(line, n, sizeof line, " (kb-rank-");
        n = kb__ss_put_long(line, n, sizeof line, rank);
        n = kb__ss_put(line, n, sizeof line, ") crashed: ");
        n = kb__ss_put(line, n, sizeof line, signame(sig));
        n = kb__ss_put(line, n, sizeof line, "\n");
        kb__ss_write(2, line, n);
        kb__frames_write_self(2, 0, 1); /* the frames writer's, then C */
    }
    /* Default action, delivered when this handler returns. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

static void install(void)
{
    kb__sys_backtrace_warm(); /* loads libgcc_s now, not inside the handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = crash_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (int i = 0; i < NSIG_CRASH; i++)
        sigaction(crash_signals[i], &sa, &previous[i]);
}

void kb__crash_report_install(void)
{
    pthread_once(&install_once, install);
}

void kb__crash_altstack(struct kb_worker *w)
{
    if (!w->altstack || w->altstack_on)
        return;
    stack_t ss = {.ss_sp = w->altstack, .ss_size = w->altstack_size, .ss_flags = 0};
    w->altstack_on = sigaltstack(&ss, NULL) == 0;
}
