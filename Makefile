# SPDX-License-Identifier: MIT
# Thin wrapper over CMake. `make build`, `make demo` and `make test` do all
# set-up on a fresh Debian machine: missing packages are installed with
# apt-get when run as root (otherwise the command to run is printed). The
# build targets install only what the library, the demos and the Python
# binding need; the test targets add the test tools and a venv.

BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
DEMO_ARGS ?=

# make build, demo, demo-cpp, install: the library (C11, pthreads,
# Concurrency Kit), the C and C++ demos, and the Python binding's compiled
# part for Debian's python3 (its headers). g++ comes with build-essential;
# named because the C++ demo needs it.
BUILD_PACKAGES := build-essential g++ cmake pkg-config libck-dev python3 python3-dev
# make docs (and make test): the API reference and man pages.
DOCS_PACKAGES := doxygen
# The test venv (make test, make demo-torch): Debian's python3 makes it.
VENV_PACKAGES := python3-venv
# make test, test-fast and the other test targets, on top of those: cmocka,
# Valgrind, clang (ThreadSanitizer, ASan, clang-format), gdb; Debian's pytest
# and greenlet for /usr/bin/python3 (the explorer's tests, the tools' checks
# and the reference oracle in ../shared/reference, which needs
# python3-greenlet); the package as pip builds it (scikit-build-core, from
# the test venv, with Ninja: bindings/python/tests/package_test.sh and
# install_test.sh).
TEST_PACKAGES := libcmocka-dev valgrind clang clang-format gdb python3-pytest python3-greenlet
TEST_PACKAGES += ninja-build
# gdb's py-bt, which the Python binding's gdb test needs (it skips without it).
TEST_PACKAGES += python3-dbg
# The explorer's Slurm test (tests/explore/test_explore_slurm.py) brings up a
# single-node cluster: slurmctld, slurmd, sbatch and munged.
TEST_PACKAGES += slurm-wlm munge
# Everything (the other .mk files' test targets depend on `deps`).
DEB_PACKAGES = $(BUILD_PACKAGES) $(DOCS_PACKAGES) $(VENV_PACKAGES) $(TEST_PACKAGES)

# The test venv: the binding's test requirements (PyTorch, numpy, pytest,
# greenlet; bindings/python/requirements-test.txt) from the package index,
# installed for VENV_PYTHON, which must be the interpreter CMake builds the
# compiled part for (KB_PYTHON3, Debian's /usr/bin/python3) so that the
# venv's python loads it. make test, test-fast and demo-torch make it when
# it is missing (and install the requirements again when their file
# changes). VENV_PIP_ARGS: extra pip options, e.g. on a machine whose index
# has only the CUDA build of torch, --index-url naming PyTorch's CPU wheel
# index (with --extra-index-url for the rest).
VENV ?= $(BUILD)/venv
VENV_PYTHON ?= /usr/bin/python3
VENV_PIP_ARGS ?=
TEST_REQUIREMENTS := bindings/python/requirements-test.txt

.PHONY: all deps deps-build deps-docs deps-venv build build-tests venv demo demo-cpp demo-torch explore-demo test test-passes test-suite test-fast test-loaded test-condvar test-portable docs format format-check install clean help

PREFIX ?= /usr/local
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null || \
                 find include src tests examples -name '*.[ch]' -o -name '*.[ch]pp')

all: build

help:
	@echo "make build      the library, the demos and the Python binding's compiled part in $(BUILD)/"
	@echo "make demo       build and run the demo (ring all-reduce over 8 simulated ranks)"
	@echo "make demo-cpp   the same demo written with the C++ layer (same output)"
	@echo "make demo-torch an unmodified DDP script on 4 kbthreads ranks (examples/ddp_train.py), a torchrun"
	@echo "                script by kbthreads-torchrun (examples/torchrun_train.py), then a DDP step time predicted"
	@echo "                for two networks (examples/ddp_predict.py) and a 3-D parallel Llama dry run on 8 ranks"
	@echo "                (examples/llama_dryrun.py), in the test venv"
	@echo "make explore-demo  kbthreads-explore finds, shrinks and replays a planted rank-order bug"
	@echo "make test       build and run the whole suite, its passes TEST_PASSES (2) at a time: the suite, also"
	@echo "                under Valgrind (memcheck, Helgrind, DRD), TSan, ASan+UBSan, Release, condvar, portable,"
	@echo "                a benchmark smoke run, other CPythons (make test-suite: the first of them)"
	@echo "make test-fast  the suite without the Valgrind and sanitizer passes"
	@echo "make test-loaded  test-fast beside HOGS (default 2) busy loops: no test may need a free CPU"
	@echo "make venv       the test venv ($(VENV)): $(TEST_REQUIREMENTS) for $(VENV_PYTHON)"
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
	@echo "make install    install under PREFIX (default /usr/local); the API docs too once make docs built them"
	@echo "make format-check / make format   clang-format check / rewrite"
	@echo "make lint-python  mypy --strict, ruff check and ruff format --check on kbthreads and kbthreads_tools"
	@echo "make clean      remove $(BUILD)/ (and the test venv in it)"

# $(call kb_deps,PACKAGES): install the Debian packages missing from the list.
define kb_deps
	@missing=""; \
	for p in $(1); do \
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
endef

deps:
	$(call kb_deps,$(DEB_PACKAGES))
deps-build:
	$(call kb_deps,$(BUILD_PACKAGES))
deps-docs:
	$(call kb_deps,$(BUILD_PACKAGES) $(DOCS_PACKAGES))
deps-venv:
	$(call kb_deps,$(BUILD_PACKAGES) $(VENV_PACKAGES))

# make build: the library, the examples and the binding's compiled part,
# no test programs (a build folder that make test configured keeps them).
$(BUILD)/CMakeCache.txt: | deps-build
	cmake -S . -B $(BUILD) -DKB_BUILD_TESTS=OFF -DKB_FAULT_INJECTION=OFF -DKB_BUILD_EXAMPLES=ON $(CMAKE_FLAGS)

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The test venv (see VENV above). The stamp holds the requirements it was
# made from; pip installs them again when the file is newer.
$(VENV)/requirements-test.txt: $(TEST_REQUIREMENTS) | deps-venv
	test -x $(VENV)/bin/python || $(VENV_PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check $(VENV_PIP_ARGS) -r $(TEST_REQUIREMENTS)
	cp $(TEST_REQUIREMENTS) $@

venv: $(VENV)/requirements-test.txt

# The build with the test programs (make test, test-fast, explore-demo):
# every test tool, the venv, and the build folder configured for them
# (ctest's python_binding runs with the venv's python).
build-tests: deps venv
	cmake -S . -B $(BUILD) -DKB_BUILD_TESTS=ON -DKB_FAULT_INJECTION=ON -DKB_VALGRIND_TESTS=ON \
	      -DKB_BUILD_EXAMPLES=ON -DKB_TEST_PYTHON=$(abspath $(VENV))/bin/python $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/kbdemo $(DEMO_ARGS)

demo-cpp: build
	./$(BUILD)/examples/kbdemo_cpp $(DEMO_ARGS)

# The package in the source tree, on the library and compiled part built
# here, in the test venv (its PyTorch).
# examples/ddp_train.py: a DDP script unchanged but for its launch line
# (docs/torch.md); examples/torchrun_train.py: a torchrun script, unchanged,
# run by kbthreads-torchrun (python -m kbthreads.torch.run, as the source
# tree has no console script); examples/ddp_predict.py: a DDP step time
# predicted for two networks (docs/torch-time.md; timeline and plot in $(BUILD)/);
# examples/llama_dryrun.py: a 3-D parallel Llama step on 8 ranks, first on tiny
# real tensors against the unsplit model, then on fake ones at Llama 3 8B's
# layer shapes (docs/torch.md; timeline and plot in $(BUILD)/).
demo-torch: build venv
	PYTHONPATH=bindings/python KBTHREADS_LIBRARY=$(BUILD)/src/libkbthreads.so.0 $(VENV)/bin/python examples/ddp_train.py $(DEMO_ARGS)
	PYTHONPATH=bindings/python KBTHREADS_LIBRARY=$(BUILD)/src/libkbthreads.so.0 $(VENV)/bin/python -m kbthreads.torch.run \
	  --nproc-per-node 4 examples/torchrun_train.py
	PYTHONPATH=bindings/python KBTHREADS_LIBRARY=$(BUILD)/src/libkbthreads.so.0 $(VENV)/bin/python examples/ddp_predict.py \
	  --timeline $(BUILD)/ddp_predict.json --plot $(BUILD)/ddp_predict.svg
	PYTHONPATH=bindings/python KBTHREADS_LIBRARY=$(BUILD)/src/libkbthreads.so.0 $(VENV)/bin/python examples/llama_dryrun.py \
	  --real --dp 2 --tp 2 --pp 2 --dim 32 --heads 4 --kv-heads 2 --ffn 64 --vocab 64 --seq 16 --steps 2 --no-sim
	PYTHONPATH=bindings/python KBTHREADS_LIBRARY=$(BUILD)/src/libkbthreads.so.0 $(VENV)/bin/python examples/llama_dryrun.py \
	  --dp 2 --tp 2 --pp 2 --timeline $(BUILD)/llama_dryrun.json --plot $(BUILD)/llama_dryrun.svg

# kbthreads-explore on the planted order bug of tests/explore/explore_target.c
# (docs/scheduling.md): it must find it (exit status 1), and the printed
# replay must fail again.
explore-demo: build-tests
	./$(BUILD)/kbthreads-explore --runs 20 --out $(BUILD)/explore-demo -- ./$(BUILD)/tests/explore/explore_target bug; \
	  test $$? -eq 1
	KB_REPLAY=$(BUILD)/explore-demo/shrunk.schedule ./$(BUILD)/tests/explore/explore_target bug; test $$? -eq 1

test-fast: build-tests
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) -LE valgrind

# The fast suite beside HOGS busy loops (tests/support/with_cpu_hogs.sh): a
# user's machine is often busy, and no test may depend on a free CPU.
HOGS ?= 2
test-loaded: build-tests
	cd $(BUILD) && sh $(abspath tests/support/with_cpu_hogs.sh) $(HOGS) \
	  ctest --output-on-failure --no-tests=error -j $(JOBS) -LE valgrind

# The whole suite: format, API docs, the Python packages' typing and lint
# (python.mk) first; then its passes, independent of each other, up to
# TEST_PASSES at a time, each printed whole when it ends (each also uses
# every CPU on its own; side by side they fill each other's tails, a
# single long test or a build's link step):
#   test-suite    ctest here (with gdb, pytest, packaging, reliability) and
#                 the same programs under Valgrind memcheck, Helgrind and DRD
#   tsan, asan    the ThreadSanitizer and AddressSanitizer+UBSan builds (tsan/tsan.mk)
#   test-release  the suite without Valgrind in a Release build (tests/build-types.mk)
#   test-condvar, test-portable   the condvar and portable builds (each with this build's venv)
#   bench-smoke   a seconds-long benchmark run (no time is asserted)
#   test-pythons  the binding on every other CPython (bindings/python/python.mk)
# The suite passes beside busy loops (make test-loaded), so two passes side
# by side hold too. TEST_PASSES=1: one after another.
TEST_PASSES ?= 2
TEST_PASS_TARGETS := test-suite tsan test-release asan test-condvar test-portable test-pythons bench-smoke
test: build-tests
	$(MAKE) --no-print-directory format-check docs
	$(MAKE) --no-print-directory lint-python
	$(MAKE) --no-print-directory -j $(TEST_PASSES) --output-sync=target test-passes

test-passes: $(TEST_PASS_TARGETS)

test-suite: build-tests
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS)

# The other baton and the portable fallbacks (docs/design.md): the suite and
# its memcheck pass, each in its own build folder. (Helgrind, DRD, TSan and
# ASan run against them on demand: e.g. make tsan TSAN_BUILD=build-tsan-condvar
# CMAKE_FLAGS=-DKB_BATON=condvar.)
# (kbthreads.torch's suite reaches the baton only through the binding, whose
# own suite runs here: it runs in the default build and against the
# installed wheel, not again in these two; bindings/python/CMakeLists.txt.)
OTHER_BATON_FLAGS ?= -DKB_TEST_TORCH=OFF
CONDVAR_BUILD  ?= build-condvar
PORTABLE_BUILD ?= build-portable
MEMCHECK_TESTS := -R '^valgrind/'

test-condvar: deps
	$(MAKE) BUILD=$(CONDVAR_BUILD) VENV=$(abspath $(VENV)) CMAKE_FLAGS="$(CMAKE_FLAGS) -DKB_BATON=condvar $(OTHER_BATON_FLAGS)" test-fast
	cd $(CONDVAR_BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) $(MEMCHECK_TESTS)

test-portable: deps
	$(MAKE) BUILD=$(PORTABLE_BUILD) VENV=$(abspath $(VENV)) CMAKE_FLAGS="$(CMAKE_FLAGS) -DKB_PORTABLE=ON $(OTHER_BATON_FLAGS)" test-fast
	cd $(PORTABLE_BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) $(MEMCHECK_TESTS)

# Doxygen may come after the build folder was configured: configure again
# so that CMake finds it (cmake/docs.cmake adds the target when it does).
docs: deps-docs build
	cmake -S . -B $(BUILD) >/dev/null
	cmake --build $(BUILD) --target docs

# The library, headers, pkg-config and CMake files, the Python package and
# the tools; the HTML and man pages too when make docs has built them.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format-check: deps
	clang-format --dry-run --Werror $(FORMAT_FILES)

format: deps
	clang-format -i $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)

# make tsan / asan / helgrind / drd
include tsan/tsan.mk
# (Helgrind and DRD run test programs: the test build.)
helgrind drd: build-tests

# make soak / fuzz-long / fuzz
include tests/reliability/reliability.mk
# (The soak and the differential fuzzer are test programs.)
soak fuzz-long: build-tests

# make bench / bench-smoke / bench-report
include bench/bench.mk

# make test-release / test-build-types
include tests/build-types.mk

# make test-python PY=... / test-pythons
include bindings/python/python.mk
