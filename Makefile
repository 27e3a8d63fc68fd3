# SPDX-License-Identifier: MIT
# Thin wrapper over CMake. `make demo` and `make test` do all set-up on a
# fresh Debian machine: missing packages are installed with apt-get when run
# as root (otherwise the command to run is printed).

BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
DEMO_ARGS ?=

DEB_PACKAGES := build-essential cmake pkg-config libck-dev libcmocka-dev valgrind clang clang-format doxygen python3 python3-dev python3-pytest python3-greenlet gdb
# The Python package as pip builds it, offline (bindings/python/tests/package_test.sh).
DEB_PACKAGES += python3-setuptools python3-wheel python3-build python3-venv
# Issue 30's tests: PyTorch and numpy in Python ranks (bindings/python/tests/test_torch_ranks.py).
DEB_PACKAGES += python3-torch python3-numpy

.PHONY: all deps build demo demo-cpp demo-torch explore-demo test test-fast test-condvar test-portable docs format format-check install clean help

PREFIX ?= /usr/local
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null || \
                 find include src tests examples -name '*.[ch]' -o -name '*.[ch]pp')

all: build

help:
	@echo "make demo       build and run the demo (ring all-reduce over 8 simulated ranks)"
	@echo "make demo-cpp   the same demo written with the C++ layer (same output)"
	@echo "make demo-torch PyTorch data-parallel training on 4 Python ranks (examples/torch_ddp.py)"
	@echo "make explore-demo  kbthreads-explore finds, shrinks and replays a planted rank-order bug"
	@echo "make test       build and run the whole suite; again under Valgrind (memcheck, Helgrind, DRD);"
	@echo "                then the ThreadSanitizer and AddressSanitizer+UBSan builds"
	@echo "make test-fast  the suite without the Valgrind and sanitizer passes"
	@echo "make test-condvar | test-portable   test-fast and the memcheck pass against a KB_BATON=condvar"
	@echo "                build ($(CONDVAR_BUILD)/) or a KB_PORTABLE=ON build ($(PORTABLE_BUILD)/)"
	@echo "make tsan | asan | helgrind | drd   one of those passes"
	@echo "make test-release  the suite without Valgrind in a Release build (part of make test);"
	@echo "                make test-build-types: in Debug, Release, RelWithDebInfo and MinSizeRel builds"
	@echo "make soak       10^8 handoffs, 4096 ranks, 10^4 spawn/fail cycles, twice (tens of minutes)"
	@echo "make fuzz-long  10^5 random programs on the library and on the model"
	@echo "make fuzz       the libFuzzer entry point for FUZZ_TIME seconds"
	@echo "make bench      every benchmark, optimised, side by side with floors and peers (minutes)"
	@echo "make bench-report  make bench, then docs/benchmarks.md and its plots"
	@echo "make bench-compare BENCH_OLD=a.json BENCH_NEW=b.json   two results files side by side"
	@echo "make test-python PY=/path/to/python3.X   the binding built and its suite run on that CPython;"
	@echo "                make test-pythons: on every CPython found from 3.10 up (part of make test)"
	@echo "make docs       API reference (HTML, man) in $(BUILD)/docs, Doxygen warnings as errors"
	@echo "make install    install under PREFIX (default /usr/local)"
	@echo "make format-check / make format   clang-format check / rewrite"
	@echo "make clean      remove $(BUILD)/"

# The C++ tests and kbdemo_cpp (build-essential brings g++ too; said here
# because the build looks for it).
DEB_PACKAGES += g++
deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing Debian packages; run: sudo apt-get update && sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# Debian's pytest on CPython 3.10 (make test-pythons; 3.11 has it built in).
DEB_PACKAGES += python3-exceptiongroup
# gdb's py-bt, which the Python binding's gdb test needs (it skips without it).
DEB_PACKAGES += python3-dbg
# The explorer's Slurm test (tests/explore/test_explore_slurm.py) brings up a
# single-node cluster: slurmctld, slurmd, sbatch and munged.
DEB_PACKAGES += slurm-wlm munge

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DKB_VALGRIND_TESTS=ON -DKB_BUILD_TESTS=ON -DKB_BUILD_EXAMPLES=ON $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/kbdemo $(DEMO_ARGS)

demo-cpp: build
	./$(BUILD)/examples/kbdemo_cpp $(DEMO_ARGS)

# Debian's python3 and python3-torch (installed by deps' recipe when missing),
# the package in the source tree on the library and compiled part built here.
DEMO_TORCH_PACKAGES := python3-torch
demo-torch: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEMO_TORCH_PACKAGES)"
	PYTHONPATH=bindings/python KBTHREADS_LIBRARY=$(BUILD)/src/libkbthreads.so.0 /usr/bin/python3 examples/torch_ddp.py $(DEMO_ARGS)

# kbthreads-explore on the planted order bug of tests/explore/explore_target.c
# (docs/scheduling.md): it must find it (exit status 1), and the printed
# replay must fail again.
explore-demo: build
	./$(BUILD)/kbthreads-explore --runs 20 --out $(BUILD)/explore-demo -- ./$(BUILD)/tests/explore/explore_target bug; \
	  test $$? -eq 1
	KB_REPLAY=$(BUILD)/explore-demo/shrunk.schedule ./$(BUILD)/tests/explore/explore_target bug; test $$? -eq 1

test-fast: build
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) -LE valgrind

# The whole suite: format, API docs, ctest (with gdb, pytest, packaging,
# reliability), the same programs under Valgrind memcheck, Helgrind and DRD,
# the ThreadSanitizer and AddressSanitizer+UBSan builds (tsan/tsan.mk), the
# suite without Valgrind in a Release build (tests/build-types.mk), and a
# seconds-long benchmark smoke run (no time is asserted).
test: build format-check docs
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) -LE valgrind
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) -L valgrind
	$(MAKE) tsan asan
	$(MAKE) test-release
	$(MAKE) test-condvar test-portable
	$(MAKE) bench-smoke
	$(MAKE) test-pythons

# The other baton and the portable fallbacks (docs/design.md): the suite and
# its memcheck pass, each in its own build folder. (Helgrind, DRD, TSan and
# ASan run against them on demand: e.g. make tsan TSAN_BUILD=build-tsan-condvar
# CMAKE_FLAGS=-DKB_BATON=condvar.)
CONDVAR_BUILD  ?= build-condvar
PORTABLE_BUILD ?= build-portable
MEMCHECK_TESTS := -R '^valgrind/'

test-condvar:
	$(MAKE) BUILD=$(CONDVAR_BUILD) CMAKE_FLAGS="$(CMAKE_FLAGS) -DKB_BATON=condvar" test-fast
	cd $(CONDVAR_BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) $(MEMCHECK_TESTS)

test-portable:
	$(MAKE) BUILD=$(PORTABLE_BUILD) CMAKE_FLAGS="$(CMAKE_FLAGS) -DKB_PORTABLE=ON" test-fast
	cd $(PORTABLE_BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) $(MEMCHECK_TESTS)

docs: build
	cmake --build $(BUILD) --target docs

install: build docs
	cmake --install $(BUILD) --prefix $(PREFIX)

format-check: deps
	clang-format --dry-run --Werror $(FORMAT_FILES)

format: deps
	clang-format -i $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)

# make tsan / asan / helgrind / drd
include tsan/tsan.mk

# make soak / fuzz-long / fuzz
include tests/reliability/reliability.mk

# make bench / bench-smoke / bench-report
include bench/bench.mk

# make test-release / test-build-types
include tests/build-types.mk

# make test-python PY=... / test-pythons
include bindings/python/python.mk
