/* SPDX-License-Identifier: MIT */
/* kb_strerror and kb_version. */
#include <string.h>

#include "kbthreads.h"

const char *kb_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case KB_EINVAL:
        return "invalid argument";
    case KB_ENOMEM:
        return "out of memory";
    case KB_EAGAIN:
        return "the system allows no more rank threads now (kb_spawn_check says which limit)";
    case KB_EBUSY:
        return "ctx busy, or the calling thread does not hold its baton";
    case KB_EPERM:
        return "rank-only call outside a rank, or driver-only call inside one";
    case KB_ECANCELED:
        return "this rank is being cancelled";
    case KB_ESPAWN:
        return "ranks or the drain failed (see kb_spawn_error)";
    case KB_EDIVERGED:
        return "a replayed schedule no longer matches the program (see kb_spawn_error)";
    case KB_ETIMEDOUT:
        return "max_rounds reached with ranks still live (see kb_spawn_error)";
    case KB_EEXITED:
        return "a rank thread exited without returning from its function";
    case KB_ENOTSUP:
        return "not supported on this system (see kb_features)";
    default:
        break;
    }
    if (err < 0 && err > -4096) {
#ifdef KB_HAVE_STRERRORDESC_NP
        /* Any other negative errno value: glibc's static description
         * (thread-safe, unlike strerror()). */
        const char *s = strerrordesc_np(-err);
        if (s)
            return s;
#else
        /* POSIX has no static, thread-safe description of an errno value
         * (strerror's buffer may be overwritten). */
        return "an operating system error (a negative errno value)";
#endif
    }
    return "unknown error";
}

const char *kb_version(void)
{
    return KB_VERSION_STRING;
}
