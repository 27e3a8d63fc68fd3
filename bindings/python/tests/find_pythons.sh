#!/bin/sh
# SPDX-License-Identifier: MIT
# find_pythons.sh FLOOR: one CPython interpreter per line, one per version
# from FLOOR (3.X) up: python3.X in every folder of PATH, in order, then
# pyenv's (`pyenv root`/versions/*/bin/python3.X) when pyenv exists. The
# first that runs wins for its version (a pyenv shim whose version is not
# selected does not run, and is passed over). Free-threaded builds
# (python3.Xt) are not looked for: they are not supported yet.
set -eu
floor_minor=${1#3.}
pyenv_root=""
command -v pyenv >/dev/null 2>&1 && pyenv_root=$(pyenv root 2>/dev/null || true)
minor=$floor_minor
while [ "$minor" -le 30 ]; do
    name=python3.$minor
    candidates=""
    old_ifs=$IFS; IFS=:
    for dir in $PATH; do candidates="$candidates
$dir/$name"; done
    IFS=$old_ifs
    [ -n "$pyenv_root" ] && for p in "$pyenv_root"/versions/*/bin/$name; do candidates="$candidates
$p"; done
    printf '%s\n' "$candidates" | while IFS= read -r p; do
        [ -n "$p" ] && [ -x "$p" ] || continue
        # (the interpreter itself, not a shim or a link; CPython, this version)
        real=$("$p" -c 'import sys; assert sys.implementation.name == "cpython"; print(sys.executable)' 2>/dev/null) || continue
        [ -n "$real" ] && printf '%s\n' "$real" && break
    done
    minor=$((minor + 1))
done
