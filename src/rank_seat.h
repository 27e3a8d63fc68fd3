/* SPDX-License-Identifier: MIT */
/*
 * Seating (rank_seat.c): with the default affinity, the ranks of a run
 * that nudges start each stretch of nudging on alternate CPUs, even ranks
 * on one and odd ranks on the other, without any thread's affinity
 * changing. docs/design.md ("Seating") says why and what it costs.
 *
 * The fields are (B) (run->seat, kb_rank.seat_epoch): the driver chooses
 * the CPUs at resolution, the holder asks for a seating when rank_wait
 * gains nudges and for a gathering when it loses them (or, with more
 * ranks than CPUs, when looks follow another mode), and each rank moves
 * itself, holding the baton, at its next suspension.
 */
#ifndef KB_RANK_SEAT_H
#define KB_RANK_SEAT_H

struct kb_run;
struct kb_rank;

/* Driver, at resolution, before the wait policy picks a mode: the two
 * CPUs of the driver's affinity to seat ranks on (the one it runs on, for
 * odd ranks, and the next one it may use, for even ranks), or none (an
 * affinity option, fewer than two CPUs, no affinity to read). */
void kb__seat_resolve(struct kb_run *run);

/* Holder: rank_wait has just gained nudges; every rank seats itself at its
 * next suspension (nothing when the run seats none). */
void kb__seat_arm(struct kb_run *run);

/* Holder: rank_wait has just lost its nudges, or starts looking with
 * more ranks than CPUs; every rank moves, at its next suspension, to one
 * CPU, where the kernel may spread them again as it likes (nothing when
 * the run seats none). Turn 0 gathers on the driver's CPU (seat 1); turn
 * k > 0 on the seat bit k - 1 of the process id picks (rank_seat.c says
 * why). */
void kb__seat_gather(struct kb_run *run, unsigned turn);

/* Rank, holding the baton, before it passes it on: seat itself if the run
 * asked since it last did. One compare otherwise. */
void kb__seat_rank(struct kb_rank *rk);

#endif
