/* SPDX-License-Identifier: MIT */
/*
 * The registry of live runs: a list debuggers walk to show every rank of
 * every live spawn (the gdb extension's `kb ranks`). Drivers add a run when
 * its threads exist and remove it before they are joined. Nothing in the
 * library reads it; the symbols are hidden but present in the symbol table,
 * and the exported debug descriptor (debug_offsets.h) points at them for
 * builds without one.
 */
#include "registry.h"

#include <ck_sequence.h>
#include <pthread.h>

#include "debug_offsets.h"
#include "run.h"

pthread_mutex_t kb__live_runs_lock = PTHREAD_MUTEX_INITIALIZER;
struct kb_run *kb_live_runs;
/* Concurrency Kit's sequence counter: odd while the list changes, even
 * otherwise (written under the lock). A reader in another process (the
 * dump) compares it before and after it walks the list, as
 * ck_sequence_read_begin / ck_sequence_read_retry would in-process. */
ck_sequence_t kb_live_runs_gen = CK_SEQUENCE_INITIALIZER;

/* A program linked with the static library gets debug_offsets.o (the
 * descriptor) and the embedded gdb script (gdb/embed_gdb_script.cmake) only
 * if something it links refers to them: this does. */
#ifdef KB_HAVE_GDB_SECTION
extern const char kb_gdb_script_embedded;
__attribute__((used)) static const void *const kb_keep_for_debuggers[] = {&kb_debug_offsets,
                                                                          &kb_gdb_script_embedded};
#else /* no embedded script in this build (KB_PORTABLE, or not ELF) */
__attribute__((used)) static const void *const kb_keep_for_debuggers[] = {&kb_debug_offsets};
#endif

void kb__registry_add(struct kb_run *run)
{
    pthread_mutex_lock(&kb__live_runs_lock);
    ck_sequence_write_begin(&kb_live_runs_gen);
    run->registry.prev = NULL;
    run->registry.next = kb_live_runs;
    if (kb_live_runs)
        kb_live_runs->registry.prev = run;
    kb_live_runs = run;
    ck_sequence_write_end(&kb_live_runs_gen);
    pthread_mutex_unlock(&kb__live_runs_lock);
}

void kb__registry_remove(struct kb_run *run)
{
    pthread_mutex_lock(&kb__live_runs_lock);
    ck_sequence_write_begin(&kb_live_runs_gen);
    if (run->registry.prev)
        run->registry.prev->registry.next = run->registry.next;
    else
        kb_live_runs = run->registry.next;
    if (run->registry.next)
        run->registry.next->registry.prev = run->registry.prev;
    run->registry.prev = run->registry.next = NULL;
    ck_sequence_write_end(&kb_live_runs_gen);
    pthread_mutex_unlock(&kb__live_runs_lock);
}
