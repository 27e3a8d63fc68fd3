#!/bin/sh
# Build and run the consumer programs against libkbthreads three ways:
#   install  -> pkg-config (C and C++, shared; C static)
#   install  -> find_package(kbthreads) (C, C++, and C static)
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
    for f in include/kbthreads.h; do [ -f "$prefix/$f" ] || { echo "missing $f"; exit 1; }; done
    ls "$prefix"/lib*/libkbthreads.so.0 "$prefix"/lib*/*/libkbthreads.so.0 2>/dev/null | grep -q . \
        || { echo "no libkbthreads.so.0 (SONAME link) installed"; exit 1; }
    find "$prefix/share/gdb/auto-load" -name 'libkbthreads.so.*-gdb.py' | grep -q . \
        || { echo "no gdb auto-load script installed"; exit 1; }
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
    c++ -std=c++17 -Wall -Wextra -Werror "$here/consumer/consumer.cpp" -o "$tmp/cxx" \
        $(pkg-config --cflags --libs kbthreads) -Wl,-rpath,"$libdir"
    cc -std=c11 -Wall -Wextra -Werror "$here/consumer/consumer.c" -o "$tmp/c_static" \
        $(pkg-config --cflags kbthreads) "$libdir/libkbthreads.a" $(pkg-config --static --libs-only-l --libs-only-other kbthreads | sed 's/-lkbthreads//')
    "$tmp/c" && "$tmp/cxx" && "$tmp/c_static"
    ;;
package)
    install_tree
    cmake -S "$here/consumer" -B "$tmp/b" -DKB_MODE=package -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
    cmake --build "$tmp/b" >/dev/null
    "$tmp/b/consumer_c" && "$tmp/b/consumer_cxx" && "$tmp/b/consumer_c_static"
    ;;
subdirectory)
    cmake -S "$here/consumer" -B "$tmp/b" -DKB_MODE=subdirectory -DKB_SOURCE_DIR="$src" >/dev/null
    cmake --build "$tmp/b" >/dev/null
    "$tmp/b/consumer_c" && "$tmp/b/consumer_cxx"
    ;;
*)
    echo "unknown mode $mode"; exit 2 ;;
esac
echo "ok: consumer via $mode"
