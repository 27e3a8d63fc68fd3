#!/bin/sh
# SPDX-License-Identifier: MIT
# python_version_test.sh REPO PYTHON STAMPS [BUILD]: the binding on one
# CPython (make test-python PY=... runs it).
#
#   1. CMake builds the wheel's compiled part for PYTHON (KB_PYTHON_WHEEL:
#      kbthreads._accel with the library and libck.a linked in, the
#      project's warnings and -Werror) in BUILD (default REPO/build-py3.X),
#      only that target. No setuptools is involved: Debian's cannot serve
#      3.12 and later, and pyenv's CPythons have none.
#   2. A venv of PYTHON's, BUILD/venv, holds what the suite needs on every
#      version (bindings/python/requirements-pythons.txt: pytest, greenlet,
#      hypothesis, numpy, py-spy), installed from the package index when it is
#      made or when that file changes ($VENV_PIP_ARGS: extra pip options).
#      Nothing comes from another interpreter's site-packages: Debian's
#      pytest on 3.10 needed tomli and exceptiongroup, which only a machine
#      where someone had installed them by hand had.
#   3. The binding's whole pytest suite (bindings/python/tests, the oracle
#      traces included) runs with the venv's python on the package in the
#      source tree, against that module (KBTHREADS_ACCEL). The tests needing
#      what is not on this version (PyTorch: it is tested in make test's
#      venv, on 3.11) say they are skipped and why. (On 3.12 and later the
#      assertion rewriter's own DeprecationWarnings are silenced.)
#   4. STAMPS/3.X records the outcome, "pass" or "fail" and pytest's
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

# The venv: made again when the requirements differ from its stamp.
venv="$build/venv"
reqs="$repo/bindings/python/requirements-pythons.txt"
if ! cmp -s "$reqs" "$venv/requirements-pythons.txt" 2>/dev/null; then
    echo "test-python: CPython $ver: installing $(grep -v '^#' "$reqs" | tr '\n' ' ')into $venv"
    { "$python" -m venv --clear "$venv" \
        && "$venv/bin/python" -m pip install -q --disable-pip-version-check ${VENV_PIP_ARGS:-} -r "$reqs"; } \
        >"$build/venv.log" 2>&1 \
        || { tail -n 40 "$build/venv.log"; echo "fail venv" >"$stamps/$ver"; echo "test-python $ver: venv failed"; exit 1; }
    cp "$reqs" "$venv/requirements-pythons.txt"
fi
status=0
(cd "$repo/bindings/python" && env -u PYTHONPATH KBTHREADS_ACCEL="$so" PYTHONDONTWRITEBYTECODE=1 \
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider -W "ignore::DeprecationWarning:_pytest.assertion.rewrite" tests) >"$build/pytest.log" 2>&1 || status=$?
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
