# SPDX-License-Identifier: MIT
"""Running the command: one run in its own process group, its outcome."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from .schedule_file import SCHEDULE_ENV


@dataclass
class Outcome:
    kind: str  # "ok", "exit", "signal", "hang", "output"; "cancelled" is never reported
    code: int  # the exit status or signal number (0 otherwise)
    text: str  # how it failed, for people

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    def same_failure(self, other: Outcome) -> bool:
        return self.kind == other.kind and self.code == other.code

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "code": self.code, "text": self.text}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Outcome:
        return Outcome(str(d["kind"]), int(d["code"]), str(d["text"]))


CANCELLED = Outcome("cancelled", 0, "cancelled")


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


LIVE_GROUPS: set[int] = set()  # every run's process group, for the signal handler


class Runner:
    """Runs the command, each run in its own process group, several at
    once from several threads; a group is killed at the timeout, when its
    run ends and when it is cancelled, so nothing the command started is
    left running."""

    def __init__(self, command: list[str], timeout: float, compare: bytes | None, cwd: str | None = None):
        self.command = command
        self.timeout = timeout
        self.compare = compare  # the baseline's stdout, with --compare-output
        self.cwd = cwd
        self.lock = threading.Lock()
        self.live: dict[int, tuple[subprocess.Popen[bytes], int]] = {}  # pid -> (process, tag)
        self.cancelled: set[int] = set()  # pids killed on purpose

    def run(self, prefix: str, env_extra: dict[str, str], tag: int = 0) -> Outcome:
        env = {k: v for k, v in os.environ.items() if k not in SCHEDULE_ENV}
        env.update(env_extra)
        with open(prefix + ".out", "wb") as out, open(prefix + ".err", "wb") as err:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
                cwd=self.cwd,
            )
            with self.lock:
                self.live[proc.pid] = (proc, tag)
                LIVE_GROUPS.add(proc.pid)
            try:
                proc.wait(self.timeout)
                hung = False
            except subprocess.TimeoutExpired:
                hung = True
            finally:
                self.kill(proc.pid)
                rc = proc.wait()
                with self.lock:
                    del self.live[proc.pid]
                    LIVE_GROUPS.discard(proc.pid)
                    cancelled = proc.pid in self.cancelled
                    self.cancelled.discard(proc.pid)
        if cancelled:
            return CANCELLED
        if hung:
            return Outcome("hang", 0, f"hang: killed after {self.timeout:g} s")
        if rc < 0:
            return Outcome("signal", -rc, f"killed by {signal_name(-rc)}")
        if rc > 0:
            return Outcome("exit", rc, f"exit status {rc}")
        if self.compare is not None:
            with open(prefix + ".out", "rb") as f:
                if f.read() != self.compare:
                    return Outcome("output", 0, "output differs from the baseline's")
        return Outcome("ok", 0, "ok")

    @staticmethod
    def kill(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def cancel(self, above: int | None = None) -> None:
        """Kill the runs tagged above `above` (every run when None)."""
        with self.lock:
            for pid, (_, tag) in list(self.live.items()):
                if above is None or tag > above:
                    self.cancelled.add(pid)
                    self.kill(pid)
