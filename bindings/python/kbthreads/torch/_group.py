# SPDX-License-Identifier: MIT
"""KbProcessGroup: a ``torch.distributed`` process group whose collectives
meet in the spawn's table (``_meeting.py``) and complete through the
context's engine. One object per rank and group, created by the backend
creator ``_create`` that ``_world.py`` routes every CPU backend name to
inside a spawn.

Each method records the calling rank's part (its inputs, copied where a
result refers to them; ``_tensors.py``), returns a Work, and, for the last
member to arrive, checks the calls and computes every member's result
(``_ops.py``). ``Work.wait()`` parks the rank until the drain completed the
collective and copies its result into its outputs. Sends and receives are
checked and recorded here and matched by the spawn's mailbox (``_p2p.py``)."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist

from . import _compat, _ops
from ._meeting import Call, GroupInfo, SpawnTable, call_site
from ._p2p import Mailbox
from ._tensors import GLOO_BUMPS, check_tensor, dtype_name, live, snap, write
from ._work import KbWork, done_work

if TYPE_CHECKING:
    from torch.distributed.distributed_c10d import GroupName

BACKEND = "kbthreads"


def _same(calls: Sequence[Call], extra_check: Callable[[Sequence[Call]], str | None] | None = None) -> str | None:
    """None when every call agrees on kind, dtype, shapes, op and root."""
    first = calls[0]
    fields: tuple[tuple[str, Callable[[Call], object]], ...] = (
        ("kind", lambda c: c.kind),
        ("dtype", lambda c: c.dtype),
        ("shape", lambda c: c.shapes),
        ("reduce op", lambda c: c.op),
        ("root", lambda c: c.root),
    )
    for what, get in fields:
        if any(get(c) != get(first) for c in calls):
            return f"the calls differ in {what}"
    return extra_check(calls) if extra_check is not None else None


# torch's stub gives ProcessGroup's collectives overloads from its C++ binding
# (a tensor list and an options object, as torch.distributed's functions
# call them; or a single tensor with op, root and timeout); this backend
# implements the first form, hence the type: ignore[override]s below.
class KbProcessGroup(dist.ProcessGroup):
    def __init__(self, table: SpawnTable, info: GroupInfo, group_rank: int, global_rank: int) -> None:
        _compat.init_process_group_base(self, group_rank, len(info.ranks))
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
    ) -> Call:
        timing = self._table.timing
        t = timing.arrive(self._global) if timing is not None else None
        return Call(kind, self._global, dtype, shapes, op, root, call_site(), numel, nbytes, inputs, extra, t)

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

    # ---- collectives ----------------------------------------------------------------
    def _tensors(self, ts: Sequence[Any], what: str) -> list[torch.Tensor]:
        return [check_tensor(t, what) for t in ts]

    def _reduce_op(self, op: Any, dtype: torch.dtype) -> tuple[str, Any]:
        name, factor = _ops.op_name(op)
        why = _ops.check_reduce_op(name, dtype)
        if why:
            raise ValueError(f"kbthreads.torch: {why}")
        return name, factor

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:  # type: ignore[override]
        return self._allreduce(tensors, opts, 0)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:
        return self._allreduce(tensors, opts, GLOO_BUMPS["all_reduce_coalesced"])

    def _allreduce(self, tensors: list[torch.Tensor], opts: Any, bumps: int) -> KbWork:
        ts = self._tensors(tensors, "all_reduce's tensor")
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        name, factor = self._reduce_op(op, ts[0].dtype)
        call = self._call(
            "all_reduce",
            [live(t) for t in ts],
            dtype=dtype_name(ts[0]),
            shapes=tuple(tuple(t.shape) for t in ts),
            numel=sum(t.numel() for t in ts),
            nbytes=sum(t.numel() * t.element_size() for t in ts),
            op=name,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            res = [_ops.reduce([c.inputs[i] for c in calls], name, factor) for i in range(len(ts))]
            return {g: res for g in range(len(calls))}

        def finish(res: list[torch.Tensor]) -> list[torch.Tensor]:
            for t, r in zip(ts, res):
                write(t, r, bumps)
            return ts

        return self._meet(call, _same, compute, finish)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:  # type: ignore[override]
        ts = self._tensors(tensors, "broadcast's tensor")
        root = opts.rootRank if opts is not None else 0
        me = self._grank == root
        call = self._call(
            "broadcast",
            [snap(t) for t in ts] if me else None,
            dtype=dtype_name(ts[0]),
            shapes=tuple(tuple(t.shape) for t in ts),
            numel=sum(t.numel() for t in ts) if me else 0,
            nbytes=sum(t.numel() * t.element_size() for t in ts) if me else 0,
            root=root,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {g: calls[root].inputs for g in range(len(calls))}

        def finish(res: list[torch.Tensor]) -> list[torch.Tensor]:
            if not me:
                for t, r in zip(ts, res):
                    write(t, r)
            return ts

        return self._meet(call, _same, compute, finish)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:  # type: ignore[override]
        ts = self._tensors(tensors, "reduce's tensor")
        root = opts.rootRank if opts is not None else 0
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        name, factor = self._reduce_op(op, ts[0].dtype)
        call = self._call(
            "reduce",
            [live(t) for t in ts],
            dtype=dtype_name(ts[0]),
            shapes=tuple(tuple(t.shape) for t in ts),
            numel=sum(t.numel() for t in ts),
            nbytes=sum(t.numel() * t.element_size() for t in ts),
            op=name,
            root=root,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            res = [_ops.reduce([c.inputs[i] for c in calls], name, factor) for i in range(len(ts))]
            return {g: (res if g == root else None) for g in range(len(calls))}

        def finish(res: list[torch.Tensor] | None) -> list[torch.Tensor]:
            if res is not None:
                for t, r in zip(ts, res):
                    write(t, r)
            return ts

        return self._meet(call, _same, compute, finish)

    def allgather(  # type: ignore[override]
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        ins = self._tensors(inputs, "all_gather's input")
        n = self.size()
        for outs in output_lists:
            if len(outs) != n:
                raise ValueError(
                    f"kbthreads.torch: all_gather's output list has {len(outs)} tensors for a group of {n}"
                )
            self._tensors(outs, "all_gather's output")
        call = self._call(
            "all_gather",
            [snap(t) for t in ins],
            dtype=dtype_name(ins[0]),
            shapes=tuple(tuple(t.shape) for t in ins),
            numel=sum(t.numel() for t in ins),
            nbytes=sum(t.numel() * t.element_size() for t in ins),
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {g: [c.inputs for c in calls] for g in range(len(calls))}

        def finish(res: list[list[torch.Tensor]]) -> list[list[torch.Tensor]]:
            for i, outs in enumerate(output_lists):
                for j, o in enumerate(outs):
                    write(
                        o,
                        res[j][i].view_as(o) if res[j][i].numel() == o.numel() else res[j][i],
                        GLOO_BUMPS["all_gather"],
                    )
            return output_lists

        return self._meet(call, _same, compute, finish)

    def allgather_coalesced(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        n = self.size()
        # torch's layout here: output_lists[rank][i] receives rank's inputs[i]
        ins = self._tensors(inputs, "all_gather_coalesced's input")
        call = self._call(
            "all_gather_coalesced",
            [snap(t) for t in ins],
            dtype=dtype_name(ins[0]),
            shapes=tuple(tuple(t.shape) for t in ins),
            numel=sum(t.numel() for t in ins),
            nbytes=sum(t.numel() * t.element_size() for t in ins),
        )
        if len(output_lists) != n:
            raise ValueError(f"kbthreads.torch: all_gather_coalesced needs {n} output lists")

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {g: [c.inputs for c in calls] for g in range(len(calls))}

        def finish(res: list[list[torch.Tensor]]) -> Any:
            for j, outs in enumerate(output_lists):
                for i, o in enumerate(outs):
                    write(o, res[j][i], GLOO_BUMPS["all_gather_coalesced"])
            return output_lists

        return self._meet(call, _same, compute, finish)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> KbWork:
        check_tensor(output, "all_gather_into_tensor's output")
        check_tensor(input, "all_gather_into_tensor's input")
        n = self.size()
        if output.numel() != n * input.numel():
            raise ValueError(
                f"kbthreads.torch: all_gather_into_tensor: output has {output.numel()} elements, "
                f"needs {n} x {input.numel()}"
            )
        if output.dtype != input.dtype:
            raise ValueError("kbthreads.torch: all_gather_into_tensor: output and input dtypes differ")
        call = self._call(
            "all_gather_into_tensor",
            live(input),
            dtype=dtype_name(input),
            shapes=(tuple(input.shape),),
            numel=input.numel(),
            nbytes=input.numel() * input.element_size(),
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            flat = torch.cat([c.inputs.reshape(-1) for c in calls])
            return {g: flat for g in range(len(calls))}

        def finish(flat: torch.Tensor) -> torch.Tensor:
            write(output, flat.view(output.shape), GLOO_BUMPS["all_gather_into_tensor"])
            return output

        return self._meet(call, _same, compute, finish)

    all_gather_single = _allgather_base

    # (the parameters have torch's names, which all_gather_single_coalesced shares)
    def allgather_into_tensor_coalesced(
        self, output_lists: list[torch.Tensor], input_list: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        works = [self._allgather_base(o, i, opts) for o, i in zip(output_lists, input_list)]
        return _chain(works, output_lists)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def gather(  # type: ignore[override]
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        ins = self._tensors(inputs, "gather's input")
        root = opts.rootRank if opts is not None else 0
        n = self.size()
        if self._grank == root:
            if len(output_lists) != 1 or len(output_lists[0]) != n:
                raise ValueError(f"kbthreads.torch: gather's root needs a list of {n} output tensors")
            self._tensors(output_lists[0], "gather's output")
        call = self._call(
            "gather",
            [snap(t) for t in ins],
            dtype=dtype_name(ins[0]),
            shapes=tuple(tuple(t.shape) for t in ins),
            numel=sum(t.numel() for t in ins),
            nbytes=sum(t.numel() * t.element_size() for t in ins),
            root=root,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {g: ([c.inputs[0] for c in calls] if g == root else None) for g in range(len(calls))}

        def finish(res: list[torch.Tensor] | None) -> Any:
            if res is not None:
                for o, r in zip(output_lists[0], res):
                    write(o, r, GLOO_BUMPS["gather"])
            return output_lists

        return self._meet(call, _same, compute, finish)

    def scatter(  # type: ignore[override]
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any = None
    ) -> KbWork:
        outs = self._tensors(outputs, "scatter's output")
        root = opts.rootRank if opts is not None else 0
        n = self.size()
        me = self._grank == root
        if me:
            if len(input_lists) != 1 or len(input_lists[0]) != n:
                raise ValueError(f"kbthreads.torch: scatter's root needs a list of {n} input tensors")
            ins = self._tensors(input_lists[0], "scatter's input")
        call = self._call(
            "scatter",
            [snap(t) for t in ins] if me else None,
            dtype=dtype_name(outs[0]),
            shapes=tuple(tuple(t.shape) for t in outs),
            numel=sum(t.numel() for t in ins) if me else 0,
            nbytes=sum(t.numel() * t.element_size() for t in ins) if me else 0,
            root=root,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {g: calls[root].inputs[g] for g in range(len(calls))}

        def finish(r: torch.Tensor) -> Any:
            write(outs[0], r)
            return outs

        return self._meet(call, _same, compute, finish)

    def reduce_scatter(  # type: ignore[override]
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any = None
    ) -> KbWork:
        outs = self._tensors(outputs, "reduce_scatter's output")
        n = self.size()
        if len(input_lists) != 1 or len(input_lists[0]) != n:
            raise ValueError(f"kbthreads.torch: reduce_scatter needs a list of {n} input tensors")
        ins = self._tensors(input_lists[0], "reduce_scatter's input")
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        name, factor = self._reduce_op(op, ins[0].dtype)
        call = self._call(
            "reduce_scatter",
            [live(t) for t in ins],
            dtype=dtype_name(ins[0]),
            shapes=tuple(tuple(t.shape) for t in ins),
            numel=sum(t.numel() for t in ins),
            nbytes=sum(t.numel() * t.element_size() for t in ins),
            op=name,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {g: _ops.reduce([c.inputs[g] for c in calls], name, factor) for g in range(len(calls))}

        def finish(r: torch.Tensor) -> Any:
            write(outs[0], r, GLOO_BUMPS["reduce_scatter"])
            return outs

        return self._meet(call, _same, compute, finish)

    def _reduce_scatter_base(self, outputTensor: torch.Tensor, inputTensor: torch.Tensor, opts: Any = None) -> KbWork:
        output, input = outputTensor, inputTensor  # (torch's names, which reduce_scatter_single shares)
        check_tensor(output, "reduce_scatter_tensor's output")
        check_tensor(input, "reduce_scatter_tensor's input")
        n = self.size()
        if input.numel() != n * output.numel():
            raise ValueError(
                f"kbthreads.torch: reduce_scatter_tensor: input has {input.numel()} elements, "
                f"needs {n} x {output.numel()}"
            )
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        name, factor = self._reduce_op(op, input.dtype)
        call = self._call(
            "reduce_scatter_tensor",
            live(input),
            dtype=dtype_name(input),
            shapes=(tuple(input.shape),),
            numel=input.numel(),
            nbytes=input.numel() * input.element_size(),
            op=name,
        )

        def compute(calls: list[Call]) -> dict[int, Any]:
            parts = [c.inputs.reshape(-1).chunk(n) for c in calls]
            return {g: _ops.reduce([p[g] for p in parts], name, factor) for g in range(n)}

        def finish(r: torch.Tensor) -> torch.Tensor:
            write(output, r.view(output.shape), GLOO_BUMPS["reduce_scatter_tensor"])
            return output

        return self._meet(call, _same, compute, finish)

    reduce_scatter_single = _reduce_scatter_base

    # (the parameters have torch's names, which reduce_scatter_single_coalesced shares)
    def reduce_scatter_tensor_coalesced(
        self, outputTensors: list[torch.Tensor], inputTensors: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputTensors, inputTensors)]
        return _chain(works, outputTensors)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None) -> KbWork:
        n = self.size()
        if len(outputs) != n or len(inputs) != n:
            raise ValueError(f"kbthreads.torch: all_to_all needs {n} input and {n} output tensors")
        outs = self._tensors(outputs, "all_to_all's output")
        ins = self._tensors(inputs, "all_to_all's input")
        call = self._call(
            "all_to_all",
            [snap(t) for t in ins],
            dtype=dtype_name(ins[0]),
            shapes=(),
            numel=sum(t.numel() for t in ins),
            nbytes=sum(t.numel() * t.element_size() for t in ins),
            extra=[tuple(t.shape) for t in outs],
        )

        def sizes_agree(calls: Sequence[Call]) -> str | None:
            for i, ci in enumerate(calls):
                for j, cj in enumerate(calls):
                    if tuple(cj.inputs[i].shape) != ci.extra[j]:
                        return (
                            f"rank {self._info.ranks[j]} sends {list(cj.inputs[i].shape)} to rank "
                            f"{self._info.ranks[i]}, which expects {list(ci.extra[j])}"
                        )
            return None

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {i: [calls[j].inputs[i] for j in range(n)] for i in range(n)}

        def finish(res: list[torch.Tensor]) -> Any:
            for o, r in zip(outs, res):
                write(o, r, GLOO_BUMPS["all_to_all"])
            return outs

        return self._meet(call, lambda cs: _same(cs, sizes_agree), compute, finish)

    def alltoall_base(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int] | None,
        input_split_sizes: list[int] | None,
        opts: Any = None,
    ) -> KbWork:
        check_tensor(output, "all_to_all_single's output")
        check_tensor(input, "all_to_all_single's input")
        n = self.size()
        for what, t, s in (("input", input, input_split_sizes), ("output", output, output_split_sizes)):
            if s:
                if len(s) != n or any(x < 0 for x in s):
                    raise ValueError(
                        f"kbthreads.torch: all_to_all_single: {what}_split_sizes {list(s)} needs {n} sizes >= 0"
                    )
                if sum(s) != (t.shape[0] if t.dim() else 1):
                    raise ValueError(
                        f"kbthreads.torch: all_to_all_single: {what}_split_sizes add up to {sum(s)}, "
                        f"the {what} has {t.shape[0] if t.dim() else 1} rows"
                    )
            elif t.dim() and t.shape[0] % n:
                raise ValueError(
                    f"kbthreads.torch: all_to_all_single: the {what}'s {t.shape[0]} rows do not divide among {n} ranks"
                )
        pieces = _ops.chunks(snap(input), input_split_sizes, n)
        want = [tuple(p.shape) for p in _ops.chunks(output, output_split_sizes, n)]
        call = self._call(
            "all_to_all_single",
            pieces,
            dtype=dtype_name(input),
            shapes=(tuple(input.shape[1:]),),
            numel=input.numel(),
            nbytes=input.numel() * input.element_size(),
            extra=want,
        )

        def sizes_agree(calls: Sequence[Call]) -> str | None:
            for i, ci in enumerate(calls):
                for j, cj in enumerate(calls):
                    if tuple(cj.inputs[i].shape) != ci.extra[j]:
                        return (
                            f"rank {self._info.ranks[j]} sends {cj.inputs[i].shape[0] if cj.inputs[i].dim() else 1}"
                            f" rows to rank {self._info.ranks[i]}, which expects "
                            f"{ci.extra[j][0] if ci.extra[j] else 1}"
                        )
            return None

        def compute(calls: list[Call]) -> dict[int, Any]:
            return {i: [calls[j].inputs[i] for j in range(n)] for i in range(n)}

        def finish(res: list[torch.Tensor]) -> torch.Tensor:
            write(output, torch.cat([r.reshape(-1) for r in res]).view(output.shape))
            return output

        return self._meet(call, lambda cs: _same(cs, sizes_agree), compute, finish)

    # torch's all_to_all_single overloads name their parameters differently
    all_to_all_single = alltoall_base  # type: ignore[assignment]

    def barrier(self, opts: Any = None) -> KbWork:
        call = self._call("barrier", None, dtype=None, shapes=(), numel=0, nbytes=0)
        return self._meet(call, _same, lambda calls: {g: None for g in range(len(calls))}, lambda r: [])

    # ---- point to point ---------------------------------------------------------------
    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> KbWork:
        """Eager: the data is copied at once and the send completes; the
        receiver's recv meets it (the engine sees one "send" per match)."""
        (t,) = self._tensors(tensors, "send's tensor")
        if not 0 <= dst < self.size() or dst == self._grank:
            raise ValueError(f"kbthreads.torch: send: destination {dst} is not another rank of this group")
        call = self._call(
            "send",
            snap(t),
            dtype=dtype_name(t),
            shapes=(tuple(t.shape),),
            numel=t.numel(),
            nbytes=t.numel() * t.element_size(),
        )
        self._mailbox().post(self._info, self._grank, dst, tag, call)
        return done_work([t])

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> KbWork:
        (t,) = self._tensors(tensors, "recv's tensor")
        if not 0 <= src < self.size() or src == self._grank:
            raise ValueError(f"kbthreads.torch: recv: source {src} is not another rank of this group")
        return self._recv(src, tag, t)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> KbWork:
        (t,) = self._tensors(tensors, "recv's tensor")
        return self._recv(None, tag, t)

    def _recv(self, src: int | None, tag: int, t: torch.Tensor) -> KbWork:
        """A recv from group rank src (None: any source), the n-th on its
        (source, tag) channel in this rank."""
        seq = self._p2p_seq[(src, tag)]
        self._p2p_seq[(src, tag)] += 1
        call = self._call(
            "recv",
            None,
            dtype=dtype_name(t),
            shapes=(tuple(t.shape),),
            numel=t.numel(),
            nbytes=t.numel() * t.element_size(),
            root=src,
        )
        return self._mailbox().take(self._info, seq, self._global, src, self._grank, tag, t, call)

    def _mailbox(self) -> Mailbox:
        tb = self._table
        if tb.mailbox is None:
            tb.mailbox = Mailbox(tb)
        mailbox: Mailbox = tb.mailbox
        return mailbox


def _chain(works: list[KbWork], result: Any) -> KbWork:
    def wait(defer: bool) -> Any:
        for w in works:
            w._finish(defer)
        return result

    return KbWork(wait)
