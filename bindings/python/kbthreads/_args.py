# SPDX-License-Identifier: MIT
"""Argument coercion: integers through operator.index, as range() takes
them; spawn's args; join's timeout."""

from __future__ import annotations

import operator
from typing import Any

INT_MAX = 2**31 - 1  # the library's nprocs is a C int


def _int_arg(v: Any, what: str) -> int:
    """operator.index(v): TypeError for a str, a float, None, ..."""
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(v).__name__}") from None


def _nprocs_arg(v: Any) -> int:
    """spawn's nprocs: an integer (not a bool: True is no number of ranks)
    from 0 to the library's INT_MAX."""
    if isinstance(v, bool):
        raise TypeError(f"spawn: nprocs must be an integer, not bool ({v!r})")
    n = _size_arg(v, "spawn: nprocs")
    if n > INT_MAX:
        raise ValueError(f"spawn: nprocs must be at most {INT_MAX} (the library's int), not {n}")
    return n


def _size_arg(v: Any, what: str) -> int:
    """An integer >= 0 (TypeError as _int_arg; ValueError when negative)."""
    n = _int_arg(v, what)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, not {n}")
    return n


def _args_arg(args: Any) -> tuple[Any, ...]:
    """The positional arguments after the rank: any iterable, as fn(rank, *args) takes it."""
    if isinstance(args, (str, bytes)):
        raise TypeError(f"spawn: args must be a tuple (or another iterable of arguments), not {type(args).__name__}")
    try:
        return tuple(args)
    except TypeError:
        raise TypeError(
            f"spawn: args must be a tuple (or another iterable of arguments), not {type(args).__name__}"
        ) from None


def _timeout_arg(timeout: Any) -> float | None:
    """None (no limit) or a real number of seconds (a negative one: no wait)."""
    if timeout is None:
        return None
    if isinstance(timeout, (str, bytes)) or not hasattr(type(timeout), "__float__"):
        raise TypeError(f"join: timeout must be a number of seconds or None, not {type(timeout).__name__}")
    t = float(timeout)
    if t != t:
        raise ValueError("join: timeout must be a number of seconds, not NaN")
    return t
