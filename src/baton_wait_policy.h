/* SPDX-License-Identifier: MIT */
/*
 * The wait policy: how a thread waiting for the baton looks at its slot
 * before it sleeps (struct kb_wait_budget, baton.h), and whether ranks
 * wake the holder after next ahead of its turn (a nudge). It decides only
 * speed, never an order: every choice gives the same schedule.
 *
 * Two implementations choose the mode (kb_wait_mode) a suspended rank
 * waits in: the static one (baton_wait_policy.c), from counts alone, once
 * per spawn, and the reactive one (baton_wait_reactive.c), which starts
 * from the static choice and moves between modes at round boundaries from
 * what the handoffs measured. This file's resolver picks which one steers
 * a run; both reach the ranks only through run->rank_wait.
 */
#ifndef KB_BATON_WAIT_POLICY_H
#define KB_BATON_WAIT_POLICY_H

#include "baton.h"

struct kb_run;

/* Pick how the run's threads wait: run->rank_wait (a suspended rank),
 * run->park_look_ns (the driver, and a worker whose rank finished), and
 * whether the reactive policy (run->reactive) steers rank_wait from now
 * on. From the run's affinity option, its rank count, the CPUs the
 * calling thread may use and KB_WAIT_POLICY. With KB_AFFINITY_SPREAD,
 * run->opt.ncpus must be resolved. Driver, before any rank runs. */
void kb__wait_policy_resolve(struct kb_run *run);

/* The budget of mode (a kb_wait_mode) with the default affinity, for
 * nprocs ranks on ncpu usable CPUs; counted: the static choice's flavour
 * (a short spin first when there are as many ranks as CPUs), else the
 * mode as KB_WAIT_POLICY forces it. */
struct kb_wait_budget kb__wait_mode_budget(int mode, int nprocs, int ncpu, int counted);

/* The mode the static policy picks for nprocs ranks on ncpu CPUs. */
int kb__wait_static_mode(int nprocs, int ncpu);

#endif
