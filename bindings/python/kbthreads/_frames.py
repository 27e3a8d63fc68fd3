# SPDX-License-Identifier: MIT
"""A rank's Python stack in the library's reports: the stall report, the
crash report and kbthreads-dump show it above the rank's C frames.

The frames writer is C (_accel_frames.c): the library calls it on the
rank's own thread in a signal handler, where Python cannot run. It reads
the stack the way faulthandler does, through faulthandler itself, which
this module registers for FRAMES_SIGNAL with a memfd as its file. It is
installed once per process, at the first spawn; a process that never
spawns, or opts out with KBTHREADS_PYTHON_FRAMES=0, is left alone. It costs
nothing per operation: a sigaction each for FRAMES_SIGNAL and the
library's KB_STALL_SIGNAL, one memfd, and a check of a flag at each spawn.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import threading

from ._loader import accel

FRAMES_SIGNAL = signal.SIGRTMIN + 4  # the library's KB_STALL_SIGNAL is SIGRTMIN + 3

_lock = threading.Lock()
_tried = False
_fd = -1  # faulthandler's file for FRAMES_SIGNAL, once installed
not_installed: str | None = "no spawn yet"  # why a rank's Python stack does not show, or None


def _register(fd: int) -> None:
    faulthandler.register(FRAMES_SIGNAL, file=fd, all_threads=False, chain=False)
    accel.set_frames_writer(fd, FRAMES_SIGNAL)


def install() -> None:
    """Install the Python frames writer, once (spawn calls it). When it
    cannot be installed the reports show C frames only, and
    not_installed says why."""
    global _tried, _fd, not_installed
    if _tried:
        return
    with _lock:
        if _tried:
            return
        _tried = True
        if os.environ.get("KBTHREADS_PYTHON_FRAMES", "1") == "0":
            not_installed = "KBTHREADS_PYTHON_FRAMES=0"
        elif signal.getsignal(FRAMES_SIGNAL) != signal.SIG_DFL:
            not_installed = f"signal {int(FRAMES_SIGNAL)} (SIGRTMIN+4) already has a handler"
        else:
            try:
                fd = os.memfd_create("kbthreads-python-frames", os.MFD_CLOEXEC)
                _register(fd)
            except (OSError, RuntimeError, ValueError) as e:
                not_installed = f"cannot register faulthandler for signal {int(FRAMES_SIGNAL)}: {e}"
            else:
                _fd, not_installed = fd, None


def _after_fork_in_child() -> None:
    """A forked child shares the parent's memfd: give it one of its own."""
    global _fd, not_installed
    if _fd < 0:
        return
    old = _fd
    try:
        fd = os.memfd_create("kbthreads-python-frames", os.MFD_CLOEXEC)
        _register(fd)
    except (OSError, RuntimeError) as e:
        _fd, not_installed = -1, f"cannot register faulthandler again after fork: {e}"
        return
    _fd = fd
    os.close(old)


os.register_at_fork(after_in_child=_after_fork_in_child)
