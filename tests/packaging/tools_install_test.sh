#!/bin/sh
# SPDX-License-Identifier: MIT
# The installed tools run from the installed layout: `cmake --install` into
# a temporary prefix, then <prefix>/bin/kbthreads-explore --help and
# <prefix>/bin/kbthreads-dump --help exit 0, with nothing of the source tree
# on Python's path (the launchers find <prefix>/share/kbthreads/kbthreads_tools
# relative to themselves), and the dump finds its layout module there.
# usage: tools_install_test.sh BUILD_DIR
set -eu
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/kbthreads-explore bin/kbthreads-dump share/kbthreads/kbthreads_tools/elf.py \
         share/kbthreads/kbthreads_tools/explore/cli.py share/kbthreads/kbthreads_gdb.py; do
    [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
cd "$tmp"
for tool in kbthreads-explore kbthreads-dump; do
    env -u PYTHONPATH "$prefix/bin/$tool" --help >"$tmp/$tool.out" 2>&1 \
        || { echo "$prefix/bin/$tool --help failed:"; cat "$tmp/$tool.out"; exit 1; }
    grep -q "^usage: $tool" "$tmp/$tool.out" || { echo "$tool --help printed:"; cat "$tmp/$tool.out"; exit 1; }
done
# a process without the library: the dump got as far as reading its maps,
# so it found the package and kbthreads_gdb.py in the prefix
env -u PYTHONPATH "$prefix/bin/kbthreads-dump" $$ 2>&1 | grep -q "does not use libkbthreads" \
    || { echo "the installed kbthreads-dump does not run"; exit 1; }
# kbthreads-torchrun, installed with the binding's compiled part (the build
# wrote it from tools/kbthreads-torchrun.in): it finds the installed kbthreads
# package relative to itself, and runs with PyTorch 2.x; an interpreter
# without it gets the package's own message saying so.
if [ -e "$build/kbthreads-torchrun" ]; then
    [ -x "$prefix/bin/kbthreads-torchrun" ] || { echo "not installed: bin/kbthreads-torchrun"; exit 1; }
    env -u PYTHONPATH -u KBTHREADS_LIBRARY -u KBTHREADS_ACCEL "$prefix/bin/kbthreads-torchrun" --help \
        >"$tmp/torchrun.out" 2>&1 || true
    grep -q -e "^usage: kbthreads-torchrun" -e "kbthreads.torch needs PyTorch" "$tmp/torchrun.out" \
        || { echo "kbthreads-torchrun --help printed:"; cat "$tmp/torchrun.out"; exit 1; }
fi
echo "ok: the installed kbthreads-explore and kbthreads-dump run from $prefix"
