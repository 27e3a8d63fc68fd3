# SPDX-License-Identifier: MIT
"""Four Python ranks; rank 2 stops itself with SIGTRAP at its second step, so
gdb shows every rank as a thread (kb-rank-N) with its Python stack:

    PYTHONPATH=bindings/python KBTHREADS_LIBRARY=build/src/libkbthreads.so.0 \
      gdb -batch -ex run -ex 'info threads' -ex 'thread apply all py-bt' \
      --args /usr/bin/python3 bindings/python/examples/gdb_ranks.py

(py-bt comes with Debian's python3-dbg.) Run without a debugger, it just
finishes.
"""
import signal
import threading

import kbthreads


def traced_by_a_debugger() -> bool:
    with open("/proc/self/status") as f:
        return any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in f)


def train(rank, steps):
    for step in range(steps):
        if rank == 2 and step == 1 and traced_by_a_debugger():
            signal.pthread_kill(threading.get_ident(), signal.SIGTRAP)  # gdb stops here
        kbthreads.yield_()


if __name__ == "__main__":
    kbthreads.spawn(train, args=(3,), nprocs=4)
    print("done")
