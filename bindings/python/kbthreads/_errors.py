# SPDX-License-Identifier: MIT
"""The binding's exceptions. Every one of them is a KbthreadsError:
KbError (a library call failed with a KB_E* code), SpawnException (ranks or
the drain failed) and its SpawnStopped subclasses (the library stopped a
spawn with ranks still live: SpawnTimeout, SpawnDiverged), RankFailure (a
failure the library recorded without a Python exception)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ._loader import accel


class KbthreadsError(Exception):
    """The base of every exception the binding raises for a library
    failure (KbError, SpawnException and its subclasses, RankFailure)."""


class KbError(KbthreadsError, RuntimeError):
    """A libkbthreads call failed with a KB_E* code (a negative errno value;
    ``code``; ``kbthreads._accel.errorcode[code]`` names it)."""

    def __init__(self, code: int, what: str = ""):
        self.code = code
        text = accel.strerror(code)
        super().__init__(f"{what}: {text} ({code})" if what else f"{text} ({code})")


accel.init(KbError)  # the class the compiled part raises


class SpawnException(KbthreadsError, RuntimeError):
    """Raised by spawn (or ProcessContext.join) when ranks or the drain failed.

    ``errors`` maps each root-cause rank to the exception object it raised, in
    the order the failures were recorded: the rank that failed first, then any
    cancelled rank whose cancellation turned into a different error. The
    message is the reference's: ``spawn failed on ranks [1, 3]: rank 1 raised
    ValueError('x')`` (sorted ranks, first recorded rank named).

    When the engine's wait failed inside a drain, ``drain_error`` is that
    exception, ``drain_handle`` the handle and ``drain_phase`` "pending worker
    wait" or "pending collective"; the message names it (the reference only
    says ``spawn failed on ranks []``).
    """

    def __init__(
        self,
        errors: dict[int, BaseException],
        drain_error: BaseException | None = None,
        drain_handle: Any = None,
        drain_phase: str | None = None,
    ):
        self.errors = errors
        self.drain_error = drain_error
        self.drain_handle = drain_handle
        self.drain_phase = drain_phase
        first = next(iter(errors.items()), None)
        drain = ""
        if drain_error is not None:
            drain = f": drain failed: engine wait for handle {drain_handle!r} ({drain_phase}) raised {drain_error!r}"
        msg = f"spawn failed on ranks {sorted(errors.keys())}" + drain
        if first is not None:
            msg += ("; " if drain else ": ") + f"rank {first[0]} raised {first[1]!r}"
        super().__init__(msg)


class LiveRank(NamedTuple):
    """A rank still live when the library stopped a spawn: where it was
    suspended ("start": it never ran, "yield", "wait", "barrier") and, for
    "wait", the handle it waited for (else None)."""

    rank: int
    where: str
    handle: Any


class SpawnStopped(SpawnException):
    """The library stopped a spawn whose ranks were still live (they were
    cancelled, the barrier reset ran and both queues were cleared, as after
    a failure). ``report`` is the library's text, also the message;
    ``live`` the live ranks (LiveRank, in rank order); ``errors`` as for
    SpawnException (usually empty)."""

    def __init__(self, report: str, live: list[LiveRank], errors: dict[int, BaseException] | None = None):
        super().__init__(dict(errors or {}))
        self.report = report
        self.live = list(live)
        self.args = (report,)

    def __str__(self) -> str:
        return self.report


class SpawnTimeout(SpawnStopped):
    """The spawn reached its round limit (KB_MAX_ROUNDS in the environment)
    with ranks still live."""


class SpawnDiverged(SpawnStopped):
    """A replayed schedule (KB_REPLAY) stopped matching the program;
    ``turn`` is the 1-based turn at which it did (0 when it did not match
    from the start)."""

    def __init__(
        self, report: str, live: list[LiveRank], errors: dict[int, BaseException] | None = None, turn: int = 0
    ):
        super().__init__(report, live, errors)
        self.turn = turn


class RankFailure(KbthreadsError):
    """Stands in errors[] for a failure the library recorded without a Python
    exception (not expected from Python rank code)."""

    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)
