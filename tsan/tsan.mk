# SPDX-License-Identifier: MIT
# Sanitizer and race-detector runs. Included by the top-level Makefile
# (after its own targets, so `all` stays the default goal); uses its BUILD,
# JOBS, CMAKE_FLAGS and its deps/build targets.
#
#   make tsan      library + whole suite (C and C++) with -fsanitize=thread
#                  (clang, clang++) in
#                  $(TSAN_BUILD); ctest without the valgrind label and the
#                  packaging tests; any report fails the test that made it
#   make asan      the same with -fsanitize=address,undefined in $(ASAN_BUILD)
#   make helgrind  the Helgrind runs (label helgrind) in $(BUILD): the
#                  representative suite programs and tests/debug's clean and
#                  racy programs; any report fails, except the racy program's,
#                  which must be reported
#   make drd       the same with DRD (label drd)

TSAN_BUILD ?= build-tsan
ASAN_BUILD ?= build-asan
SAN_CC     ?= clang
SAN_CXX    ?= clang++
SAN_BUILD_TYPE ?= RelWithDebInfo

KB_TSAN_SUPPRESSIONS := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))suppressions.txt)

# halt_on_error: the first report fails the test (its output names it).
TSAN_RUN_OPTIONS ?= halt_on_error=1 second_deadlock_stack=1 history_size=4 \
                    suppressions=$(KB_TSAN_SUPPRESSIONS)
ASAN_RUN_OPTIONS ?= halt_on_error=1 detect_leaks=1 detect_stack_use_after_return=1
UBSAN_RUN_OPTIONS ?= halt_on_error=1 print_stacktrace=1

# Packaging tests install and build consumers: not a sanitizer's job.
SAN_CTEST_EXCLUDE := -LE valgrind -E '^packaging_'
# Not under TSan: test_rel_signals, the signal storm. TSan's runtime can
# deadlock on itself when a signal lands inside its own free() bookkeeping
# (seen here: the handler waits in __tsan::SlotLock, called from
# CallUserSignalHandler, on the thread interrupted in MetaMap::FreeRange),
# which hangs the test until its timeout. The storm still runs plain,
# under memcheck and under ASan.
# Nor test_debug_ctx_dump: the dump asks each rank thread for its stack with
# a signal, and TSan's runtime delivers a signal to a thread blocked in a
# system call only when the call returns; a rank parked on the baton then
# misses the dump's 2 s deadline (5 failures in 5 quiet runs; the plain,
# memcheck and ASan runs pass).
TSAN_CTEST_EXCLUDE := -LE valgrind -E '^(packaging_|test_rel_signals$$|test_debug_ctx_dump$$)'

.PHONY: tsan asan helgrind drd

tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_C_COMPILER=$(SAN_CC) -DCMAKE_CXX_COMPILER=$(SAN_CXX) -DCMAKE_BUILD_TYPE=$(SAN_BUILD_TYPE) \
	      -DKB_SANITIZE=thread -DKB_VALGRIND_TESTS=OFF -DKB_BUILD_TESTS=ON -DKB_BUILD_EXAMPLES=ON $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="$(strip $(TSAN_RUN_OPTIONS))" \
	  ctest --output-on-failure --no-tests=error -j $(JOBS) $(TSAN_CTEST_EXCLUDE)

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_C_COMPILER=$(SAN_CC) -DCMAKE_CXX_COMPILER=$(SAN_CXX) -DCMAKE_BUILD_TYPE=$(SAN_BUILD_TYPE) \
	      -DKB_SANITIZE=address,undefined -DKB_VALGRIND_TESTS=OFF -DKB_BUILD_TESTS=ON -DKB_BUILD_EXAMPLES=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS="$(strip $(ASAN_RUN_OPTIONS))" \
	  UBSAN_OPTIONS="$(strip $(UBSAN_RUN_OPTIONS))" \
	  ctest --output-on-failure --no-tests=error -j $(JOBS) $(SAN_CTEST_EXCLUDE)

helgrind drd: build
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) -L '^$@$$'
