# SPDX-License-Identifier: MIT
# The binding on every supported CPython, and its packages' typing and lint
# (included by the top Makefile).
#
# make test-python PY=/path/to/python3.X: kbthreads._accel built by CMake
#   for that interpreter, offline (build-py3.X/, that target only), and the
#   binding's whole pytest suite run with it (tests/python_version_test.sh);
#   the outcome is stamped in $(PY_STAMPS)/3.X.
# make test-pythons (part of make test): test-python for every CPython
#   found from requires-python's floor up (tests/find_pythons.sh: python3.X
#   on PATH, then pyenv's), one per version; then the declared versions
#   (requires-python, the classifiers) must all have passed
#   (tests/check_tested_versions.py).
#
# make lint-python (part of make test): the packages kbthreads and
# kbthreads_tools held to the test venv's pinned checkers
# (requirements-test.txt): mypy --strict (mypy.ini: the compiled part
# through its stub, kbthreads/_accel.pyi; kbthreads.torch against the venv's
# PyTorch), ruff check and ruff format --check (ruff.toml). Their caches go
# in $(BUILD).
PY ?= python3
PY_STAMPS ?= $(BUILD)/python-versions
PY_DIR := bindings/python
PY_FLOOR := $(shell sed -n 's/^requires-python = ">=\(3\.[0-9]*\)"/\1/p' $(PY_DIR)/pyproject.toml)
PY_LINT_PATHS := $(PY_DIR)/kbthreads tools/kbthreads_tools

.PHONY: test-python test-pythons lint-python

test-python: deps
	sh $(PY_DIR)/tests/python_version_test.sh . "$(PY)" $(PY_STAMPS)

test-pythons: deps
	@rm -rf $(PY_STAMPS)
	@pythons=$$(sh $(PY_DIR)/tests/find_pythons.sh $(PY_FLOOR)); \
	echo "test-pythons: CPython from $(PY_FLOOR) up found:" $$pythons; \
	status=0; \
	for py in $$pythons; do \
	  sh $(PY_DIR)/tests/python_version_test.sh . $$py $(PY_STAMPS) || status=1; \
	done; \
	echo "test-pythons: versions run and their results:"; \
	/usr/bin/python3 $(PY_DIR)/tests/check_tested_versions.py $(PY_DIR)/pyproject.toml $(PY_STAMPS) || status=1; \
	exit $$status

lint-python: venv
	$(VENV)/bin/python -m mypy --strict --cache-dir $(BUILD)/mypy-cache $(PY_LINT_PATHS)
	$(VENV)/bin/python -m ruff check --cache-dir $(BUILD)/ruff-cache $(PY_LINT_PATHS)
	$(VENV)/bin/python -m ruff format --check --cache-dir $(BUILD)/ruff-cache $(PY_LINT_PATHS)
