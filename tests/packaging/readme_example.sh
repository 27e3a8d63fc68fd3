#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's examples (C under '## Usage', C++ under '## C++') build with
# exactly the lines the README prints and run, with no loader variables set:
# the in-tree lines in a directory laid out like the source tree after
# `make build` (include/, build/src/), the installed ones against a fresh
# install found through pkg-config.
# usage: readme_example.sh README.md SOURCE_DIR BUILD_DIR path/to/libkbthreads.so
set -eu
readme=$1 src=$2 build=$3 lib=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH LD_PRELOAD

# section TITLE LANG: the first LANG block of section TITLE; section TITLE sh:
# every line of its sh blocks.
section() {
    awk -v t="## $1" -v lang="$2" '
        $0 == t { u = 1; next }
        u && /^## / { exit }
        u && $0 == "```" lang { c = 1; next }
        c && /^```$/ { c = 0; if (lang != "sh") exit; next }
        c { print }' "$readme"
}

tree=$tmp/tree
mkdir -p "$tree/build"
ln -s "$src/include" "$tree/include"
ln -s "$(dirname "$lib")" "$tree/build/src"
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$tmp/prefix" -name kbthreads.pc)")

# run TITLE FILE LANG: every printed build line of the section, in a fresh
# copy of the tree with the example saved as FILE; its outputs in $tmp/out.N.
run() {
    section "$1" "$3" > "$tmp/$2"
    [ -s "$tmp/$2" ] || { echo "no $3 example under '## $1'"; exit 1; }
    section "$1" sh > "$tmp/lines"
    [ "$(grep -c . "$tmp/lines")" -eq 2 ] || { echo "expected 2 build lines under '## $1'"; exit 1; }
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        cp "$tmp/$2" "$tree/$2"
        echo "\$ $line"
        rc=0
        (cd "$tree" && exec sh -c "$line") < /dev/null > "$tmp/out.$n" 2> "$tmp/err.$n" || rc=$?
        echo $rc > "$tmp/rc.$n"
        rm -f "$tree/demo" "$tree/demo_cpp"
    done < "$tmp/lines"
}
# expect N RC LINES: run N exited with RC and printed LINES lines.
expect() {
    [ "$(cat "$tmp/rc.$1")" = "$2" ] && [ "$(wc -l < "$tmp/out.$1")" -eq "$3" ] && return 0
    echo "run $1: exit status $(cat "$tmp/rc.$1") (want $2), $(wc -l < "$tmp/out.$1") lines (want $3):"
    cat "$tmp/out.$1" "$tmp/err.$1"
    exit 1
}

run Usage demo.c c
for n in 1 2; do
    expect $n 0 12 # 4 ranks x 3 steps
    [ "$(sed -n 2p "$tmp/out.$n")" = "rank 1 step 0" ] || { echo "unexpected order"; cat "$tmp/out.$n"; exit 1; }
done
run C++ demo.cpp cpp
for n in 1 2; do
    expect $n 1 10
    [ "$(tail -n 4 "$tmp/out.$n" | tr '\n' ' ')" = "rank 2 leaves rank 0 leaves rank 1 leaves rank 3 leaves " ] \
        || { echo "unexpected destructor order"; cat "$tmp/out.$n"; exit 1; }
    grep -qx 'spawn failed on ranks \[2\]: rank 2 raised code 10100: rank 2 gives up' "$tmp/err.$n" \
        || { echo "no spawn_error report"; cat "$tmp/err.$n"; exit 1; }
done
echo "ok: both README examples build with their printed lines (in the tree and installed) and run"
