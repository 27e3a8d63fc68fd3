# SPDX-License-Identifier: MIT
# bench/bench.mk: the benchmark targets (issue 4). Included by the top-level
# Makefile, or used on its own from the repository root:
#
#   make -f bench/bench.mk bench          optimised build in build-bench/, every benchmark, a table,
#                                         results in bench/results/ (about 10 minutes on 2 CPUs)
#   make -f bench/bench.mk bench-smoke    seconds: proves every benchmark runs (no time is asserted)
#   make -f bench/bench.mk bench-report   `bench`, then docs/benchmarks.md (by question), docs/benchmarks-loads.md, docs/bench-*.png
#                                         (BENCH_REUSE=1: from the last results, without running again)
#   make -f bench/bench.mk bench-compare  two results files figure by figure (BENCH_OLD, BENCH_NEW;
#                                         default: the last run's baseline and new build)
#
# Run as root on Debian, missing packages are installed with apt-get; as
# another user the missing ones are named, and the peers needing them
# (SimGrid: libsimgrid-dev g++; greenlet: python3-greenlet; the Python
# binding's C accelerator: python3-dev; the plots:
# gnuplot-nox) are skipped with a note.
#
# Variables: BENCH_BUILD (build folder), BENCH_ARGS (extra run.py options,
# e.g. "--reps 9" or "--only kbthreads floors"), BENCH_REUSE, BENCH_PYTHON, BENCH_BASELINE_SRC,
# BENCH_OPTIONAL_DEPS (no: install only what the build needs), BENCH_OLD and BENCH_NEW (bench-compare).

BENCH_MK_SAVED_GOAL := $(.DEFAULT_GOAL)
BENCH_MK_DIR := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
BENCH_MK_ROOT := $(patsubst %/,%,$(dir $(BENCH_MK_DIR)))
# Standalone (make -f bench/bench.mk): no other makefile was read before this one.
BENCH_MK_STANDALONE := $(if $(filter 1,$(words $(MAKEFILE_LIST))),yes,)

BENCH_BUILD ?= $(BENCH_MK_ROOT)/build-bench
# The same benchmarks against the library built with the condvar baton
# (KB_BATON=condvar): bench/harness/run.py --condvar-bindir.
BENCH_CONDVAR_BUILD ?= $(BENCH_MK_ROOT)/build-bench-condvar
# BENCH_BASELINE_SRC=<another checkout, e.g. of an older main>: these benchmarks built against that
# library too, in build-bench-baseline, and run beside the new ones (run.py --baseline-bindir).
BENCH_BASELINE_SRC ?=
BENCH_BASELINE_BUILD ?= $(BENCH_MK_ROOT)/build-bench-baseline
BENCH_PYTHON ?= /usr/bin/python3
BENCH_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BENCH_ARGS ?=
BENCH_REUSE ?=
BENCH_RESULTS := $(BENCH_MK_DIR)/results
BENCH_OLD ?= $(BENCH_RESULTS)/bench-baseline-latest.json
BENCH_NEW ?= $(BENCH_RESULTS)/bench-latest.json
BENCH_DEB_REQUIRED := build-essential cmake pkg-config libck-dev python3
# BENCH_OPTIONAL_DEPS=no: do not install the peers' and the plots' packages.
BENCH_OPTIONAL_DEPS ?= yes
BENCH_DEB_OPTIONAL := $(if $(filter yes,$(BENCH_OPTIONAL_DEPS)),g++ libsimgrid-dev python3-greenlet python3-dev gnuplot-nox,)

.PHONY: bench bench-torch bench-torch-handoff bench-torch-llama bench-smoke bench-report bench-compare bench-build bench-deps bench-clean bench-help

bench-help:
	@echo "make bench          optimised build in $(BENCH_BUILD), every benchmark, results in bench/results/"
	@echo "make bench-smoke    a seconds-long run proving every benchmark runs"
	@echo "make bench-torch    torch.distributed: kbthreads, PyTorch's threaded group, gloo processes (docs/bench-torch.md)"
	@echo "make bench-torch-handoff  only bench-torch's handoff cells: per-rank process state on against off (minutes)"
	@echo "make bench-torch-llama    the 3-D parallel Llama dry run at 64, 256 and 1,024 ranks (docs/bench-llama.md)"
	@echo "make bench-report   make bench, then docs/benchmarks.md (by question), docs/benchmarks-loads.md, plots (BENCH_REUSE=1: no run)"
	@echo "make bench-compare  two results files figure by figure (BENCH_OLD=... BENCH_NEW=...)"
	@echo "make bench-clean    remove $(BENCH_BUILD)"

bench-deps:
	@if command -v dpkg-query >/dev/null 2>&1; then \
	  missing=""; \
	  for p in $(BENCH_DEB_REQUIRED) $(BENCH_DEB_OPTIONAL); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "bench: installing:$$missing"; \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	        || echo "bench: apt-get could not install:$$missing"; \
	    else \
	      echo "bench: missing Debian packages:$$missing"; \
	      echo "bench: (sudo apt-get update && sudo apt-get install -y$$missing); optional ones only skip a peer or the plots"; \
	    fi; \
	  fi; \
	  for p in $(BENCH_DEB_REQUIRED); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" \
	      || { echo "bench: required package $$p is missing"; exit 1; }; \
	  done; \
	fi

bench-build: bench-deps
	@mkdir -p $(BENCH_BUILD)
	@echo "cmake -S $(BENCH_MK_DIR) -B $(BENCH_BUILD) -DCMAKE_BUILD_TYPE=Release"
	@cmake -S $(BENCH_MK_DIR) -B $(BENCH_BUILD) -DCMAKE_BUILD_TYPE=Release >$(BENCH_BUILD)/configure.log 2>&1 \
	  || { cat $(BENCH_BUILD)/configure.log; exit 1; }
	@grep '^-- bench:' $(BENCH_BUILD)/configure.log || true
	cmake --build $(BENCH_BUILD) -j $(BENCH_JOBS)
	@mkdir -p $(BENCH_CONDVAR_BUILD)
	@cmake -S $(BENCH_MK_DIR) -B $(BENCH_CONDVAR_BUILD) -DCMAKE_BUILD_TYPE=Release -DKB_BATON=condvar \
	  >$(BENCH_CONDVAR_BUILD)/configure.log 2>&1 || { cat $(BENCH_CONDVAR_BUILD)/configure.log; exit 1; }
	cmake --build $(BENCH_CONDVAR_BUILD) -j $(BENCH_JOBS) --target kb_bench
ifneq ($(BENCH_BASELINE_SRC),)
	@mkdir -p $(BENCH_BASELINE_BUILD)
	@cmake -S $(BENCH_MK_DIR) -B $(BENCH_BASELINE_BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DKB_BENCH_LIBRARY_DIR=$(abspath $(BENCH_BASELINE_SRC)) >$(BENCH_BASELINE_BUILD)/configure.log 2>&1 \
	  || { cat $(BENCH_BASELINE_BUILD)/configure.log; exit 1; }
	cmake --build $(BENCH_BASELINE_BUILD) -j $(BENCH_JOBS) --target kb_bench kb_bench_python
endif

BENCH_RUN = $(BENCH_PYTHON) $(BENCH_MK_DIR)/harness/run.py --bindir $(BENCH_BUILD) --condvar-bindir $(BENCH_CONDVAR_BUILD) \
            --results $(BENCH_RESULTS) $(if $(BENCH_BASELINE_SRC),--baseline-bindir $(BENCH_BASELINE_BUILD))

bench: bench-build
	$(BENCH_RUN) $(BENCH_ARGS)
	$(BENCH_TORCH_RUN) --out $(BENCH_RESULTS)/torch-latest.json --report $(BENCH_MK_ROOT)/docs/bench-torch.md
	$(BENCH_LLAMA_RUN) --out $(BENCH_RESULTS)/torch-llama-latest.json --report $(BENCH_MK_ROOT)/docs/bench-llama.md

bench-smoke: bench-build
	$(BENCH_RUN) --smoke $(BENCH_ARGS)
	$(BENCH_TORCH_RUN) --smoke
	$(BENCH_LLAMA_RUN) --smoke

# torch.distributed on kbthreads against PyTorch's threaded test group and gloo
# processes (bench/torch/torch_bench.py), with the test venv's PyTorch 2.x (the top
# Makefile's `venv` target makes it), on the library and compiled part built
# in $(BENCH_BUILD); its report is docs/bench-torch.md.
BENCH_TORCH_PYTHON ?= $(BENCH_MK_ROOT)/build/venv/bin/python
BENCH_TORCH_ARGS ?=
# (the venv's python with this tree's package on the bench build's compiled part)
BENCH_TORCH_PY = @test -x $(BENCH_TORCH_PYTHON) || { echo "bench: $(BENCH_TORCH_PYTHON) missing (make venv)"; exit 1; }; \
  mkdir -p $(BENCH_RESULTS); \
  PYTHONPATH=$(BENCH_MK_ROOT)/bindings/python KBTHREADS_ACCEL=$$(ls $(BENCH_BUILD)/kbthreads/bindings/python/kbthreads/_accel*.so) \
  $(BENCH_TORCH_PYTHON)
BENCH_TORCH_RUN = $(BENCH_TORCH_PY) $(BENCH_MK_DIR)/torch/torch_bench.py $(BENCH_TORCH_ARGS)

bench-torch: bench-build
	$(BENCH_TORCH_RUN) --out $(BENCH_RESULTS)/torch-latest.json --report $(BENCH_MK_ROOT)/docs/bench-torch.md

# The flagship dry run (examples/llama_dryrun.py: a 3-D parallel Llama step
# on fake tensors) at 64, 256 and 1,024 ranks, one process each, one after
# another (bench/torch/torch_llama.py; 20-30 minutes here); its report is
# docs/bench-llama.md.
BENCH_LLAMA_ARGS ?=
BENCH_LLAMA_RUN = $(BENCH_TORCH_PY) -W ignore $(BENCH_MK_DIR)/torch/torch_llama.py $(BENCH_LLAMA_ARGS)

bench-torch-llama: bench-build
	$(BENCH_LLAMA_RUN) --out $(BENCH_RESULTS)/torch-llama-latest.json --report $(BENCH_MK_ROOT)/docs/bench-llama.md

# Only the handoff cells of bench-torch (a bare handoff in a kbthreads.torch
# spawn with torch, random and numpy in use, per-rank process state on and
# off, N = 2, 8, 64); the table is printed, docs/bench-torch.md is left alone.
bench-torch-handoff: bench-build
	$(BENCH_TORCH_RUN) --handoff --out $(BENCH_RESULTS)/torch-handoff-latest.json

bench-report: $(if $(BENCH_REUSE),bench-deps,bench)
	$(BENCH_PYTHON) $(BENCH_MK_DIR)/report/report.py --results $(BENCH_RESULTS)/bench-latest.json \
	  --out $(BENCH_MK_ROOT)/docs/benchmarks.md --png-dir $(BENCH_MK_ROOT)/docs

bench-compare:
	$(BENCH_PYTHON) $(BENCH_MK_DIR)/report/compare.py $(BENCH_OLD) $(BENCH_NEW)

bench-clean:
	rm -rf $(BENCH_BUILD) $(BENCH_CONDVAR_BUILD) $(BENCH_BASELINE_BUILD)

# Included: leave the including makefile's default goal alone.
ifeq ($(BENCH_MK_STANDALONE),yes)
.DEFAULT_GOAL := bench-help
else
.DEFAULT_GOAL := $(BENCH_MK_SAVED_GOAL)
endif
