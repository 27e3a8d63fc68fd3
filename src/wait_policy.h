/* SPDX-License-Identifier: MIT */
/*
 * The wait policy: how a thread waiting for the baton waits (struct
 * kb_wait_budget); speed only, never an order (docs/design.md). The spawn
 * makes it, the holder tells it where rounds begin, and a rank asks it,
 * before it passes the baton on, how to wait for its next turn.
 */
#ifndef KB_WAIT_POLICY_H
#define KB_WAIT_POLICY_H

#include <stdint.h>

#include "baton.h"

struct kb_wait_policy;
struct kb_wait_memory;
struct kb_spawn_stats;

/* A look, spin or watch: longer than a wake on a halted CPU, short enough for long turns. */
#define KB_WAIT_LOOK_NS 50000u

struct kb_wait_setup { /* what a policy is made for */
    int nprocs;
    int affinity;            /* kb_spawn_opts.affinity (0, KB_AFFINITY_ONE_CPU, KB_AFFINITY_SPREAD) */
    int spread_ncpus;        /* KB_AFFINITY_SPREAD: the CPUs the ranks are pinned to */
    int ncpu;                /* the CPUs it counts; 0: the calling thread's (KB_TEST_CPUS when set) */
    uint64_t (*clock)(void); /* nanoseconds; NULL: CLOCK_MONOTONIC (tests give their own) */
    /* The ctx's record of its last adapting spawn (may be NULL; one block
     * that free() releases): a spawn of its shape starts from it, and each
     * leaves its own there when destroyed. The driver's, with ctx owned. */
    struct kb_wait_memory **memory;
};

/* Make a spawn's policy, from setup and KB_WAIT_POLICY (under Valgrind
 * every wait sleeps): 0, or KB_ENOMEM. Driver, before any rank runs. */
int kb__wait_policy_create(const struct kb_wait_setup *setup, struct kb_wait_policy **out);
void kb__wait_policy_destroy(struct kb_wait_policy *p);

/* Rank `rank`, holding the baton, before it passes it on: how to wait for its
 * next turn (a copy), after moving its thread onto another CPU when the policy
 * asks (its affinity set back at once): the CPU, else -1. */
int kb__wait_next_turn(struct kb_wait_policy *p, int rank, struct kb_wait_budget *out);

/* 1 when the ranks nudge the holder after next now (baton.h). */
int kb__wait_nudging(const struct kb_wait_policy *p);

/* How long the driver and parked workers look before they sleep. */
unsigned kb__wait_park_ns(const struct kb_wait_policy *p);

/* The holder, as a round begins: the handoffs so far, and 1 when the
 * driver begins it (it drained), 0 when a rank does. Usually a compare. */
void kb__wait_round(struct kb_wait_policy *p, uint64_t handoffs, int driver);

/* A timed kb_join returned with the run live; a later one goes on (driver). */
void kb__wait_pause(struct kb_wait_policy *p);
void kb__wait_resume(struct kb_wait_policy *p, uint64_t handoffs);

/* The wait_* fields of a spawn's statistics. */
void kb__wait_report(const struct kb_wait_policy *p, struct kb_spawn_stats *st);

#endif
