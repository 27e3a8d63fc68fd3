/* SPDX-License-Identifier: MIT */
/*
 * The crash report (crash.c; kb_spawn_opts.crash_report, KB_CRASH_REPORT).
 */
#ifndef KB_CRASH_H
#define KB_CRASH_H

struct kb_worker;

/* Install the process-wide signal handlers, once. */
void kb__crash_report_install(void);
/* Worker thread: run signal handlers on its own alternate stack. */
void kb__crash_altstack(struct kb_worker *w);

#endif
