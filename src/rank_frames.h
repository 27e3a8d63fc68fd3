/* SPDX-License-Identifier: MIT */
/*
 * A rank thread's frames, written by the thread itself in a signal handler
 * (rank_frames.c says how): for the stall report, the crash report and
 * kbthreads-dump's requests.
 */
#ifndef KB_RANK_FRAMES_H
#define KB_RANK_FRAMES_H

#include <pthread.h>

/* Install KB_STALL_SIGNAL's handler, once per process (any thread). */
void kb__frames_install(void);

/* The calling thread's frames to fd: the frames writer's (kb_set_frames_writer),
 * at most max_frames of them (0: all), then with c_frames the C backtrace.
 * Async-signal-safe once kb__frames_install has run. Without a frames writer
 * it writes exactly the C backtrace (or nothing without c_frames). */
void kb__frames_write_self(int fd, int max_frames, int c_frames);

/* Have thread t write its frames to fd (the frames writer's, then with
 * c_frames its C backtrace), and wait for it up to two seconds; the calling
 * thread writes its own at once. 0, or -1 when it did not answer in time
 * (or the signal could not be sent). Used by the stall report and
 * kb_ctx_dump, one request at a time. */
int kb__frames_of_thread(pthread_t t, int fd, int c_frames);

#endif
