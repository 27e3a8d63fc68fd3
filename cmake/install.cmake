# SPDX-License-Identifier: MIT
# Installation: headers (C, and the header-only C++ layer), shared library (SONAME libkbthreads.so.<major>),
# static library, pkg-config file, CMake package, the license, API docs when built, kbthreads-dump and kbthreads-explore
# (tools/: the launchers and the kbthreads_tools package).
include(CMakePackageConfigHelpers)

install(TARGETS kbthreads kbthreads_static EXPORT kbthreadsTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kbthreads.h ${PROJECT_SOURCE_DIR}/include/kbthreads.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(KB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kbthreads)
install(EXPORT kbthreadsTargets NAMESPACE kbthreads:: DESTINATION ${KB_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kbthreadsConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kbthreadsConfig.cmake INSTALL_DESTINATION ${KB_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kbthreadsConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kbthreadsConfig.cmake ${PROJECT_BINARY_DIR}/kbthreadsConfigVersion.cmake
  DESTINATION ${KB_CMAKE_DIR})

# The .pc file finds its prefix relative to itself, so `cmake --install
# --prefix X` (or `make install PREFIX=X`) gives a working file anywhere.
file(RELATIVE_PATH KB_PC_RELATIVE_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" KB_PC_RELATIVE_PREFIX "${KB_PC_RELATIVE_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kbthreads.pc.in ${PROJECT_BINARY_DIR}/kbthreads.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kbthreads.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The license, in <prefix>/share/doc/kbthreads/ (CMAKE_INSTALL_DOCDIR), with
# Concurrency Kit's BSD-2-Clause notice beside it: a program linked with the
# installed static library also links Concurrency Kit (libkbthreads.a does
# not carry it), and whoever links its libck.a statically ships Concurrency
# Kit's code, which must travel with that notice.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/licenses/ConcurrencyKit-BSD-2-Clause.txt
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

# API reference (built by the `docs` target; installed when present). The
# man pages are <build>/docs/man/man3 as cmake/docs.cmake leaves it: only
# pages named for the API (kb_*, KB_*, kb::*, kbthreads.h, kbthreads.hpp),
# so none shadows another package's page from a prefix searched first.
install(DIRECTORY ${PROJECT_BINARY_DIR}/docs/html DESTINATION ${CMAKE_INSTALL_DOCDIR} OPTIONAL)
install(DIRECTORY ${PROJECT_BINARY_DIR}/docs/man/ DESTINATION ${CMAKE_INSTALL_MANDIR} OPTIONAL)

# The gdb extension where gdb auto-loads it for the installed library
# (<datadir>/gdb/auto-load/<absolute libdir>/libkbthreads.so.<version>-gdb.py,
# as glib and libstdc++ do). The library also embeds it in its
# .debug_gdb_scripts section; this copy survives `strip --strip-debug`.
install(CODE "
  set(_kb_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(_kb_dir \"\$ENV{DESTDIR}\${_kb_prefix}/${CMAKE_INSTALL_DATADIR}/gdb/auto-load\${_kb_prefix}/${CMAKE_INSTALL_LIBDIR}\")
  file(MAKE_DIRECTORY \"\${_kb_dir}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/gdb/kbthreads_gdb.py\"
    \"\${_kb_dir}/libkbthreads.so.${PROJECT_VERSION}-gdb.py\" COPYONLY)
  message(STATUS \"Installing: \${_kb_dir}/libkbthreads.so.${PROJECT_VERSION}-gdb.py\")
")

# kbthreads-dump and kbthreads-explore: the launchers (tools/) in <bindir>,
# the kbthreads_tools package they run in <prefix>/share/kbthreads/ (the
# launchers find it there, relative to themselves), beside the gdb
# extension once more (<prefix>/share/kbthreads/kbthreads_gdb.py: the dump
# imports its layout code, the explorer's gdb script sources it).
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/kbthreads-dump ${PROJECT_SOURCE_DIR}/tools/kbthreads-explore
  DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/kbthreads_tools DESTINATION share/kbthreads
  FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/gdb/kbthreads_gdb.py DESTINATION share/kbthreads)
# (kbthreads-torchrun, which runs the Python package, is installed with it:
# bindings/python/CMakeLists.txt.)

# The build tree's <build>/kbthreads-explore (tests/explore, make
# explore-demo): a symlink to the launcher, which resolves it and so runs the
# source tree's package.
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/tools/kbthreads-explore ${PROJECT_BINARY_DIR}/kbthreads-explore SYMBOLIC)
