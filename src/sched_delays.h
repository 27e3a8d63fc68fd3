/* SPDX-License-Identifier: MIT */
/*
 * KB_SCHED_DELAYS: a spawn's delays, the turns at which the rank whose
 * turn it is moves behind the ranks still to run in its round
 * (kb_spawn_opts.delays, docs/scheduling.md). Here: the checks of the
 * option, the syntax of the environment's KB_SCHED_DELAYS (one list per
 * spawn) and the process's count of the spawns that read it. The round
 * order the delays give is strategy.c's (kb__order_delays).
 */
#ifndef KB_SCHED_DELAYS_H
#define KB_SCHED_DELAYS_H

#include <stddef.h>
#include <stdint.h>

/* Is delays[0..n) a valid kb_spawn_opts.delays: not NULL when n > 0,
 * every turn at least 1, in ascending order (repeats allowed)? */
int kb__delays_ok(const uint64_t *delays, size_t n);

/* The list of the process's spawn-th spawn (from 1) in value, a
 * KB_SCHED_DELAYS value: lists separated by '/', each a comma-separated,
 * possibly empty, list of decimal turn numbers from 1 in ascending order.
 * A spawn past the last list gets none. 0 with *turns (malloc'd, NULL when
 * *n is 0) and *n; KB_EINVAL when any list of value is malformed, with
 * why (cap bytes) saying where and how; KB_ENOMEM. */
int kb__delays_parse(const char *value, int spawn, uint64_t **turns, size_t *n, char *why, size_t cap);

/* This spawn's number among the process's spawns that took their delays
 * from KB_SCHED_DELAYS since it last changed value (from 1): the k-th
 * takes the value's k-th list. Spawns on different threads count in the
 * order they start. */
int kb__delays_env_spawn(const char *value);

#endif
