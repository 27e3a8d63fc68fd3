/* SPDX-License-Identifier: MIT */
/*
 * The replay checks (replay_check.c): whether a spawn replaying a recorded
 * schedule (kb_spawn_opts.replay_path, KB_REPLAY) still follows it, and,
 * where it stops following it, the text of the report that says so
 * (run->failure.detail). Only a strict replay is checked; a partial
 * schedule forces the rounds it lists loosely and never diverges
 * (strategy.h: kb__order_partial). Driver only, holding the baton: the
 * rank ending a round hands the baton back while a strict replay runs
 * (round_loop.c: round_boundary).
 */
#ifndef KB_REPLAY_CHECK_H
#define KB_REPLAY_CHECK_H

#include <stdint.h>

struct kb_run;

/* A replay that checks the program against it (not a partial schedule). */
int kb__replay_strict(const struct kb_run *run);

/* A strict replay's order for round, run->order holding the live ranks in
 * rank order: 0 with run->order set to it; KB_EDIVERGED with
 * run->failure.detail and diverged_turn set, when the recording ended or
 * its round has other live ranks than the program; KB_ENOMEM when the
 * comparison could not allocate (not a divergence: run->failure.detail
 * says so). */
int kb__replay_order(struct kb_run *run, uint64_t round);

/* Every rank finished after the rounds run so far: 0 when the replay
 * (if strict) has no more rounds, else KB_EDIVERGED with
 * run->failure.detail and diverged_turn set. */
int kb__replay_check_end(struct kb_run *run);

#endif
