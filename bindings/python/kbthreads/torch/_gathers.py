# SPDX-License-Identifier: MIT
"""The collectives of KbProcessGroup that move data without reducing it:
broadcast, all_gather (and coalesced, and into a tensor), gather, scatter,
all_to_all and all_to_all_single. Each records its call (inputs copied
where a result refers to them), and the last member to arrive lays out
every member's result in group-rank order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from . import _ops
from ._meeting import Call
from ._member import GroupMember, chain, same
from ._tensors import GLOO_BUMPS, check_tensor, dtype_name, live, snap, write
from ._work import KbWork


# (the type: ignore[override]s: see GroupMember)
class Gathers(GroupMember):
    """KbProcessGroup's collectives that move data without reducing it."""

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

    all_gather_single = _allgather_base

    # (the parameters have torch's names, which all_gather_single_coalesced shares)
    def allgather_into_tensor_coalesced(
        self, output_lists: list[torch.Tensor], input_list: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        works = [self._allgather_base(o, i, opts) for o, i in zip(output_lists, input_list)]
        return chain(works, output_lists)

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, same, compute, finish)

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

        return self._meet(call, lambda cs: same(cs, sizes_agree), compute, finish)

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

        return self._meet(call, lambda cs: same(cs, sizes_agree), compute, finish)

    # torch's all_to_all_single overloads name their parameters differently
    all_to_all_single = alltoall_base  # type: ignore[assignment]
