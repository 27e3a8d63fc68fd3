/* SPDX-License-Identifier: MIT */
/*
 * The wait policy: how a thread waiting for the baton looks at its slot
 * before it sleeps (struct kb_wait_budget, baton.h), and whether ranks
 * wake the holder after next ahead of its turn (a nudge). It decides only
 * speed, never an order: every choice gives the same schedule.
 */
#ifndef KB_BATON_WAIT_POLICY_H
#define KB_BATON_WAIT_POLICY_H

struct kb_run;

/* Pick run->rank_wait (a suspended rank), run->park_look_ns (the driver,
 * and a worker whose rank finished) from the run's affinity option, its
 * rank count, the CPUs the calling thread may use and KB_WAIT_POLICY.
 * With KB_AFFINITY_SPREAD, run->opt.ncpus must be resolved. Driver, before
 * any rank runs. */
void kb__wait_policy_resolve(struct kb_run *run);

#endif
