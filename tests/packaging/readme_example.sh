#!/bin/sh
# The README's usage example compiles warning-free and runs.
# usage: readme_example.sh README.md path/to/include path/to/libkbthreads.so
set -eu
readme=$1 inc=$2 lib=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^## Usage/{u=1} u && /^```c$/{c=1; next} c && /^```$/{exit} c{print}' "$readme" > "$tmp/example.c"
[ -s "$tmp/example.c" ] || { echo "no C example under '## Usage' in $readme"; exit 1; }
cc -std=c11 -Wall -Wextra -Werror -I"$inc" "$tmp/example.c" -o "$tmp/example" "$lib" -lpthread \
    -Wl,-rpath,"$(dirname "$lib")"
"$tmp/example" > "$tmp/out"
lines=$(wc -l < "$tmp/out")
[ "$lines" -eq 12 ] || { echo "expected 12 lines (4 ranks x 3 steps), got $lines"; cat "$tmp/out"; exit 1; }
[ "$(sed -n 2p "$tmp/out")" = "rank 1 step 0" ] || { echo "unexpected order"; cat "$tmp/out"; exit 1; }
echo "ok: the README example builds and prints its 12 lines"
