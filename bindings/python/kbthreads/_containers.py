# SPDX-License-Identifier: MIT
"""The pending queues and the completed set, as Python containers read
from the library each time (ctx._pending_worker_waits,
ctx.pending_collectives, ctx._completed)."""

from __future__ import annotations

import collections.abc
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, overload

from ._errors import KbError

if TYPE_CHECKING:
    from ._context import Context


class _Unsupported:
    def _refuse(self, *_a: object, **_k: object) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__}: entries leave only through the library's drain "
            "(or the failure path); they cannot be removed from Python"
        )

    clear = pop = remove = insert = discard = __delitem__ = __setitem__ = _refuse


def _handles_from(c: Context, copy: Callable[[], list[int]]) -> list[Any]:
    """The handles a Core listing (pending_waits, completed_handles) gives now."""
    with c._guard():
        ids = copy()
    return [c._handle(i) for i in ids]


class PendingWaits(_Unsupported, collections.abc.Sequence[Any]):
    """``ctx._pending_worker_waits``: the pending worker waits (FIFO), read
    from the library each time. ``append(h)`` queues a wait without waiting
    (kb_enqueue_wait); draining is the library's."""

    def __init__(self, ctx: Context):
        self._ctx = ctx

    def _snapshot(self) -> list[Any]:
        return _handles_from(self._ctx, self._ctx._core.pending_waits)

    def append(self, h: Any) -> None:
        c = self._ctx
        i = c._id(h)
        with c._guard():
            rc = c._core.enqueue_wait(i)
        if rc != 0:
            raise KbError(rc, "kb_enqueue_wait")

    def extend(self, hs: Iterable[Any]) -> None:
        for h in list(hs):
            self.append(h)

    def copy(self) -> list[Any]:
        return self._snapshot()

    def __len__(self) -> int:
        return len(self._snapshot())

    @overload
    def __getitem__(self, i: int) -> Any: ...

    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        return self._snapshot()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._snapshot())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, collections.abc.Sequence)):
            return self._snapshot() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._snapshot())


class PendingCollectives(PendingWaits):
    """The backend's ``_pending_collective_handles``: entries ``(h, sip_id,
    meta)``, FIFO. ``append`` submits one (kb_collective_submit); drain phase
    (b) completes it through ``ctx.wait(h, _meta=meta)``."""

    def _snapshot(self) -> list[Any]:
        c = self._ctx
        return [(c._handle(i), sip_id, c._metas.get(token)) for i, sip_id, token in c._pending_collective_entries()]

    def append(self, entry: tuple[Any, int, Any]) -> None:
        h, sip_id, meta = entry  # (TypeError or ValueError for anything but 3 items)
        c = self._ctx
        token = None
        if meta is not None:
            token = next(c._meta_tokens)
            c._metas[token] = meta
        try:
            # a rank's, in C, which checks sip_id (an integer fitting a C
            # int: TypeError, ValueError) on either side
            rc = c._core.submit(h, sip_id, token)
            if rc is NotImplemented:  # the driver side, under the context's lock
                i = c._id(h)
                with c._guard():
                    rc = c._core.collective_submit(i, operator.index(sip_id), token)
        except BaseException:
            if token is not None:
                c._metas.pop(token, None)
            raise
        if rc != 0:
            if token is not None:
                c._metas.pop(token, None)
            raise KbError(rc, "kb_collective_submit")


class CompletedSet(_Unsupported, collections.abc.Set[Any]):
    """``ctx._completed``: the handles the library has completed. ``h in``
    asks the library (kb_is_completed); ``add(h)`` completes one
    (kb_complete); iteration lists every completed handle this context has
    seen."""

    def __init__(self, ctx: Context):
        self._ctx = ctx

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)

    def __contains__(self, h: object) -> bool:
        c = self._ctx
        try:
            i = c._core.known_id(h)
        except TypeError:  # unhashable: cannot be a handle
            return False
        if i is None:
            return False
        with c._guard():
            rc = c._core.is_completed(i)
        if rc < 0:
            raise KbError(rc, "kb_is_completed")
        return rc == 1

    def add(self, h: Any) -> None:
        c = self._ctx
        i = c._id(h)
        with c._guard():
            rc = c._core.complete(i)
        if rc != 0:
            raise KbError(rc, "kb_complete")

    def _snapshot(self) -> list[Any]:
        return _handles_from(self._ctx, self._ctx._core.completed_handles)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._snapshot())

    def __len__(self) -> int:
        return len(self._snapshot())

    def __repr__(self) -> str:
        return "{" + ", ".join(repr(h) for h in self._snapshot()) + "}" if len(self) else "set()"
