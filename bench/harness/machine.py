# SPDX-License-Identifier: MIT
"""What bench/harness/run.py records about the machine and the build: the CPU
(lscpu), kernel, libc, compiler, the limits on threads, the commit, the
build type, and the load average."""
from __future__ import annotations

import os
import platform
import subprocess
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
LSCPU_KEYS = ["Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
              "Hypervisor vendor", "Virtualization type", "L1d cache", "L2 cache", "L3 cache", "CPU max MHz",
              "BogoMIPS"]


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def read_first(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def loadavg() -> List[float]:
    try:
        return [float(x) for x in read_first("/proc/loadavg").split()[:3]]
    except ValueError:
        return []


def lscpu() -> Dict[str, str]:
    out = {}
    for line in sh("LC_ALL=C lscpu").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return {k: out[k] for k in LSCPU_KEYS if k in out}


def machine_info() -> Dict[str, Any]:
    root = os.path.dirname(os.path.dirname(HERE))
    commit = sh("git -C '%s' rev-parse --short HEAD" % root)
    dirty = sh("git -C '%s' status --porcelain --untracked-files=no -- src include" % root)
    debian = read_first("/etc/debian_version")
    return {
        "lscpu": lscpu(),
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "os": debian and "Debian " + debian,
        "glibc": " ".join(platform.libc_ver()),
        "cc": sh("cc --version | head -1"),
        "memory": sh("free -h | awk '/^Mem:/ {print $2}'"),
        "pid_max": read_first("/proc/sys/kernel/pid_max"),
        "threads_max": read_first("/proc/sys/kernel/threads-max"),
        "max_map_count": read_first("/proc/sys/vm/max_map_count"),
        "git_commit": commit + (" (src/ or include/ modified)" if dirty else ""),
    }


def build_type(bindir: str) -> str:
    """CMAKE_BUILD_TYPE of the build holding the programs."""
    d = bindir
    for _ in range(3):
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            with open(cache) as f:
                for line in f:
                    if line.startswith("CMAKE_BUILD_TYPE:"):
                        return line.split("=", 1)[1].strip() or "(none)"
            return "(none)"
        d = os.path.dirname(d)
    return "?"


def system_threads() -> int:
    """Threads alive on the whole machine (each uses a pid)."""
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/status" % d) as f:
                    for line in f:
                        if line.startswith("Threads:"):
                            n += int(line.split()[1])
                            break
            except OSError:
                pass
    return n
