# SPDX-License-Identifier: MIT
"""One rank of kbthreads-torchrun: the program run as ``__main__`` in a
module of the rank's own, ending as a worker process would end.

- It returns, or raises SystemExit with status 0 (``sys.exit()``,
  ``sys.exit(0)``): the rank succeeded.
- SystemExit with another status: the rank failed with that exit status
  (a message that is not a number is printed to stderr first, status 1,
  as python does).
- Any other exception: the rank's own ``sys.excepthook`` prints it (the
  one ``init_process_group`` wrapped with the rank's ``[rankN]:`` prefix,
  as in a worker) with the script's frames only, and the rank failed with
  exit status 1.

Each failure is recorded for the launcher's report, then raised out of
the rank so that the spawn stops the other ranks."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from types import TracebackType

from .._loader import accel as _accel
from ._launch_program import Program


@dataclass(frozen=True)
class Failure:
    exitcode: int
    error: str  # one line: "ValueError: boom", "SystemExit: 3"
    traceback: str  # the script's frames and the error, as the rank printed them; "" for an exit status


class RankExit(Exception):
    """A rank's SystemExit with a status other than 0: its failure."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the rank exited with status {status}")
        self.status = status


def _status(e: SystemExit) -> int:
    """A SystemExit's exit status, as python computes it on the way out
    (a message that is not a number is printed, and is status 1)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    sys.stdout.flush()
    print(e.code, file=sys.stderr)
    return 1


def _script_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame: the frame of run()
    that exec'd it left out, as a worker's traceback starts at <module>."""
    return tb.tb_next if tb is not None else None


class Runner:
    """``spawn``'s function: runs the program on each rank it is called for."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.failures: dict[int, Failure] = {}
        self.started = False

    def __call__(self, rank: int) -> None:
        self.started = True
        module = self.program.new_module()
        sys.modules["__main__"] = module  # pickle and `import __main__` find this rank's module
        try:
            exec(self.program.code, module.__dict__)
        except SystemExit as e:
            if _accel.cancelled():  # the spawn stopping this rank after another failed: not a failure
                raise
            status = _status(e)
            if status != 0:
                self.failures[rank] = Failure(status, f"SystemExit: {e.code}", "")
                raise RankExit(status) from None
        except Exception as e:
            tb = _script_frames(e.__traceback__)
            e.__traceback__ = tb  # python's own excepthook prints the exception's traceback, not its argument
            text = "".join(traceback.format_exception(type(e), e, tb))
            self.failures[rank] = Failure(1, "".join(traceback.format_exception_only(type(e), e)).strip(), text)
            sys.stdout.flush()  # what the rank printed first comes first, as with python -u
            sys.excepthook(type(e), e, tb)
            raise
