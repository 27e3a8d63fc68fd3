/* SPDX-License-Identifier: MIT */
/* The backtrace of system.h where there is none to take (no <execinfo.h>,
 * or KB_PORTABLE=ON): the crash report and the stall watchdog say so. */
#include "system.h"

#include <unistd.h>

void kb__sys_backtrace_fd(int fd)
{
    static const char none[] = "kbthreads: (no backtrace on this system)\n";
    ssize_t w = write(fd, none, sizeof none - 1); /* async-signal-safe */
    (void)w;
}

void kb__sys_backtrace_warm(void)
{
    /* nothing to load */
}
