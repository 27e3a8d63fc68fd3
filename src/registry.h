/* SPDX-License-Identifier: MIT */
/*
 * The registry of live runs (registry.c), which debuggers walk (the gdb
 * extension reads kb_live_runs, debug_offsets.h). Driver only; a lock
 * orders it with other drivers.
 */
#ifndef KB_REGISTRY_H
#define KB_REGISTRY_H

struct kb_run;

void kb__registry_add(struct kb_run *run);
void kb__registry_remove(struct kb_run *run);

#endif
