#!/bin/sh
# SPDX-License-Identifier: MIT
# python_version_test.sh REPO PYTHON STAMPS [BUILD]: the binding on one
# CPython, offline (make test-python PY=... runs it).
#
#   1. CMake builds the wheel's compiled part for PYTHON (KB_PYTHON_WHEEL:
#      kbthreads._accel with the library and libck.a linked in, the
#      project's warnings and -Werror) in BUILD (default REPO/build-py3.X),
#      only that target. No setuptools is involved: Debian's cannot serve
#      3.12 and later, and pyenv's CPythons have none.
#   2. The binding's whole pytest suite (bindings/python/tests, the oracle
#      traces included) runs with PYTHON on the package in the source tree,
#      against that module (KBTHREADS_ACCEL). An interpreter without its own
#      pytest gets Debian's (python3-pytest) through PYTHONPATH=
#      /usr/lib/python3/dist-packages, which holds no standard-library name;
#      its compiled modules (greenlet's) load only on the CPython they were
#      built for, and the tests needing them say they are skipped and why.
#      (On 3.10 that pytest needs python3-exceptiongroup; on 3.12 and later
#      its assertion rewriter's own DeprecationWarnings are silenced.)
#   3. STAMPS/3.X records the outcome, "pass" or "fail" and pytest's
#      summary line, for check_tested_versions.py.
set -eu
repo=$(cd "$1" && pwd)
python=$2
stamps=$3
ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
    || { echo "test-python: $python does not run"; exit 1; }
build=${4:-$repo/build-py$ver}
mkdir -p "$stamps"
rm -f "$stamps/$ver"
log="$build/test-python.log"
mkdir -p "$build"
echo "test-python: CPython $ver ($python): building kbthreads._accel in $build"
{ cmake -S "$repo" -B "$build" -DKB_PYTHON_WHEEL=ON -DKB_PYTHON3="$python" \
    && cmake --build "$build" -j 2 --target kbthreads_pyaccel; } >"$log" 2>&1 \
    || { tail -n 40 "$log"; echo "fail build" >"$stamps/$ver"; echo "test-python $ver: build failed"; exit 1; }
so=$(ls "$build"/bindings/python/kbthreads/_accel*.so)

pythonpath=""
"$python" -c 'import pytest' 2>/dev/null || pythonpath=/usr/lib/python3/dist-packages
status=0
(cd "$repo/bindings/python" && env KBTHREADS_ACCEL="$so" PYTHONPATH="$pythonpath" PYTHONDONTWRITEBYTECODE=1 \
    "$python" -m pytest -q -rs -p no:cacheprovider -W "ignore::DeprecationWarning:_pytest.assertion.rewrite" tests) >"$build/pytest.log" 2>&1 || status=$?
summary=$(tail -n 1 "$build/pytest.log" | sed 's/^=* *//; s/ *=*$//')
if [ "$status" -ne 0 ]; then
    tail -n 60 "$build/pytest.log"
    echo "fail $summary" >"$stamps/$ver"
    echo "test-python $ver: FAILED: $summary"
    exit 1
fi
grep '^SKIPPED' "$build/pytest.log" || true
echo "pass $summary" >"$stamps/$ver"
echo "test-python $ver: $summary"
