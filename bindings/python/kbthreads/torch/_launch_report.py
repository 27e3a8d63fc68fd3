# SPDX-License-Identifier: MIT
"""kbthreads-torchrun's report of a failed run, in the shape of torchrun's
(a framed summary: the program, the first rank that failed with its exit
status and traceback, then any other failed rank). Only root causes are
listed: the ranks the spawn stopped because another failed are not."""

from __future__ import annotations

import traceback
from collections.abc import Mapping

from .._errors import SpawnException
from ._launch_rank import Failure

_WIDTH = 60


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").split("\n"))


def _entry(rank: int, nproc: int, failure: Failure) -> str:
    head = f"  rank {rank} (local rank {rank % nproc} on node {rank // nproc}): exit status {failure.exitcode}"
    body = failure.traceback or failure.error
    return head + "\n" + _indent(body)


def _failure_of(e: BaseException) -> Failure:
    """A root cause the rank did not record itself (raised outside the
    program: kbthreads' own checks, an error while being stopped)."""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return Failure(1, "".join(traceback.format_exception_only(type(e), e)).strip(), text)


def report(title: str, world: int, nproc: int, recorded: Mapping[int, Failure], e: SpawnException) -> str:
    """The report of a spawn that failed with e (its ``errors``: the
    root-cause ranks, the first to fail first)."""
    failures = {r: recorded.get(r) or _failure_of(x) for r, x in e.errors.items()}
    lines = ["=" * _WIDTH, f"{title} FAILED ({len(failures)} of {world} ranks, kbthreads-torchrun)", "-" * _WIDTH]
    ranks = list(failures)
    if ranks:
        lines += ["First failure (root cause):", _entry(ranks[0], nproc, failures[ranks[0]]), "-" * _WIDTH]
        lines.append("Other failures:")
        lines += [_entry(r, nproc, failures[r]) for r in ranks[1:]] or ["  (none)"]
    if e.drain_error is not None:
        lines.append(f"The simulation's engine failed ({e.drain_phase}): {e.drain_error!r}")
    lines += ["-" * _WIDTH, "Ranks still running then were stopped (their finally blocks ran).", "=" * _WIDTH]
    return "\n".join(lines)
