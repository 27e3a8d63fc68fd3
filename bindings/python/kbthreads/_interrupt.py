# SPDX-License-Identifier: MIT
"""Ctrl-C while the main thread drives a spawn.

Python runs its SIGINT handler on the main thread only, when that thread
runs Python code; while it drives a spawn it waits in the library for the
rank that holds the baton, which may be anywhere. So, around joining and
freeing a spawn (a session), the compiled part (_accel_spawn.c) takes
SIGINT over:

- the first Ctrl-C raises KeyboardInterrupt in the code the spawn runs: the
  rank holding the baton, as soon as it runs Python code (at once in Python
  code, when a call returns, right after a suspension point it is entering),
  or the driver's engine hook. The rank fails with it as with any exception:
  its siblings are cancelled in rank order (their ``finally`` blocks run)
  and ``spawn`` raises it. Not raised anywhere (the driver held the baton
  between rounds), it is raised in the caller when the session ends;
- a second Ctrl-C, or the first one not raised within the grace period
  (``KBTHREADS_INTERRUPT_GRACE`` seconds, default 3; ``off``: never),
  writes every rank's state and Python stack to stderr and ends the
  process by SIGINT, as an uncaught Ctrl-C ends Python (a shell's status
  130): a rank in ``time.sleep(30)`` or a blocking C call cannot be
  interrupted.

Only the main thread with Python's own SIGINT handler in place
(``signal.default_int_handler``) takes part: a program with a handler of
its own, or SIGINT ignored (a background job), keeps it.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from ._loader import accel

if TYPE_CHECKING:
    from ._run import _Run

GRACE_ENV = "KBTHREADS_INTERRUPT_GRACE"
DEFAULT_GRACE_S = 3.0


def grace_ms() -> int:
    """The grace period in ms, -1 for none (only a second Ctrl-C ends the
    process). An unreadable value keeps the default."""
    text = os.environ.get(GRACE_ENV, "").strip().lower()
    if text in ("off", "none", "never", "inf"):
        return -1
    try:
        s = float(text) if text else DEFAULT_GRACE_S
    except ValueError:
        s = DEFAULT_GRACE_S
    if math.isnan(s) or s < 0:
        s = DEFAULT_GRACE_S
    return int(s * 1000)


def begin(run: _Run) -> bool:
    """Take Ctrl-C over while this thread joins or frees run's spawn; False
    when it is not this thread's to take (not the main thread, a SIGINT
    handler of the program's, the spawn already freed). A KeyboardInterrupt
    in flight (this is its cleanup) counts as the first Ctrl-C: the next one
    ends the process."""
    if not run.pc or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    presses = 1 if isinstance(sys.exc_info()[1], KeyboardInterrupt) else 0
    return accel.interrupt_begin(run.ctx._core, run.pc, grace_ms(), presses)


def end(began: bool) -> bool:
    """Give Ctrl-C back to Python. True when one was pressed and its
    KeyboardInterrupt raised nowhere: the caller raises it."""
    if not began:
        return False
    presses, delivered = accel.interrupt_end()
    return presses > 0 and not delivered
