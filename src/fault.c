/* SPDX-License-Identifier: MIT */
#include "fault.h"

#ifdef KB_FAULT_INJECTION
#include <ck_pr.h>
#include <stdint.h>

/* Counters are touched by whichever thread holds the baton (or the test's
 * main thread between spawns), so they need no lock; ck_pr keeps a foreign
 * test thread's arm visible. */
static uint64_t fault_calls[KB_FAULT_KINDS];
static uint64_t fault_at[KB_FAULT_KINDS];

void kb__fault_arm(enum kb_fault_kind kind, long nth)
{
    ck_pr_store_64(&fault_calls[kind], 0);
    ck_pr_store_64(&fault_at[kind], (uint64_t)nth);
}

long kb__fault_calls(enum kb_fault_kind kind)
{
    return (long)ck_pr_load_64(&fault_calls[kind]);
}

int kb__fault_hit(enum kb_fault_kind kind)
{
    uint64_t n = ck_pr_faa_64(&fault_calls[kind], 1) + 1;
    return n == ck_pr_load_64(&fault_at[kind]);
}
#else
/* ISO C forbids an empty translation unit. */
typedef int kb__fault_unused;
#endif
