# SPDX-License-Identifier: MIT
"""kbthreads.torch.spawn's ``environ`` and ``argv`` keywords: checked, and
resolved to each rank's values on the caller's thread before any rank starts
(so a bad value, or a callable that raises, fails the spawn at once)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

EnvironArg = Mapping[str, str] | Callable[[int], Mapping[str, str]] | None
ArgvArg = Sequence[str] | Callable[[int], Sequence[str]] | None


def environ_entries(environ: Any, nprocs: int) -> list[dict[str, str]] | None:
    """Each rank's entries to add to (or replace in) a copy of the caller's
    environment, or None for none."""
    if environ is None:
        return None
    if isinstance(environ, Mapping):
        one = _checked_environ(environ, "environ")
        return [one] * nprocs
    if callable(environ):
        return [_checked_environ(environ(r), f"environ({r})") for r in range(nprocs)]
    raise TypeError(
        "kbthreads.torch.spawn: environ must be a mapping of str to str, a callable taking the rank and "
        f"returning one, or None, not {type(environ).__name__}"
    )


def _checked_environ(m: Any, what: str) -> dict[str, str]:
    if not isinstance(m, Mapping):
        raise TypeError(f"kbthreads.torch.spawn: {what} must be a mapping of str to str, not {type(m).__name__}")
    out: dict[str, str] = {}
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(
                f"kbthreads.torch.spawn: {what} must map str to str; it maps {k!r} ({type(k).__name__}) "
                f"to {v!r} ({type(v).__name__})"
            )
        if not k or "=" in k or "\0" in k:
            raise ValueError(f"kbthreads.torch.spawn: {what}: {k!r} is not an environment variable name")
        if "\0" in v:
            raise ValueError(f"kbthreads.torch.spawn: {what}[{k!r}] contains a NUL character")
        out[k] = v
    return out


def argv_lists(argv: Any, nprocs: int) -> list[list[str]] | None:
    """Each rank's sys.argv, or None for copies of the caller's."""
    if argv is None:
        return None
    if callable(argv) and not isinstance(argv, (str, bytes, Sequence)):
        return [_checked_argv(argv(r), f"argv({r})") for r in range(nprocs)]
    one = _checked_argv(argv, "argv")
    return [one] * nprocs


def _checked_argv(a: Any, what: str) -> list[str]:
    if isinstance(a, (str, bytes)) or not isinstance(a, Sequence):
        raise TypeError(
            f"kbthreads.torch.spawn: {what} must be a sequence of str (a list, a tuple), "
            f"or a callable taking the rank and returning one, not {type(a).__name__}"
        )
    out = list(a)
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise TypeError(f"kbthreads.torch.spawn: {what}[{i}] must be a str, not {type(s).__name__}")
    return out
