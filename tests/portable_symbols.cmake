# SPDX-License-Identifier: MIT
# The KB_PORTABLE=ON library must call nothing outside POSIX: run with
#   cmake -DNM=<nm> -DLIBRARY=<libkbthreads.so or .a> -P portable_symbols.cmake
# it lists the file's undefined symbols (nm -D --undefined-only for a shared
# library, nm -u for an archive) and fails, naming each, if one is
# Linux-only or GNU-only. Registered by tests/CMakeLists.txt.
#
# What counts: a function the library's source would have to call by name
# that POSIX does not define, i.e. the calls system_linux.c,
# system_backtrace_execinfo.c, strerror.c and the futex baton make, plus the
# usual Linux-only ones a change could bring in:
#   gettid syscall prctl clone clone3
#   sched_setaffinity sched_getaffinity sched_getcpu
#   __sched_cpucount __sched_cpualloc __sched_cpufree   (glibc's CPU_COUNT,
#                                                        CPU_ALLOC, CPU_FREE)
#   backtrace backtrace_symbols backtrace_symbols_fd    (<execinfo.h>)
#   epoll_* eventfd signalfd timerfd_* inotify_* memfd_create getrandom
#   get_nprocs get_nprocs_conf sysinfo secure_getenv pthread_yield
#   every name ending in _np ("non-portable" by POSIX's own convention:
#   pthread_setname_np, pthread_getname_np, pthread_setaffinity_np,
#   pthread_getaffinity_np, pthread_getattr_np, strerrordesc_np, ...).
# What does not count: glibc's own names behind POSIX macros and variables
# (__errno_location for errno, __sigsetjmp for sigsetjmp,
# __pthread_register_cancel for pthread_cleanup_push, __libc_current_sigrtmin
# for SIGRTMIN, __sysconf, __tls_get_addr): another libc spells those its
# own way from the same POSIX source.

if(NOT NM OR NOT LIBRARY)
  message(FATAL_ERROR "usage: cmake -DNM=<nm> -DLIBRARY=<library> -P portable_symbols.cmake")
endif()
if(NOT EXISTS "${LIBRARY}")
  message(FATAL_ERROR "no such library: ${LIBRARY}")
endif()

if(LIBRARY MATCHES "\\.a$")
  set(_args -u)
else()
  set(_args -D --undefined-only)
endif()
execute_process(COMMAND ${NM} ${_args} ${LIBRARY}
  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${_args} ${LIBRARY} failed (${_rc}): ${_err}")
endif()

set(_linux_only
  "gettid|syscall|prctl|clone|clone3"
  "sched_setaffinity|sched_getaffinity|sched_getcpu"
  "__sched_cpucount|__sched_cpualloc|__sched_cpufree"
  "backtrace|backtrace_symbols|backtrace_symbols_fd"
  "epoll_[a-z_0-9]+|eventfd|signalfd|timerfd_[a-z_]+|inotify_[a-z_0-9]+|memfd_create|getrandom"
  "get_nprocs|get_nprocs_conf|sysinfo|secure_getenv|pthread_yield"
  "[A-Za-z_0-9]+_np")
string(JOIN "|" _alternatives ${_linux_only})
set(_re "^(${_alternatives})$")

# Lines like "                 U gettid@GLIBC_2.30" (shared) or
# "                 U gettid" (each member of an archive).
string(REPLACE "\n" ";" _lines "${_out}")
set(_found)
set(_count 0)
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^ *[Uw] +([^ @]+)")
    math(EXPR _count "${_count} + 1")
    set(_sym ${CMAKE_MATCH_1})
    if(_sym MATCHES "${_re}")
      list(APPEND _found ${_sym})
    endif()
  endif()
endforeach()
# An empty listing would pass anything: the library calls at least malloc.
if(_count EQUAL 0)
  message(FATAL_ERROR "${NM} ${_args} ${LIBRARY} listed no undefined symbol; cannot check it")
endif()
list(REMOVE_DUPLICATES _found)
if(_found)
  foreach(_sym IN LISTS _found)
    message("Linux-only symbol: ${_sym}")
  endforeach()
  message(FATAL_ERROR "${LIBRARY} needs what only Linux (or GNU) has; KB_PORTABLE=ON must not")
endif()
message("${LIBRARY}: ${_count} undefined symbols, none Linux-only")
