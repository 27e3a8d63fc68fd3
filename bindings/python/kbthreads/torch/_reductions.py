# SPDX-License-Identifier: MIT
"""The reducing collectives of KbProcessGroup: all_reduce (and coalesced),
reduce, reduce_scatter, reduce_scatter_tensor (and coalesced). Each
records its call, and the last member to arrive reduces every member's
inputs in group-rank order (``_ops.py``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from . import _ops
from ._meeting import Call
from ._member import GroupMember, chain, same
from ._tensors import GLOO_BUMPS, check_tensor, dtype_name, live, write
from ._work import KbWork


# (the type: ignore[override]s: see GroupMember)
class Reductions(GroupMember):
    """KbProcessGroup's reducing collectives."""

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

    reduce_scatter_single = _reduce_scatter_base

    # (the parameters have torch's names, which reduce_scatter_single_coalesced shares)
    def reduce_scatter_tensor_coalesced(
        self, outputTensors: list[torch.Tensor], inputTensors: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputTensors, inputTensors)]
        return chain(works, outputTensors)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
