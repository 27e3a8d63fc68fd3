#!/bin/sh
# SPDX-License-Identifier: MIT
# An install carries the license and Concurrency Kit's notice, unchanged,
# in <prefix>/share/doc/kbthreads.
# usage: license_installed.sh PREFIX SOURCE_DIR
set -eu
prefix=$1 src=$2
status=0
for f in LICENSE licenses/ConcurrencyKit-BSD-2-Clause.txt; do
    installed=$prefix/share/doc/kbthreads/$(basename "$f")
    if [ ! -f "$installed" ]; then
        echo "FAIL: $f is not installed as share/doc/kbthreads/$(basename "$f")"; status=1
    elif ! cmp -s "$src/$f" "$installed"; then
        echo "FAIL: share/doc/kbthreads/$(basename "$f") differs from $f"; status=1
    fi
done
[ $status -ne 0 ] || echo "ok: LICENSE and the Concurrency Kit notice are installed"
exit $status
