/* SPDX-License-Identifier: MIT */
/*
 * The reactive wait policy's constants (baton_wait_reactive.c), named once
 * here so that its unit test (tests/test_internal_wait_reactive.c) checks
 * the policy against the same values instead of copies. Included only by
 * those two files; docs/design.md has the measurements behind each value.
 */
#ifndef KB_BATON_WAIT_REACTIVE_TUNING_H
#define KB_BATON_WAIT_REACTIVE_TUNING_H

/* Home is measured over windows of at least this many handoffs and a
 * whole round: one clock read per window stays negligible. */
#define WINDOW_HANDOFFS 256u
/* A try is as long as a window: some modes (unpinned nudges) settle into
 * a fast or a slow pattern of CPU placement over hundreds of handoffs, and
 * 64-handoff tries measured them in neither. */
#define PROBE_HANDOFFS 256u
/* Tries take at most 1/32 of the spawn's time, plus one (the measuring
 * is to cost at most a few percent). */
#define PROBE_SHARE 32u
/* A try running this many times slower per handoff than home is judged
 * at once, once it has MIN_JUDGE_HANDOFFS handoffs and a whole round. */
#define ABORT_FACTOR       2u
#define MIN_JUDGE_HANDOFFS 8u
/* A try must beat home by more than 1/8 (noise between windows of one
 * process is of that order on the machines measured). */
#define HYSTERESIS_NUM 7u
#define HYSTERESIS_DEN 8u
/* est[home] grown by half since it was chosen: the load changed. */
#define DEGRADE_NUM 3u
#define DEGRADE_DEN 2u
/* No mode is tried where a round has more handoffs than a try (more
 * than PROBE_HANDOFFS - 1 ranks): a try then lasts at least a round, and
 * at 512 ranks on 2 CPUs a single round of looking or of sleeping was
 * measured to leave nudges 4-8x slower for the rest of the process,
 * seated or not. Such spawns keep the static choice. (A bound on a
 * round's time instead kept 64 ranks beside another simulation, whose
 * rounds are long because the machine is busy, from ever leaving nudges.) */
#define TRY_RANKS_MAX (PROBE_HANDOFFS - 1u)
/* Tries begin at the starts of slots of the monotonic clock,
 * (nprocs + 1) * TRY_SLOT_PER_RANK_NS long: a function of the shape alone,
 * so two processes of one shape share their slots whatever each measured.
 * 2^19 ns a rank is about 32 tries' worth of rounds at 8 us per handoff,
 * the slowest handoffs measured on an idle machine. */
#define TRY_SLOT_PER_RANK_NS (1ull << 19)
/* A mode that lost waits this many times more slots before its next try
 * (its square when the try was cut short). */
#define BACKOFF_GROWTH 4u
/* Turns of gathering (rank_seat.c: kb__seat_gather) that a losing try of
 * looks moves to without backing off: two processes side by side that
 * gathered on one CPU part at the first turn where their pids' bits
 * differ, within 4 turns for 15 pairs in 16. */
#define GATHER_TURNS_FREE 4u
/* The longest back-off, in time (in slots: at least one). */
#define BACKOFF_MAX_NS (1ull << 30)

#endif
