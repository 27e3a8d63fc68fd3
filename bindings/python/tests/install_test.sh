#!/bin/sh
# SPDX-License-Identifier: MIT
# install_test.sh REPO DEBIAN_PYTHON: the README's install commands for the
# Python package, run as printed (README.md, "## Python": the sh blocks
# after <!-- install: online -->, <!-- install: fetch --> and
# <!-- install: offline -->), each from a fresh venv, in a clean copy of
# the sources the package builds from (as a fresh clone has them):
#
#   1. offline: the fetch block (a venv's pip downloads the build backend,
#      scikit-build-core, and what it needs into wheels/, from the index),
#      then the offline block (pip's build environment takes the backend
#      from wheels/; CMake and Ninja are the system's) with Debian's
#      interpreter first on PATH as `python3` and pip kept off every package
#      index (PIP_NO_INDEX);
#   2. online: the block (`python3 -m venv venv && venv/bin/pip install
#      ./bindings/python`, pip's build isolation fetching scikit-build-core
#      from the index) once for each python3 a user may have first on
#      PATH: the caller's, pyenv's (when pyenv is installed) and
#      DEBIAN_PYTHON, each put first on PATH as `python3`.
#
# PATH is the system's (/usr/bin:/bin) behind that python3: the builds use
# Debian's CMake and Ninja. Each install must print the four ranks of the
# block's spawn, import kbthreads from its venv, on that interpreter's
# version, and install the kbthreads-dump, kbthreads-explore and
# kbthreads-torchrun commands.
# Exit 77 (skipped, saying why) when a build requirement is missing, or
# when no package index answers: both ways need one, the offline one once
# for its wheels/ (python_package builds offline with the test venv's
# backend instead).
set -eu
repo=$(cd "$1" && pwd)
debian_python=$2

missing=""
for tool in gcc cmake pkg-config; do [ -x /usr/bin/$tool ] || missing="$missing $tool"; done
[ -x /usr/bin/ninja ] || missing="$missing ninja-build"
"$debian_python" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || missing="$missing python3-dev"
for mod in venv:python3-venv ensurepip:python3-venv; do
    "$debian_python" -c "import ${mod%%:*}" 2>/dev/null || missing="$missing ${mod#*:}"
done
[ -n "$(find /usr/lib /usr/local/lib -name libck.a 2>/dev/null | head -n 1)" ] || missing="$missing libck-dev"
if [ -n "$missing" ]; then
    echo "python_install skipped: missing Debian packages:$missing"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }

# block NAME: the lines of the sh block after <!-- install: NAME --> in the README.
block() {
    awk -v m="<!-- install: $1 -->" '
        $0 == m { found = 1; next }
        found && /^```sh$/ { inside = 1; next }
        inside && /^```$/ { exit }
        inside { print }' "$repo/README.md"
}
for b in online fetch offline; do
    block $b >"$tmp/$b.sh"
    [ -s "$tmp/$b.sh" ] || fail "README.md has no sh block after <!-- install: $b -->"
    echo "README.md, install ($b):"; sed 's/^/    /' "$tmp/$b.sh"
done

# The sources as a clone has them (no build output).
mkdir "$tmp/clone"
(cd "$repo" && tar cf - --exclude=build --exclude='*.so' \
    --exclude=__pycache__ bindings/python CMakeLists.txt cmake src include gdb tools LICENSE licenses README.md) \
    | (cd "$tmp/clone" && tar xf -)

# run NAME PYTHON [ENV...]: the block run in the clone, from a fresh venv,
# with PYTHON first on PATH as python3 and no KBTHREADS_*, PYTHONPATH or
# venv of the caller's; its output in $log.
run() {
    name=$1 py=$2; shift 2
    rm -rf "$tmp/clone/venv" "$tmp/bin"
    mkdir "$tmp/bin"
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$py" >"$tmp/bin/python3"
    chmod +x "$tmp/bin/python3"
    log="$tmp/$name.log"
    (cd "$tmp/clone" && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV -u LD_LIBRARY_PATH \
        -u KBTHREADS_LIBRARY -u KBTHREADS_ACCEL HOME="$tmp" PATH="$tmp/bin:/usr/bin:/bin" "$@" \
        sh -eu "$tmp/$name.sh") >"$log" 2>&1 \
        || { tail -n 40 "$log"; fail "$name block with $py failed"; }
}

# install NAME PYTHON [ENV...]: run, then the install's venv checked.
install() {
    name=$1 py=$2
    ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    run "$@"
    for r in 0 1 2 3; do
        grep -qx "rank $r" "$log" || { tail -n 40 "$log"; fail "$name install with $py: no 'rank $r' printed"; }
    done
    got=$(cd "$tmp" && env -u PYTHONPATH "$tmp/clone/venv/bin/python" -c \
        'import sys, kbthreads; print("%d.%d" % sys.version_info[:2], kbthreads.__file__)')
    case "$got" in
        "$ver $tmp/clone/venv/"*) ;;
        *) fail "$name install with $py: kbthreads imports as '$got', not from the venv on $ver" ;;
    esac
    for cmd in kbthreads-dump kbthreads-explore; do
        "$tmp/clone/venv/bin/$cmd" --help >/dev/null 2>&1 || fail "$name install with $py: $cmd --help failed"
    done
    # (kbthreads-torchrun needs PyTorch, which these venvs do not have: installed is all that is asked here)
    [ -x "$tmp/clone/venv/bin/kbthreads-torchrun" ] || fail "$name install with $py: no kbthreads-torchrun"
    echo "$name install with $py (CPython $ver): ok"
}

# An index must answer (the fetch block and pip's build isolation fetch
# scikit-build-core from it).
"$debian_python" -m venv "$tmp/probe"
if ! (cd "$tmp" && HOME="$tmp" "$tmp/probe/bin/python" -m pip download -q --no-deps -d "$tmp/probe-dl" scikit-build-core) \
        >"$tmp/probe.log" 2>&1; then
    tail -n 20 "$tmp/probe.log"
    echo "python_install skipped: no package index answers (python_package builds offline; these installs are not tested)"
    exit 77
fi

# 1. offline, Debian's interpreter: the backend's wheels fetched once, then
# no index
run fetch "$debian_python"
ls "$tmp"/clone/wheels/scikit_build_core-*.whl >/dev/null 2>&1 || { cat "$log"; fail "the fetch block put no scikit-build-core in wheels/"; }
install offline "$debian_python" PIP_NO_INDEX=1

# 2. online, with every python3 a user may have first on PATH
pythons=""
add_python() { # the interpreter itself (not a shim), once; CPython from 3.10 up
    real=$("$1" -c 'import sys; assert sys.version_info >= (3, 10); print(sys.executable)' 2>/dev/null) || return 0
    case " $pythons " in *" $real "*) ;; *) pythons="$pythons $real" ;; esac
}
command -v python3 >/dev/null 2>&1 && add_python "$(command -v python3)"
command -v pyenv >/dev/null 2>&1 && pyenv_python=$(pyenv which python3 2>/dev/null) && add_python "$pyenv_python"
add_python "$debian_python"
echo "python3 interpreters to install with:$pythons"
for py in $pythons; do
    install online "$py"
done
echo "python_install: ok"
