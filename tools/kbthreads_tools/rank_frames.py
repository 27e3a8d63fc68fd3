# SPDX-License-Identifier: MIT
"""Each rank's Python stack, asked of the process itself: what
kbthreads-dump prints under a rank's row.

Only a rank's own thread can read its Python stack safely while it runs
(or holds the GIL in a C loop), so the tool asks each rank thread in turn:
it sends the thread KB_STALL_SIGNAL with rt_tgsigqueueinfo (si_code
SI_QUEUE, the value naming a file this tool holds open and the most frames
wanted), and the library's handler on that thread (src/rank_frames.c)
appends the binding's frames writer's output, between marker lines, to
/proc/<this tool>/fd/<that file>. Nothing is asked of a process whose
handler is not installed (the signal's default action would kill it): the
process must map kbthreads' compiled part and catch the signal.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
import tempfile
import time
from collections.abc import Callable

STALL_SIGNAL = signal.SIGRTMIN + 3  # KB_STALL_SIGNAL (include/kbthreads.h)
SI_QUEUE = -1
BEGIN, END = "kbthreads-frames begin ", "kbthreads-frames end "
# rt_tgsigqueueinfo, which glibc does not wrap (asm/unistd.h of each)
_SYSCALLS = {
    "x86_64": 297,
    "aarch64": 240,
    "riscv64": 240,
    "i386": 335,
    "i686": 335,
    "armv7l": 363,
    "ppc64le": 322,
    "ppc64": 322,
    "s390x": 330,
}
MAX_FRAMES = 0x7FFF  # what the request's value holds (src/rank_frames.c)
NO_PYTHON = "no Python kbthreads in it"


class _SigVal(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


class _Queued(ctypes.Structure):
    _fields_ = [("si_pid", ctypes.c_int), ("si_uid", ctypes.c_uint), ("si_value", _SigVal)]


class _SigInfoHead(ctypes.Structure):
    _fields_ = [("si_signo", ctypes.c_int), ("si_errno", ctypes.c_int), ("si_code", ctypes.c_int), ("q", _Queued)]


class _SigInfo(ctypes.Structure):  # the kernel's siginfo_t: 128 bytes
    _fields_ = [("head", _SigInfoHead), ("_pad", ctypes.c_byte * (128 - ctypes.sizeof(_SigInfoHead)))]


def why_not(pid: int) -> str | None:
    """None when pid can be asked for its ranks' Python stacks, else why
    not (a process without Python, or without the handler)."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read()
    except OSError as e:
        return "cannot read its memory map: %s" % e.strerror
    if "kbthreads/_accel" not in maps:
        return NO_PYTHON
    try:
        with open("/proc/%d/status" % pid) as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError as e:
        return "cannot read its status: %s" % e.strerror
    caught = int(status.get("SigCgt", "0").strip(), 16)
    if not caught >> (int(STALL_SIGNAL) - 1) & 1:
        return "it has not installed the frames writer (no spawn yet, or KBTHREADS_PYTHON_FRAMES=0)"
    uid = int(status.get("Uid", "-1").split()[0])
    if uid != os.geteuid():
        # it could not open this tool's file (/proc/<tool>/fd/N needs ptrace access to the tool)
        return "the process runs as uid %d, this tool as uid %d: run kbthreads-dump as its user" % (uid, os.geteuid())
    state = status.get("State", "").strip()
    if state[:1] in ("T", "t"):
        return "the process is stopped (%s): a stopped thread cannot answer" % state
    return None


def _sender() -> Callable[[int, int, _SigInfo], int] | None:
    nr = _SYSCALLS.get(platform.machine())
    if nr is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    return lambda pid, tid, info: libc.syscall(
        ctypes.c_long(nr), ctypes.c_int(pid), ctypes.c_int(tid), ctypes.c_int(int(STALL_SIGNAL)), ctypes.byref(info)
    )


def ask(pid: int, tids: list[int], max_frames: int, timeout: float = 1.0) -> dict[int, list[str]]:
    """tid -> the lines its Python stack was written as (each starting with
    two spaces), or a line saying why there is none, for each of tids."""
    send = _sender()
    if send is None:
        return {t: ["  Python stack: not read (rt_tgsigqueueinfo is unknown on %s)" % platform.machine()] for t in tids}
    out: dict[int, list[str]] = {}
    silent = None  # the first thread that did not answer: the others are not asked
    with tempfile.TemporaryFile(mode="w+b") as f:
        fd = f.fileno()
        value = (fd & 0xFFFF) | (min(max(max_frames, 0), MAX_FRAMES) << 16)
        done = 0  # bytes of f already parsed
        for tid in tids:
            if silent is not None:
                out[tid] = ["  Python stack: not read (LWP %d did not answer before)" % silent]
                continue
            info = _SigInfo()
            info.head.si_signo, info.head.si_code = int(STALL_SIGNAL), SI_QUEUE
            info.head.q.si_pid, info.head.q.si_uid = os.getpid(), os.getuid()
            info.head.q.si_value.sival_int = value
            if send(pid, tid, info) != 0:
                e = ctypes.get_errno()
                out[tid] = [
                    "  Python stack: not read (the signal could not be sent: %s)"
                    % ("the thread is gone" if e == errno.ESRCH else os.strerror(e))
                ]
                continue
            begin, end = (BEGIN + str(tid) + "\n").encode(), (END + str(tid) + "\n").encode()
            deadline = time.monotonic() + timeout
            while True:
                data = os.pread(fd, 1 << 22, done)
                at = data.find(end)
                if at >= 0:
                    block = data[:at]
                    start = block.find(begin)
                    block = block[start + len(begin) :] if start >= 0 else block
                    out[tid] = [line for line in block.decode("utf-8", "replace").split("\n") if line]
                    done += at + len(end)
                    break
                if time.monotonic() > deadline:
                    out[tid] = [
                        "  Python stack: not read (the thread did not answer within %g s: it blocks "
                        "signal %d, or the process took that signal for itself)" % (timeout, STALL_SIGNAL)
                    ]
                    silent = tid
                    break
                time.sleep(0.002)
    return out
