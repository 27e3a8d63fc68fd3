#!/bin/sh
# SPDX-License-Identifier: MIT
# package_test.sh REPO PYTHON [TEST_PYTHON]: the Python package as a user
# gets it, offline. The builds run with TEST_PYTHON (make test: the test
# venv's python, the same CPython as PYTHON), which has the build backend,
# scikit-build-core, and build (requirements-test.txt), with their
# isolation off: nothing is fetched.
#
#   1. A clean copy of what the package is built from (bindings/python,
#      the project's CMakeLists.txt, cmake/, src/, include/, gdb/, tools/
#      and the licenses; no build output; examples/ too, which some tests
#      run) builds with `python -m build --no-isolation`: the sdist, then a
#      wheel from the unpacked sdist. The sdist is a slice of the repository
#      (pyproject.toml's [tool.scikit-build]): what CMake's KB_PYTHON_WHEEL
#      build reads, at the repository's paths, and no build output. Both
#      carry LICENSE and Concurrency Kit's notice (libck.a is linked into
#      the module), and the wheel the compiled part with the library in it.
#   1a. The sdist, unpacked alone in an empty folder, builds a wheel with
#      `pip wheel --no-build-isolation --no-index`: it builds on its own,
#      and gives the same files as the wheel of step 1.
#   1b. `pip wheel` of the copy's bindings/python, in place, leaves nothing
#      in that tree (every path listed before and after), so nothing left
#      there can be taken for an installed package; the tree's package then
#      imports with the wheel's module (KBTHREADS_ACCEL). (The suite itself
#      runs against the installed wheel in step 2, not twice against one
#      library.)
#   2. The wheel installs into a fresh venv made by PYTHON
#      (--system-site-packages: pytest and greenlet come from Debian; with
#      TEST_PYTHON, that venv's packages come first: PyTorch, numpy, pytest,
#      greenlet, ..., and its commands are linked beside this venv's
#      python, so the suite's tests of them run here too), and the
#      binding's pytest suite, the oracle traces included, runs against the
#      installed package (a copy of tests/ and the examples away from the
#      source tree), with no KBTHREADS_* variable and no libkbthreads on the
#      loader's path. kbthreads.torch's files are left to the build's ctest
#      (python_torch: Python above the binding, whose suite runs here); here
#      every kbthreads.torch module imports from the package and
#      kbthreads-torchrun runs a script (step 3).
#   3. gdb's `kb ranks` (the script the package's module embeds, through the
#      debug info and, on a copy stripped of it, through the debug
#      descriptor) and the kbthreads-dump console script find the ranks of a
#      Python process running the installed package.
#
# Exit 77 (skipped, saying why) when a build requirement is missing
# (Debian: cmake ninja-build pkg-config gcc python3-dev libck-dev
# python3-venv python3-pytest gdb, which `make deps` installs; and, for
# TEST_PYTHON, scikit-build-core and build, which `make venv` installs).
set -eu
repo=$(cd "$1" && pwd)
python=$2
test_python=${3:-$python}

missing=""
command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
command -v gdb >/dev/null 2>&1 || missing="$missing gdb"
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
# (scikit-build-core builds with Ninja, and asks for its wheel when there is none)
command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
"$python" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || missing="$missing python3-dev"
for mod in venv:python3-venv ensurepip:python3-venv; do
    "$python" -c "import ${mod%%:*}" 2>/dev/null || missing="$missing ${mod#*:}"
done
"$test_python" -c "import pytest" 2>/dev/null || missing="$missing python3-pytest"
[ -n "$(find /usr/lib /usr/local/lib -name libck.a 2>/dev/null | head -n 1)" ] || missing="$missing libck-dev"
if [ -n "$missing" ]; then
    echo "python_package skipped: missing Debian packages:$missing"
    exit 77
fi
for mod in scikit_build_core build; do
    "$test_python" -c "import $mod" 2>/dev/null || missing="$missing $mod"
done
if [ -n "$missing" ]; then
    echo "python_package skipped: not installed for $test_python:$missing (make venv installs them)"
    exit 77
fi

tmp=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }

# 1. clean copy, sdist, wheel from the sdist
mkdir -p "$tmp/copy"
(cd "$repo" && tar cf - --exclude=build --exclude='*.so' \
    --exclude=__pycache__ bindings/python CMakeLists.txt cmake src include gdb tools LICENSE licenses examples) \
    | (cd "$tmp/copy" && tar xf -)
"$test_python" -m build --no-isolation --outdir "$tmp/dist" "$tmp/copy/bindings/python" >"$tmp/build.log" 2>&1 \
    || { tail -n 40 "$tmp/build.log"; fail "python -m build --no-isolation failed"; }
sdist=$(ls "$tmp"/dist/kbthreads-*.tar.gz) || fail "no sdist built"
wheel=$(ls "$tmp"/dist/kbthreads-*.whl) || fail "no wheel built"
tar tzf "$sdist" >"$tmp/sdist.list"
zipnames() { "$python" -c 'import sys, zipfile; print("\n".join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))' "$1"; }
zipnames "$wheel" >"$tmp/wheel.list"
for want in pyproject.toml PKG-INFO README.md CMakeLists.txt cmake/install.cmake src/kbthreads.map include/kbthreads.h \
            gdb/kbthreads_gdb.py gdb/embed_gdb_script.cmake tools/kbthreads_tools/dump.py \
            bindings/python/CMakeLists.txt bindings/python/kbthreads/_accel.c bindings/python/kbthreads/__init__.py \
            LICENSE licenses/ConcurrencyKit-BSD-2-Clause.txt; do
    grep -qx "kbthreads-[^/]*/$want" "$tmp/sdist.list" || { cat "$tmp/sdist.list"; fail "the sdist has no $want"; }
done
! grep -E '\.(so|o|a|pyc)$|__pycache__|/tests/|/build/' "$tmp/sdist.list" || fail "the sdist holds the build output or tests above"
for want in '\.dist-info/.*LICENSE$' '\.dist-info/.*ConcurrencyKit-BSD-2-Clause.txt$' '^kbthreads/_accel\..*\.so$' \
            '^kbthreads/py\.typed$' '^kbthreads_tools/kbthreads_gdb\.py$'; do
    grep -q "$want" "$tmp/wheel.list" || { cat "$tmp/wheel.list"; fail "the wheel has no $want"; }
done
! grep -E '\.(c|h)$' "$tmp/wheel.list" || fail "the wheel holds the C sources above"
echo "built $(basename "$sdist") and, from it, $(basename "$wheel"); both carry LICENSE and Concurrency Kit's notice"

# 1a. the sdist alone, unpacked where nothing of the repository is near it
mkdir -p "$tmp/alone/src"
tar xzf "$sdist" -C "$tmp/alone/src"
(cd "$tmp/alone" && "$test_python" -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$tmp/alone/dist" \
    "$tmp"/alone/src/kbthreads-*) >"$tmp/alone.log" 2>&1 \
    || { tail -n 40 "$tmp/alone.log"; fail "pip wheel --no-build-isolation of the unpacked sdist failed"; }
zipnames "$(ls "$tmp"/alone/dist/kbthreads-*.whl)" >"$tmp/alone.list"
diff "$tmp/wheel.list" "$tmp/alone.list" || fail "the unpacked sdist's wheel holds other files than python -m build's"
echo "the unpacked sdist alone built the same wheel offline"

# 1b. a wheel built in the tree leaves nothing there that fools the tree's suite
(cd "$tmp/copy" && find . | sort) >"$tmp/before.list"
"$test_python" -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$tmp/intree" "$tmp/copy/bindings/python" \
    >"$tmp/intree.log" 2>&1 || { tail -n 40 "$tmp/intree.log"; fail "pip wheel of the tree failed"; }
(cd "$tmp/copy" && find . | sort) >"$tmp/after.list"
diff "$tmp/before.list" "$tmp/after.list" || fail "pip wheel left the files above in the tree"
"$python" -m zipfile -e "$(ls "$tmp"/intree/kbthreads-*.whl)" "$tmp/intree/unpacked"
accel=$(ls "$tmp"/intree/unpacked/kbthreads/_accel*.so)
from_tree=$(cd "$tmp/copy/bindings/python" && env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONDONTWRITEBYTECODE=1 \
    KBTHREADS_ACCEL="$accel" "$test_python" -c \
    'import kbthreads; from kbthreads._loader import accel; kbthreads.Context(); print(kbthreads.__file__, accel.__file__)') \
    || fail "the tree's package does not import after pip wheel"
case "$from_tree" in "$tmp/copy/bindings/python/kbthreads/"*" $accel") ;;
    *) fail "after pip wheel the tree's package and module were: $from_tree" ;; esac
echo "pip wheel in the tree left it as it was; the tree's package imports with the wheel's module"

# 2. a fresh venv, the wheel, the suite against the installed package
"$python" -m venv --system-site-packages "$tmp/venv"
venv="$tmp/venv/bin"
if [ "$test_python" != "$python" ]; then
    # The test venv's site-packages after this venv's own (which gets the
    # wheel), before Debian's.
    site=$("$venv/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$test_python" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"])' \
        | sort -u >"$site/kb-test-requirements.pth"
    "$venv/python" -c 'import torch, numpy, greenlet, pytest' \
        || fail "the test venv's packages ($test_python) do not import in the package's venv"
    # and its commands (py-spy, ...) beside this venv's python, where the
    # tests look for them
    for cmd in "$(dirname "$test_python")"/*; do
        [ -e "$venv/$(basename "$cmd")" ] || ln -s "$cmd" "$venv/$(basename "$cmd")"
    done
fi
"$venv/python" -m pip install -q --no-index --no-deps "$wheel" >"$tmp/pip.log" 2>&1 \
    || { cat "$tmp/pip.log"; fail "pip install of the wheel failed"; }
# (laid out as in the repository, the tests beside the binding's examples
# and below the project's, which some run; no kbthreads/, include/ or tools/
# there: the suite imports the installed package)
suite="$tmp/suite/bindings/python/tests"
mkdir -p "$tmp/suite/bindings/python"
cp -r "$repo/bindings/python/tests" "$repo/bindings/python/examples" "$tmp/suite/bindings/python/"
cp -r "$repo/examples" "$tmp/suite/"
rm -rf "$suite/__pycache__"
# Nothing from the caller's environment: no KBTHREADS_*, no LD_LIBRARY_PATH, no PYTHONPATH.
run() { env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONDONTWRITEBYTECODE=1 "$@"; }
(cd "$tmp" && run "$venv/python" -m pytest -q -rs -p no:cacheprovider --ignore-glob="$suite/test_torch_*.py" "$suite") \
    >"$tmp/pytest.log" 2>&1 || { tail -n 60 "$tmp/pytest.log"; fail "the pytest suite failed against the installed package"; }
tail -n 1 "$tmp/pytest.log"
! grep -q "SKIPPED.*test_package.py" "$tmp/pytest.log" || { cat "$tmp/pytest.log"; fail "the metadata tests were skipped"; }
installed=$(cd "$tmp" && run "$venv/python" -c 'import kbthreads; print(kbthreads.__file__)')
case "$installed" in "$tmp/venv/"*) ;; *) fail "the suite imported kbthreads from $installed, not the venv" ;; esac

# 3. gdb and kbthreads-dump on a Python process running the installed package
cat >"$tmp/ranks.py" <<'EOF'
import sys, time
import kbthreads

def rank_main(r):
    if r == 0:
        open(sys.argv[1], "w").close()
        time.sleep(300)  # holds the baton while gdb and kbthreads-dump look
    kbthreads.yield_()

kbthreads.spawn(rank_main, nprocs=3)
EOF
start_ranks() {
    rm -f "$tmp/ready"
    # (env execs python: $! is the target's PID)
    env -i PATH=/usr/bin:/bin HOME="$tmp" PYTHONDONTWRITEBYTECODE=1 "$venv/python" "$tmp/ranks.py" "$tmp/ready" &
    pid=$!
    i=0
    while [ ! -e "$tmp/ready" ]; do
        i=$((i + 1)); [ $i -lt 300 ] || fail "the Python target never started its ranks"
        sleep 0.1
    done
}
stop_ranks() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
check_ranks() { # what output
    for want in "kb-rank-0" "kb-rank-1" "kb-rank-2" "running" "not started"; do
        printf '%s\n' "$2" | grep -q -- "$want" || { printf '%s\n' "$2"; fail "$1: no '$want'"; }
    done
}
gdb_ranks() {
    gdb -nx -batch -iex "set auto-load safe-path /" -iex "set debuginfod enabled off" -p "$pid" \
        -ex "kb ranks" 2>&1
}

start_ranks
check_ranks "gdb kb ranks (the embedded script, debug info)" "$(gdb_ranks)"
out=$(run "$venv/kbthreads-dump" "$pid" 2>&1) || { printf '%s\n' "$out"; fail "kbthreads-dump failed"; }
check_ranks "kbthreads-dump" "$out"
stop_ranks

# The debug descriptor: the module without its debug info (the embedded
# script kept, as a distribution's strip would not keep it: its auto-load
# copy is not part of a wheel).
so=$(ls "$tmp"/venv/lib/python3*/site-packages/kbthreads/_accel*.so)
objcopy --strip-debug --keep-section=.debug_gdb_scripts "$so" "$so.stripped" && mv "$so.stripped" "$so"
start_ranks
check_ranks "gdb kb ranks (the debug descriptor)" "$(gdb_ranks)"
stop_ranks

run "$venv/kbthreads-explore" --help >/dev/null || fail "kbthreads-explore --help failed"
# every kbthreads.torch module, and kbthreads-torchrun (needs PyTorch: the
# test venv's, when there is one)
if (cd "$tmp" && run "$venv/python" -c 'import torch') 2>/dev/null; then
    want=$(cd "$repo/bindings/python/kbthreads/torch" && ls *.py | sed 's/\.py$//' | grep -v '^__init__$' | LC_ALL=C sort)
    got=$(cd "$tmp" && run "$venv/python" -c '
import importlib, pkgutil, kbthreads.torch as t
assert t.__file__.startswith("'"$tmp"'/venv/"), t.__file__
for m in sorted(i.name for i in pkgutil.iter_modules(t.__path__)):
    importlib.import_module("kbthreads.torch." + m)
    print(m)') || fail "a kbthreads.torch module does not import from the installed package"
    [ "$want" = "$got" ] || { printf 'source:\n%s\ninstalled:\n%s\n' "$want" "$got"; fail "the package's kbthreads.torch modules differ"; }
    out=$(cd "$tmp" && run "$venv/kbthreads-torchrun" --nproc-per-node 2 "$tmp/suite/examples/torchrun_train.py" \
        --steps 1 2>&1) || { printf '%s\n' "$out"; fail "kbthreads-torchrun of examples/torchrun_train.py failed"; }
    printf '%s\n' "$out" | grep -q "^rank 1 (local rank 1) of 2: " \
        || { printf '%s\n' "$out"; fail "kbthreads-torchrun: no line from rank 1"; }
fi
echo "python_package: ok"
