/* SPDX-License-Identifier: MIT */
/*
 * The debug descriptor: a constant table, exported as kb_debug_offsets and
 * kept in its own ELF section (.kb_debug), that tells a debugger or an
 * out-of-process tool where the live runs are and how the structs they are
 * made of are laid out, so that it can walk them without debug info (a
 * release or stripped build). The layout of this table is the contract for
 * tools, documented in docs/debugging.md ("The debug descriptor"); readers:
 * gdb/kbthreads_gdb.py and tools/kbthreads-dump.
 *
 * Invariant: every entry is generated from the real structs with offsetof
 * and sizeof (debug_offsets.c), so it cannot drift from them; a reader
 * refuses a version it does not know. Changing what a field means, or
 * removing an entry, bumps KB_DEBUG_OFFSETS_VERSION; adding an entry does
 * not (readers look entries up by name). An entry's name is the reader's
 * word for a field, not its C path: "run.failed" is run->failure.failed.
 * Version 2: the generation is a 32-bit ck_sequence_t (was 64-bit), and
 * "rank.recorded" is "rank.failed".
 */
#ifndef KB_DEBUG_OFFSETS_H
#define KB_DEBUG_OFFSETS_H

#include <ck_sequence.h>
#include <stdint.h>

struct kb_run;

#define KB_DEBUG_OFFSETS_MAGIC   "kbdebug"
#define KB_DEBUG_OFFSETS_VERSION 2
#define KB_DEBUG_NAME_MAX        24

/* One entry. "<struct>.<field>": the field's byte offset in the struct and
 * its size (4-byte fields are signed, 8-byte ones unsigned or pointers);
 * "<struct>": offset 0 and the struct's size; "value.<NAME>": size 0 and
 * the constant's value in offset (two's complement). */
struct kb_debug_field {
    char name[KB_DEBUG_NAME_MAX]; /* NUL-padded */
    uint32_t offset;
    uint32_t size;
};

/* The number of entries (debug_offsets.c asserts it). */
#define KB_DEBUG_NFIELDS 61

struct kb_debug_offsets {
    char magic[8];         /* KB_DEBUG_OFFSETS_MAGIC and a NUL */
    uint32_t version;      /* KB_DEBUG_OFFSETS_VERSION */
    uint32_t header_size;  /* offsetof(struct kb_debug_offsets, fields) */
    uint32_t field_size;   /* sizeof(struct kb_debug_field) */
    uint32_t nfields;      /* entries in fields */
    uint32_t pointer_size; /* sizeof(void *) */
    uint32_t reserved;     /* 0 */
    /* Where the registry of live runs is (registry.c): the list head, and a
     * ck_sequence_t (a 32-bit counter) the registry makes odd while it
     * changes the list and even again after, so a reader in another process
     * can tell whether the list changed under it. */
    struct kb_run *const *live_runs;
    const ck_sequence_t *live_runs_gen;
    struct kb_debug_field fields[KB_DEBUG_NFIELDS];
};

extern const struct kb_debug_offsets kb_debug_offsets;

/* registry.c */
extern struct kb_run *kb_live_runs;
extern ck_sequence_t kb_live_runs_gen;

#endif
