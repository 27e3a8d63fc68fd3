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

/* Driver (the stall report): have thread t write its frames, both kinds, to
 * stderr, and wait for it up to two seconds. 0, or -1 when it did not
 * answer in time (or the signal could not be sent). */
int kb__frames_of_thread(pthread_t t);

#endif
