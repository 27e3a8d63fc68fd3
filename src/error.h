/* SPDX-License-Identifier: MIT */
/*
 * A run's failure state: the failures of its ranks (insertion order), what
 * stopped it, and the kb_spawn_error report built from them (error.c).
 */
#ifndef KB_ERROR_H
#define KB_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "kbthreads.h"

struct kb_run;
struct kb_rank;

/* (B): written by the baton holder (a failing rank adds its failure; the
 * driver the rest), read by the driver once the run stopped. */
struct kb_failure {
    int failed; /* the run failed (cancel/abort/clear already done) */
    int code;   /* what kb_spawn returns for it: KB_ESPAWN, KB_ETIMEDOUT, KB_EDIVERGED, KB_ENOMEM */
    /* the ranks' failures in insertion order; capacity nprocs (each rank
     * at most once: kb_rank.failed) */
    kb_rank_error *errors;
    size_t nerrors;
    int drain_code; /* the drain's failing engine code, 0 if none */
    kb_handle drain_handle;
    kb_wait_origin drain_origin;
    uint64_t diverged_turn; /* with KB_EDIVERGED */
    char *detail;           /* all but KB_ESPAWN: what happened */
    kb_live_rank *live;     /* all but KB_ESPAWN: the live ranks then */
    size_t nlive;
};

/* Add a failure of rank rk (its first one only; later ones are ignored).
 * Caller holds the baton. fmt NULL: a default text naming the code. */
void kb__failure_addv(struct kb_rank *rk, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* The same with a plain text (NULL: "rank function returned <code>"). */
void kb__failure_add_text(struct kb_rank *rk, int code, const char *text);

/* Free failure records (messages included). */
void kb__rank_errors_free(kb_rank_error *errors, size_t n);

/* Build the report of a failed run; NULL if allocation failed. */
kb_spawn_error *kb__spawn_error_build(struct kb_run *run);

#endif
