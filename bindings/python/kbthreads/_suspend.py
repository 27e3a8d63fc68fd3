# SPDX-License-Identifier: MIT
"""The suspension points, kb_yield and kb_barrier, in C: they raise
SystemExit when the rank is being cancelled, RuntimeError outside a rank."""

from __future__ import annotations

from collections.abc import Callable

from ._loader import accel

yield_: Callable[[], None] = accel.yield_
barrier: Callable[[], None] = accel.barrier
