# SPDX-License-Identifier: MIT
# Reliability targets (docs/reliability.md), included by the top-level
# Makefile. They build in $(BUILD) (build/ by default) with CMake and run
# the full sizes that ctest only samples:
#
#   make soak        10^8 handoffs in one spawn, 4096 ranks, 10^4 spawn/fail
#                    cycles on one ctx, with the reactive wait policy,
#                    again with KB_WAIT_POLICY=nudge and again with
#                    KB_WAIT_POLICY=cycle (the mode changes every round;
#                    tens of minutes each);
#                    KB_SOAK_HANDOFFS, KB_SOAK_RANKS, KB_SOAK_CYCLES override
#                    the sizes
#   make fuzz-long   10^5 seeded random programs on the library and on the
#                    model, identical traces required; prints the count.
#                    FUZZ_SEEDS=n and FUZZ_FIRST=s choose the range. Then
#                    the Python binding's differential test
#                    (bindings/python/tests/test_differential.py: random
#                    rank programs on kbthreads and on the greenlet
#                    reference) with PY_FUZZ_EXAMPLES programs (make test
#                    runs 150), in the test venv (minutes)
#   make fuzz        the libFuzzer entry point for FUZZ_TIME seconds
#                    (clang; builds in $(BUILD)-fuzz)

# Keep the including Makefile's default goal.
REL_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

REL_BUILD   = $(or $(BUILD),build)
REL_DIR     = $(REL_BUILD)/tests/reliability
REL_JOBS    = $(or $(JOBS),$(shell nproc 2>/dev/null || echo 2))
FUZZ_SEEDS ?= 100000
FUZZ_FIRST ?= 1
FUZZ_TIME  ?= 60
FUZZ_BUILD ?= $(REL_BUILD)-fuzz
PY_FUZZ_EXAMPLES ?= 20000
REL_PYTHON  = $(or $(VENV),$(REL_BUILD)/venv)/bin/python

.PHONY: soak fuzz-long fuzz

soak: $(REL_BUILD)/CMakeCache.txt
	cmake --build $(REL_BUILD) -j $(REL_JOBS) --target test_rel_soak
	KB_SOAK=1 CMOCKA_MESSAGE_OUTPUT=stdout ./$(REL_DIR)/test_rel_soak
	KB_SOAK=1 KB_WAIT_POLICY=nudge CMOCKA_MESSAGE_OUTPUT=stdout ./$(REL_DIR)/test_rel_soak
	KB_SOAK=1 KB_WAIT_POLICY=cycle CMOCKA_MESSAGE_OUTPUT=stdout ./$(REL_DIR)/test_rel_soak

fuzz-long: $(REL_BUILD)/CMakeCache.txt
	cmake --build $(REL_BUILD) -j $(REL_JOBS) --target test_rel_differential
	./$(REL_DIR)/test_rel_differential --seeds $(FUZZ_SEEDS) --first $(FUZZ_FIRST)
	cmake --build $(REL_BUILD) -j $(REL_JOBS) --target kbthreads_pyaccel
	KBTHREADS_LIBRARY=$(abspath $(REL_BUILD))/src/libkbthreads.so.0 KBTHREADS_FUZZ_EXAMPLES=$(PY_FUZZ_EXAMPLES) \
	  $(REL_PYTHON) -m pytest -q -p no:cacheprovider --hypothesis-show-statistics \
	  bindings/python/tests/test_differential.py

fuzz:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DKB_FUZZER=ON -DKB_VALGRIND_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(REL_JOBS) --target rel_fuzz
	mkdir -p $(FUZZ_BUILD)/corpus
	./$(FUZZ_BUILD)/tests/reliability/rel_fuzz -max_total_time=$(FUZZ_TIME) -max_len=1024 \
	  -print_final_stats=1 $(FUZZ_BUILD)/corpus

.DEFAULT_GOAL := $(REL_SAVED_DEFAULT_GOAL)
