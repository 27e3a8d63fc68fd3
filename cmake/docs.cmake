# SPDX-License-Identifier: MIT
# `docs` target: the API reference from the header comments with Doxygen,
# warnings as errors, so every public name is documented. HTML in
# <build>/docs/html (both headers and docs/api-mainpage.md, one pass); man
# pages in <build>/docs/man/man3, the folder `make install` installs: one
# Doxygen pass per header (docs/Doxyfile-man.in says why) into
# <build>/docs/man-passes/, from which docs/man_pages.py keeps only pages
# named for the API (kb_*, KB_*, kb::*, the headers' pages).
find_package(Doxygen QUIET)
if(DOXYGEN_FOUND)
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
  set(_kb_passes ${PROJECT_BINARY_DIR}/docs/man-passes)
  set(KB_MAN_PASS c)
  set(KB_MAN_INPUT ${PROJECT_SOURCE_DIR}/include/kbthreads.h)
  set(KB_MAN_TAGFILE_OUT ${_kb_passes}/kbthreads.h.tag)
  set(KB_MAN_TAGFILES_IN "")
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile-man.in ${PROJECT_BINARY_DIR}/Doxyfile-man-c @ONLY)
  set(KB_MAN_PASS cxx)
  set(KB_MAN_INPUT ${PROJECT_SOURCE_DIR}/include/kbthreads.hpp)
  set(KB_MAN_TAGFILE_OUT "")
  set(KB_MAN_TAGFILES_IN ${_kb_passes}/kbthreads.h.tag)
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile-man.in ${PROJECT_BINARY_DIR}/Doxyfile-man-cxx @ONLY)
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${_kb_passes}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_kb_passes}
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile-man-c
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile-man-cxx
    COMMAND ${KB_PYTHON3} ${PROJECT_SOURCE_DIR}/docs/man_pages.py ${PROJECT_BINARY_DIR}/docs/man/man3
            ${_kb_passes}/c ${_kb_passes}/cxx
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "API reference in ${PROJECT_BINARY_DIR}/docs"
    VERBATIM)
endif()
