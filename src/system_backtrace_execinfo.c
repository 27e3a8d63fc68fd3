/* SPDX-License-Identifier: MIT */
/* The backtrace of system.h from <execinfo.h> (glibc; src/CMakeLists.txt
 * builds this file where backtrace_symbols_fd exists, unless KB_PORTABLE=ON,
 * and system_backtrace_none.c otherwise). */
#include "system.h"

#include <execinfo.h>

void kb__sys_backtrace_fd(int fd)
{
    void *frames[64];
    int depth = backtrace(frames, 64);
    backtrace_symbols_fd(frames, depth, fd);
}

void kb__sys_backtrace_warm(void)
{
    /* The first backtrace() loads libgcc_s (malloc, locks): done here,
     * outside any signal handler, so the handler's call is safe. */
    void *warm[1];
    backtrace(warm, 1);
}
