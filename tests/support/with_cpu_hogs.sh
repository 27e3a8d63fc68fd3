#!/bin/sh
# SPDX-License-Identifier: MIT
# with_cpu_hogs.sh N COMMAND...: COMMAND run beside N busy loops (one
# process each, at the same priority), as on a user's busy machine; the
# loops are killed however COMMAND ends, and its exit status is returned.
set -eu
n=$1
shift
pids=""
cleanup() { [ -n "$pids" ] && kill $pids 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
i=0
while [ "$i" -lt "$n" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done
echo "with_cpu_hogs: $n busy loops beside: $*"
status=0
"$@" || status=$?
exit $status
