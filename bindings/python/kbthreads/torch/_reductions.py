# SPDX-License-Identifier: MIT
"""The reducing collectives of KbProcessGroup: all_reduce (and coalesced),
reduce, reduce_scatter, reduce_scatter_tensor (and coalesced). Each is its
checks, what the last member to arrive computes (every member's inputs
reduced in group-rank order, ``_ops.py``) and how a member writes its part;
the call and the meeting are GroupMember's (``_member.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from . import _ops
from ._meeting import Call
from ._member import GroupMember, chain, to_all, to_root
from ._tensors import check_tensor, live, write, write_all
from ._work import KbWork


def _reduce_each(calls: Sequence[Call], name: str, factor: Any) -> list[torch.Tensor]:
    """The members' i-th inputs reduced, for each i (the inputs are lists)."""
    return [_ops.reduce([c.inputs[i] for c in calls], name, factor) for i in range(len(calls[0].inputs))]


# (the type: ignore[override]s: see GroupMember)
class Reductions(GroupMember):
    """KbProcessGroup's reducing collectives."""

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:  # type: ignore[override]
        return self._allreduce(tensors, opts, "all_reduce")

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:
        return self._allreduce(tensors, opts, "all_reduce_coalesced")

    def _allreduce(self, tensors: list[torch.Tensor], opts: Any, gloo_kind: str) -> KbWork:
        ts = self._tensors(tensors, "all_reduce's tensor")
        name, factor = self._reduce_op(opts, ts[0].dtype)
        return self._collective(
            self._call_of("all_reduce", lambda: [live(t) for t in ts], ts, op=name),
            lambda calls: to_all(calls, _reduce_each(calls, name, factor)),
            lambda res: write_all(ts, res),
            ts,
            bumped=ts,
            gloo_kind=gloo_kind,
        )

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:  # type: ignore[override]
        ts = self._tensors(tensors, "reduce's tensor")
        root = self._root(opts)
        name, factor = self._reduce_op(opts, ts[0].dtype)
        return self._collective(
            self._call_of("reduce", lambda: [live(t) for t in ts], ts, op=name, root=root),
            lambda calls: to_root(calls, root, _reduce_each(calls, name, factor)),
            lambda res: None if res is None else write_all(ts, res),
            ts,
        )

    def reduce_scatter(  # type: ignore[override]
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any = None
    ) -> KbWork:
        outs = self._tensors(outputs, "reduce_scatter's output")
        n = self.size()
        if len(input_lists) != 1 or len(input_lists[0]) != n:
            raise ValueError(f"kbthreads.torch: reduce_scatter needs a list of {n} input tensors")
        ins = self._tensors(input_lists[0], "reduce_scatter's input")
        name, factor = self._reduce_op(opts, ins[0].dtype)
        return self._collective(
            self._call_of("reduce_scatter", lambda: [live(t) for t in ins], ins, outputs=outs, op=name),
            lambda calls: dict(enumerate(_reduce_each(calls, name, factor))),
            lambda r: write(outs[0], r),
            outs,
            bumped=outs[:1],
        )

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
        name, factor = self._reduce_op(opts, input.dtype)

        def compute(calls: list[Call]) -> dict[int, Any]:
            parts = [c.inputs.reshape(-1).chunk(n) for c in calls]
            return {g: _ops.reduce([p[g] for p in parts], name, factor) for g in range(n)}

        return self._collective(
            self._call_of("reduce_scatter_tensor", lambda: live(input), [input], outputs=[output], op=name),
            compute,
            lambda r: write(output, r.view(output.shape)),
            output,
            bumped=[output],
        )

    reduce_scatter_single = _reduce_scatter_base

    # (the parameters have torch's names, which reduce_scatter_single_coalesced shares)
    def reduce_scatter_tensor_coalesced(
        self, outputTensors: list[torch.Tensor], inputTensors: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputTensors, inputTensors)]
        return chain(works, outputTensors)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
