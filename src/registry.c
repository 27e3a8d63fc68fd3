/*
 * The registry of live runs: a list debuggers walk to show every rank of
 * every live spawn (the gdb extension's `kb ranks`). Drivers add a run when
 * its threads exist and remove it before they are joined. Nothing in the
 * library reads it; the symbols are hidden but present in the symbol table.
 */
#include <pthread.h>

#include "run.h"

pthread_mutex_t kb_live_runs_lock = PTHREAD_MUTEX_INITIALIZER;
struct kb_run *kb_live_runs;

void kb_registry_add(struct kb_run *run)
{
    pthread_mutex_lock(&kb_live_runs_lock);
    run->reg_prev = NULL;
    run->reg_next = kb_live_runs;
    if (kb_live_runs)
        kb_live_runs->reg_prev = run;
    kb_live_runs = run;
    pthread_mutex_unlock(&kb_live_runs_lock);
}

void kb_registry_remove(struct kb_run *run)
{
    pthread_mutex_lock(&kb_live_runs_lock);
    if (run->reg_prev)
        run->reg_prev->reg_next = run->reg_next;
    else
        kb_live_runs = run->reg_next;
    if (run->reg_next)
        run->reg_next->reg_prev = run->reg_prev;
    run->reg_prev = run->reg_next = NULL;
    pthread_mutex_unlock(&kb_live_runs_lock);
}
