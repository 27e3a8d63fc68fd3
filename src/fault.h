/* SPDX-License-Identifier: MIT */
/*
 * Fault-injection seams (tests only).
 *
 * In a build with KB_FAULT_INJECTION (the static libkbthreads_fault that
 * only tests link), every fallible call the library makes goes through
 * kb__fault_hit(kind) first; when it answers 1 the call is treated as
 * failed. Release builds compile the seam to a constant 0.
 */
#ifndef KB_FAULT_H
#define KB_FAULT_H

enum kb_fault_kind {
    KB_FAULT_ALLOC = 0,  /* malloc/calloc/realloc */
    KB_FAULT_THREAD = 1, /* pthread_create */
    KB_FAULT_SYNC = 2,   /* pthread_attr/mutex/cond init and the like */
    KB_FAULT_KINDS
};

#ifdef KB_FAULT_INJECTION
/* Arm: the nth call of that kind from now fails (1 = the next one); 0 disarms.
 * Only the one call fails; later calls succeed again. */
void kb__fault_arm(enum kb_fault_kind kind, long nth);
/* Calls of that kind seen since the last kb__fault_arm. */
long kb__fault_calls(enum kb_fault_kind kind);
int kb__fault_hit(enum kb_fault_kind kind);
#else
#define kb__fault_hit(kind) 0
#endif

#endif
