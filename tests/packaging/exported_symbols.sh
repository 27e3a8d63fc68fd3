#!/bin/sh
# SPDX-License-Identifier: MIT
# Fails if the shared library exports any symbol that does not start with
# kb_, or if its kb_ symbols differ from the functions the header declares
# and the debug descriptor kb_debug_offsets (a table for debuggers and tools,
# src/debug_offsets.h; docs/debugging.md).
# usage: exported_symbols.sh path/to/libkbthreads.so path/to/kbthreads.h
set -eu
lib=$1
header=$2
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVWiu]$/ { sub(/@.*/, "", $3); print $3 }')
bad=$(printf '%s\n' "$syms" | grep -v '^kb_' || true)
count=$(printf '%s\n' "$syms" | grep -c '^kb_' || true)
if [ -n "$bad" ]; then
    echo "exported symbols without the kb_ prefix:"; printf '  %s\n' $bad; exit 1
fi
declared=$( (grep '^KB_API' "$header" | grep -o 'kb_[a-z0-9_]*(' | tr -d '('; echo kb_debug_offsets) | sort)
exported=$(printf '%s\n' "$syms" | sort)
if [ "$declared" != "$exported" ]; then
    echo "exported kb_ symbols differ from the header's declarations:"
    printf '%s\n' "$declared" > "${TMPDIR:-/tmp}/kb_declared.$$"
    printf '%s\n' "$exported" | diff "${TMPDIR:-/tmp}/kb_declared.$$" - || true
    rm -f "${TMPDIR:-/tmp}/kb_declared.$$"
    exit 1
fi
# The SONAME carries the major version.
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
case "$soname" in
    libkbthreads.so.[0-9]*) ;;
    *) echo "unexpected SONAME '$soname'"; exit 1 ;;
esac
echo "ok: $count kb_ symbols, nothing else; SONAME $soname"
