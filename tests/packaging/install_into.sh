#!/bin/sh
# SPDX-License-Identifier: MIT
# The install the man page and license tests look at: the API docs built
# anew (when the build found Doxygen), then `cmake --install` into a fresh
# PREFIX, as `make install` does.
# usage: install_into.sh BUILD_DIR PREFIX yes|no   (yes: build the docs target)
set -eu
build=$1 prefix=$2 docs=$3
if [ "$docs" = yes ]; then
    cmake --build "$build" --target docs
fi
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "installed into $prefix"
