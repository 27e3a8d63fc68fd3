# SPDX-License-Identifier: MIT
# The fault-injection variant of the binding's compiled part, for
# tests/test_fault_injection.py (included by ../CMakeLists.txt): the same
# kbthreads/_accel*.c linked with the library built with KB_FAULT_INJECTION
# (src/CMakeLists.txt: kbthreads_fault, position-independent for this) and
# tests/fault_seams.c, whose functions arm the library's seams and fail the
# allocations the extension makes through Python's allocators. Built only
# with the tests and the fault-injection library, where the normal compiled
# part is built against this build's library. Output:
# <build>/bindings/python/fault/kbthreads/_accel*.so; ctest's python_binding
# finds it there (nothing else loads it).
if(TARGET kbthreads_pyaccel AND TARGET kbthreads_fault AND KB_BUILD_TESTS AND NOT KB_PYTHON_WHEEL)
  Python3_add_library(kbthreads_pyaccel_fault MODULE WITH_SOABI ${KB_PYACCEL_SOURCES}
    ${CMAKE_CURRENT_LIST_DIR}/fault_seams.c)
  set_target_properties(kbthreads_pyaccel_fault PROPERTIES OUTPUT_NAME _accel
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fault/kbthreads C_VISIBILITY_PRESET hidden)
  target_compile_options(kbthreads_pyaccel_fault PRIVATE ${KB_WARNINGS})
  target_include_directories(kbthreads_pyaccel_fault PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(kbthreads_pyaccel_fault PRIVATE kbthreads_fault ${CMAKE_DL_LIBS})
endif()
