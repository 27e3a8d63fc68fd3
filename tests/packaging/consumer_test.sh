#!/bin/sh
# SPDX-License-Identifier: MIT
# Build and run the consumer programs against libkbthreads three ways:
#   install  -> pkg-config (C, C++ and the C++ layer, shared; C static)
#   install  -> find_package(kbthreads) (C, C++, the C++ layer, and C static)
#   add_subdirectory of the source tree
# usage: consumer_test.sh MODE SOURCE_DIR BUILD_DIR   (MODE: pkgconfig|package|subdirectory)
set -eu
mode=$1 src=$2 build=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

install_tree() {
    cmake --install "$build" --prefix "$prefix" >/dev/null
    pc=$(find "$prefix" -name kbthreads.pc)
    [ -n "$pc" ] || { echo "no kbthreads.pc installed"; exit 1; }
    for f in include/kbthreads.h include/kbthreads.hpp; do [ -f "$prefix/$f" ] || { echo "missing $f"; exit 1; }; done
    ls "$prefix"/lib*/libkbthreads.so.0 "$prefix"/lib*/*/libkbthreads.so.0 2>/dev/null | grep -q . \
        || { echo "no libkbthreads.so.0 (SONAME link) installed"; exit 1; }
    find "$prefix/share/gdb/auto-load" -name 'libkbthreads.so.*-gdb.py' | grep -q . \
        || { echo "no gdb auto-load script installed"; exit 1; }
    # the installed dump command finds its layout module (this shell has no libkbthreads)
    "$prefix/bin/kbthreads-dump" $$ 2>&1 | grep -q "does not use libkbthreads" \
        || { echo "the installed kbthreads-dump does not run"; exit 1; }
    # the installed Python package (when the build made its compiled part:
    # python3-dev) loads the installed library through that part's RPATH,
    # with no variables set
    if [ -x /usr/bin/python3 ] && [ -n "$(find "$build/bindings/python" -name '_accel*.so' 2>/dev/null)" ]; then
        site=$(dirname "$(find "$prefix" -path '*/kbthreads/__init__.py' | head -n 1)")
        got=$(cd "$tmp" && env -u KBTHREADS_LIBRARY -u KBTHREADS_ACCEL -u LD_LIBRARY_PATH \
              PYTHONPATH="$(dirname "$site")" /usr/bin/python3 -c \
              'import kbthreads; kbthreads.spawn(lambda r: kbthreads.yield_(), nprocs=2)
print([p for p in open("/proc/self/maps").read().split() if "libkbthreads.so" in p][0])')
        case "$got" in "$prefix"/*) ;; *) echo "installed kbthreads: loaded '$got', not $prefix's library"; exit 1 ;; esac
    fi
    "$prefix/bin/kbthreads-explore" --help | grep -q -- --compare-output \
        || { echo "no runnable kbthreads-explore installed"; exit 1; }
}

case "$mode" in
pkgconfig)
    install_tree
    export PKG_CONFIG_PATH=$(dirname "$pc")
    libdir=$(pkg-config --variable=libdir kbthreads)
    [ "$(pkg-config --modversion kbthreads)" = "$(sed -n 's/^#define KB_VERSION_STRING "\([0-9.]*\)".*/\1/p' "$src/include/kbthreads.h")" ] \
        || { echo "pkg-config version differs from the header"; exit 1; }
    cc -std=c11 -Wall -Wextra -Werror "$here/consumer/consumer.c" -o "$tmp/c" \
        $(pkg-config --cflags --libs kbthreads) -Wl,-rpath,"$libdir"
    for prog in consumer consumer_hpp; do
        c++ -std=c++17 -Wall -Wextra -Werror "$here/consumer/$prog.cpp" -o "$tmp/$prog" \
            $(pkg-config --cflags --libs kbthreads) -Wl,-rpath,"$libdir"
    done
    cc -std=c11 -Wall -Wextra -Werror "$here/consumer/consumer.c" -o "$tmp/c_static" \
        $(pkg-config --cflags kbthreads) "$libdir/libkbthreads.a" $(pkg-config --static --libs-only-l --libs-only-other kbthreads | sed 's/-lkbthreads//')
    "$tmp/c" && "$tmp/consumer" && "$tmp/consumer_hpp" && "$tmp/c_static"
    ;;
package)
    install_tree
    cmake -S "$here/consumer" -B "$tmp/b" -DKB_MODE=package -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
    cmake --build "$tmp/b" >/dev/null
    "$tmp/b/consumer_c" && "$tmp/b/consumer_cxx" && "$tmp/b/consumer_hpp" && "$tmp/b/consumer_c_static"
    ;;
subdirectory)
    cmake -S "$here/consumer" -B "$tmp/b" -DKB_MODE=subdirectory -DKB_SOURCE_DIR="$src" >/dev/null
    cmake --build "$tmp/b" >/dev/null
    "$tmp/b/consumer_c" && "$tmp/b/consumer_cxx" && "$tmp/b/consumer_hpp"
    ;;
*)
    echo "unknown mode $mode"; exit 2 ;;
esac
echo "ok: consumer via $mode"
