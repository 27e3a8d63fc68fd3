/* SPDX-License-Identifier: MIT */
/*
 * The single-thread floor: one swapcontext() switch between two user
 * contexts on one thread (what a stackful coroutine scheduler pays, before
 * any scheduling work; glibc's swapcontext also saves and restores the
 * signal mask, one system call per switch).
 *
 *   floor_swapcontext --m SWITCH_PAIRS --reps R
 *
 * ns per switch = elapsed / (2 * M).
 */
#include <stdlib.h>
#include <ucontext.h>

#include "bench_common.h"

static ucontext_t main_uc, co_uc;

static void co_main(void)
{
    for (;;)
        swapcontext(&co_uc, &main_uc);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    if (o.spread)
        bench_die("--spread is a kb_bench option (the swapcontext floor has no ranks to spread)");
    size_t stack_size = 64 * 1024;
    void *stack = malloc(stack_size);
    if (!stack)
        bench_die("out of memory");
    if (getcontext(&co_uc) != 0)
        bench_die("getcontext failed");
    co_uc.uc_stack.ss_sp = stack;
    co_uc.uc_stack.ss_size = stack_size;
    co_uc.uc_link = NULL;
    makecontext(&co_uc, co_main, 0);
    for (int rep = -1; rep < o.reps; rep++) {
        uint64_t t0 = bench_now_ns();
        for (long i = 0; i < o.m; i++)
            swapcontext(&main_uc, &co_uc);
        uint64_t t1 = bench_now_ns();
        uint64_t ops = 2 * (uint64_t)o.m;
        if (rep >= 0)
            bench_emit("switch", "swapcontext", 0, 1, rep, (double)(t1 - t0) / (double)ops, "ns", ops);
    }
    free(stack);
    return 0;
}
