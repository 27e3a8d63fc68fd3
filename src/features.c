/* SPDX-License-Identifier: MIT */
/* kb_features(): what this build has of the system-dependent parts
 * (src/CMakeLists.txt decides, KB_HAVE_* definitions). */
#include "kbthreads.h"

unsigned kb_features(void)
{
    unsigned f = 0;
#ifdef KB_HAVE_AFFINITY
    f |= KB_FEATURE_AFFINITY;
#endif
#ifdef KB_HAVE_SETNAME
    f |= KB_FEATURE_THREAD_NAMES;
#endif
#ifdef KB_HAVE_BACKTRACE
    f |= KB_FEATURE_BACKTRACE;
#endif
#ifdef KB_HAVE_GETTID
    f |= KB_FEATURE_THREAD_IDS;
#endif
#ifdef KB_HAVE_GDB_SECTION
    f |= KB_FEATURE_GDB_SECTION;
#endif
    return f;
}
