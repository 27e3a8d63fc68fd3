/* SPDX-License-Identifier: MIT */
/*
 * kb_bench sim: the simulation-shaped job of issue 20 in C (bench/handoff/kb_sim.c),
 * the model of bench/python/sim_model.py (the Python binding's and greenlet's
 * version) with the same handles, durations and checksum.
 */
#ifndef KB_BENCH_SIM_H
#define KB_BENCH_SIM_H

#include <kbthreads.h>

#include "bench_common.h"

/** Run o->reps repetitions (after a warm-up one) of o->m steps of o->n ranks
 *  spawned with so; print KBR sim / sim_cpu lines named impl and a KBI
 *  sim_checksum line. Exits 3 if the event order changes between
 *  repetitions or the engine sees a collective before every rank arrived. */
void run_sim(const struct bench_opts *o, const kb_spawn_opts *so, const char *impl);

#endif
