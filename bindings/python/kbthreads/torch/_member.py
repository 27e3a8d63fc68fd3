# SPDX-License-Identifier: MIT
"""One rank's member of a group, the base of KbProcessGroup (``_group.py``):
its identity, the record of a call (``Call``), and the meeting every
collective goes through: arrive in the spawn's table (``_meeting.py``),
check the calls, compute every member's result once, and finish in a Work
that parks the rank until the drain completed the collective."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist

from . import _compat, _funcol, _ops
from ._dtensor_ops import Uncounted
from ._meeting import Call, GroupInfo, SpawnTable, call_site
from ._tensors import GLOO_BUMPS, bump, call_data, check_tensor, dtype_name
from ._work import KbWork

if TYPE_CHECKING:
    from torch.distributed.distributed_c10d import GroupName

BACKEND = "kbthreads"


def same(calls: Sequence[Call], extra_check: Callable[[Sequence[Call]], str | None] | None = None) -> str | None:
    """None when every call agrees on kind, dtype, shapes, op and root."""
    first = calls[0]
    fields: tuple[tuple[str, Callable[[Call], object]], ...] = (
        ("kind", lambda c: c.kind),
        ("fake, meta or real tensors", lambda c: c.data),
        ("dtype", lambda c: c.dtype),
        ("shape", lambda c: c.shapes),
        ("reduce op", lambda c: c.op),
        ("root", lambda c: c.root),
    )
    for what, get in fields:
        if any(get(c) != get(first) for c in calls):
            return f"the calls differ in {what}"
    return extra_check(calls) if extra_check is not None else None


def chain(works: list[KbWork], result: Any) -> KbWork:
    """One Work for several: waits each in turn, then gives result."""

    def wait(defer: bool) -> Any:
        for w in works:
            w._finish(defer)
        return result

    return KbWork(wait)


# torch's stub gives ProcessGroup's collectives overloads from its C++ binding
# (a tensor list and an options object, as torch.distributed's functions
# call them; or a single tensor with op, root and timeout); this backend
# implements the first form, hence the type: ignore[override]s below.
class GroupMember(dist.ProcessGroup):
    """One rank's part of a group: its identity, and the meeting every
    collective goes through (record the call, meet the others, finish)."""

    def __init__(self, table: SpawnTable, info: GroupInfo, group_rank: int, global_rank: int) -> None:
        _compat.init_process_group_base(self, group_rank, len(info.ranks))
        _funcol.install()  # functional collectives on fake and meta tensors reach the group too
        self._table = table
        self._info = info
        self._grank = group_rank
        self._global = global_rank
        self._seq = 0
        self._p2p_seq: collections.Counter[tuple[int | None, int]] = collections.Counter()

    # ---- identity ----------------------------------------------------------------
    def size(self) -> int:
        return len(self._info.ranks)

    def rank(self) -> int:
        return self._grank

    def getBackendName(self) -> str:
        return BACKEND

    def name(self) -> str:
        return BACKEND

    @property
    def group_name(self) -> GroupName:
        return cast("GroupName", self._info.name)

    def __repr__(self) -> str:
        return f"KbProcessGroup(group={self._info.name!r} rank={self._grank} size={self.size()})"

    # ---- the meeting ---------------------------------------------------------------
    def _call(
        self,
        kind: str,
        inputs: Any,
        *,
        dtype: str | None,
        shapes: tuple[Any, ...],
        numel: int,
        nbytes: int,
        op: str | None = None,
        root: int | None = None,
        extra: Any = None,
        data: str = "real",
    ) -> Call:
        timing = self._table.timing
        t = timing.arrive(self._global) if timing is not None else None
        return Call(kind, self._global, dtype, shapes, op, root, call_site(), numel, nbytes, inputs, extra, t, data)

    def _call_of(
        self,
        kind: str,
        inputs: Callable[[], Any],
        compared: Sequence[torch.Tensor],
        sent: Sequence[torch.Tensor] | None = None,
        *,
        outputs: Sequence[torch.Tensor] = (),
        shapes: tuple[Any, ...] | None = None,
        op: str | None = None,
        root: int | None = None,
        extra: Any = None,
    ) -> Call:
        """A call described by its tensors, the one place that does it: the
        members compare compared's dtype (its first tensor's) and shapes
        (unless shapes says what to compare), and the engine prices what
        this member contributes, sent (compared unless given), by its size
        (real or abstract alike). Every tensor of the call (outputs too)
        holds real values, or every one is abstract (``call_data``), which
        is checked before inputs() makes what the call brings (copies, or
        the tensors a reduction reads): a FakeTensorMode refuses an op on a
        real tensor."""
        priced = compared if sent is None else sent
        data = call_data(kind, [*compared, *priced, *outputs])
        with Uncounted():  # (the backend's work, not the rank's: see _collective)
            brought = inputs()
        return self._call(
            kind,
            brought,
            dtype=dtype_name(compared[0]) if compared else None,
            shapes=tuple(tuple(t.shape) for t in compared) if shapes is None else shapes,
            numel=sum(t.numel() for t in priced),
            nbytes=sum(t.numel() * t.element_size() for t in priced),
            op=op,
            root=root,
            extra=extra,
            data=data,
        )

    def _collective(
        self,
        call: Call,
        compute: Callable[[list[Call]], dict[int, Any]],
        finish: Callable[[Any], None],
        result: Any,
        *,
        bumped: Sequence[torch.Tensor] = (),
        gloo_kind: str | None = None,
        check: Callable[[Sequence[Call]], str | None] = same,
    ) -> KbWork:
        """Meet with call; the last member to arrive computes every
        member's part, and this member's Work, once the drain completed the
        collective, writes its part into its outputs (finish), moves the
        version counters of the outputs bumped as gloo does (GLOO_BUMPS of
        gloo_kind, the call's kind unless given) and gives result.

        A call of abstract tensors (meta or fake; the check makes every
        member's the same) computes and writes nothing: its outputs exist
        already, each in its own rank's mode or on meta, with the shapes
        the check compared; only the version counters move, as for real."""
        bumps = GLOO_BUMPS.get(gloo_kind or call.kind, 0)
        real = call.data == "real"

        # What the backend does (copies, the reduction, writing the outputs)
        # is not the rank's compute: gloo does it below the dispatcher, where
        # no FLOP counter, roofline or memory mode sees it. Here it runs on
        # some member's thread, so it runs Uncounted.
        def computed(calls: list[Call]) -> dict[int, Any]:
            with Uncounted():
                return compute(calls) if real else to_all(calls, None)

        def done(part: Any) -> Any:
            if real:
                with Uncounted():
                    finish(part)
            bump(bumped, bumps)
            return result

        return self._meet(call, check, computed, done)

    def _meet(
        self,
        call: Call,
        check: Callable[[Sequence[Call]], str | None],
        compute: Callable[[list[Call]], dict[int, Any]],
        finish: Callable[[Any], Any],
    ) -> KbWork:
        """Arrive with call; the Work waits for the drain, then finish(result)."""
        if call.root is not None and not 0 <= call.root < self.size():
            raise ValueError(
                f"kbthreads.torch: {call.kind}: root {call.root} is not a rank of this group (size {self.size()})"
            )
        seq = self._seq
        self._seq += 1
        table = self._table

        def checked(calls: Sequence[Call]) -> str | None:
            why = check(calls)
            if why is None:
                return None
            return (
                f"kbthreads.torch: mismatched collective #{seq} on group {self._info.name!r} "
                f"(ranks {self._info.ranks}): {why}\n"
                + "\n".join(f"  rank {self._info.ranks[i]}: {c.describe()}" for i, c in enumerate(calls))
            )

        m = table.arrive(self._info, seq, self._grank, call, checked, compute)
        what = f"{call.describe()} (collective #{seq} on group {self._info.name!r})"

        def wait(defer: bool) -> Any:
            table.wait(self._global, m, what)
            assert m.results is not None
            r = finish(m.results[self._grank])
            if table.timing is not None:
                table.timing.settle(self._global, m.handle, defer)
            return r

        return KbWork(wait, ready=lambda: table.done(m))

    # ---- what every collective checks ---------------------------------------------------
    def _tensors(self, ts: Sequence[Any], what: str) -> list[torch.Tensor]:
        return [check_tensor(t, what) for t in ts]

    def _reduce_op(self, opts: Any, dtype: torch.dtype) -> tuple[str, Any]:
        """The reduce op opts names (SUM without opts) as (name, premul
        factor), once checked against dtype."""
        name, factor = _ops.op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        why = _ops.check_reduce_op(name, dtype)
        if why:
            raise ValueError(f"kbthreads.torch: {why}")
        return name, factor

    @staticmethod
    def _root(opts: Any) -> int:
        return int(opts.rootRank) if opts is not None else 0


def to_all(calls: Sequence[Call], part: Any) -> dict[int, Any]:
    """Every member's part: the same part."""
    return {g: part for g in range(len(calls))}


def to_root(calls: Sequence[Call], root: int, part: Any) -> dict[int, Any]:
    """Every member's part: part for the root, None for the others."""
    return {g: (part if g == root else None) for g in range(len(calls))}
