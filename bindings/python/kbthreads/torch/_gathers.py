# SPDX-License-Identifier: MIT
"""The collectives of KbProcessGroup that move data without reducing it:
broadcast, all_gather (and coalesced, and into a tensor), gather, scatter,
all_to_all and all_to_all_single. Each records its call (inputs copied
where a result refers to them), and the last member to arrive lays out
every member's result in group-rank order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _ops
from ._meeting import Call
from ._member import GroupMember, chain, same, to_all, to_root
from ._tensors import check_tensor, live, snap, write, write_all
from ._work import KbWork


def _inputs_to_all(calls: Sequence[Call]) -> dict[int, Any]:
    """Every member's part: every member's inputs, in group-rank order."""
    return to_all(calls, [c.inputs for c in calls])


def _pieces_to_each(calls: Sequence[Call]) -> dict[int, Any]:
    """Member i's part: the i-th piece of every member's inputs (all-to-all)."""
    return {i: [c.inputs[i] for c in calls] for i in range(len(calls))}


def _pieces_agree(
    wrong: Callable[[Call, Call, int, int], str],
) -> Callable[[Sequence[Call]], str | None]:
    """An all-to-all's check beyond ``same``: the piece member j sends to
    member i has the shape i expects from j (i's ``extra[j]``); wrong
    describes the first that has not."""

    def check(calls: Sequence[Call]) -> str | None:
        for i, ci in enumerate(calls):
            for j, cj in enumerate(calls):
                if tuple(cj.inputs[i].shape) != ci.extra[j]:
                    return wrong(ci, cj, i, j)
        return None

    return check


# (the type: ignore[override]s: see GroupMember)
class Gathers(GroupMember):
    """KbProcessGroup's collectives that move data without reducing it."""

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> KbWork:  # type: ignore[override]
        ts = self._tensors(tensors, "broadcast's tensor")
        root = self._root(opts)
        me = self._grank == root
        return self._collective(
            self._call_of("broadcast", lambda: [snap(t) for t in ts] if me else None, ts, ts if me else [], root=root),
            lambda calls: to_all(calls, calls[root].inputs),
            lambda res: None if me else write_all(ts, res),
            ts,
        )

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

        def finish(res: list[list[torch.Tensor]]) -> None:
            # output_lists[i][j] receives rank j's inputs[i] (shaped as the output when it holds as many)
            for i, outs in enumerate(output_lists):
                for j, o in enumerate(outs):
                    r = res[j][i]
                    write(o, r.view_as(o) if r.numel() == o.numel() else r)

        written = [o for row in output_lists for o in row]
        return self._collective(
            self._call_of("all_gather", lambda: [snap(t) for t in ins], ins, outputs=written),
            _inputs_to_all,
            finish,
            output_lists,
            bumped=written,
        )

    def allgather_coalesced(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> KbWork:
        n = self.size()
        ins = self._tensors(inputs, "all_gather_coalesced's input")
        if len(output_lists) != n:
            raise ValueError(f"kbthreads.torch: all_gather_coalesced needs {n} output lists")

        def finish(res: list[list[torch.Tensor]]) -> None:
            # torch's layout here: output_lists[rank][i] receives rank's inputs[i]
            for outs, got in zip(output_lists, res):
                write_all(outs, got)

        written = [o for row in output_lists for o in row]
        return self._collective(
            self._call_of("all_gather_coalesced", lambda: [snap(t) for t in ins], ins, outputs=written),
            _inputs_to_all,
            finish,
            output_lists,
            bumped=written,
        )

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
        return self._collective(
            self._call_of("all_gather_into_tensor", lambda: live(input), [input], outputs=[output]),
            lambda calls: to_all(calls, torch.cat([c.inputs.reshape(-1) for c in calls])),
            lambda flat: write(output, flat.view(output.shape)),
            output,
            bumped=[output],
        )

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
        root = self._root(opts)
        n = self.size()
        written: list[torch.Tensor] = []  # the root's outputs
        if self._grank == root:
            if len(output_lists) != 1 or len(output_lists[0]) != n:
                raise ValueError(f"kbthreads.torch: gather's root needs a list of {n} output tensors")
            written = self._tensors(output_lists[0], "gather's output")
        return self._collective(
            self._call_of("gather", lambda: [snap(t) for t in ins], ins, outputs=written, root=root),
            lambda calls: to_root(calls, root, [c.inputs[0] for c in calls]),
            lambda res: None if res is None else write_all(written, res),
            output_lists,
            bumped=written,
        )

    def scatter(  # type: ignore[override]
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any = None
    ) -> KbWork:
        outs = self._tensors(outputs, "scatter's output")
        root = self._root(opts)
        n = self.size()
        me = self._grank == root
        ins: list[torch.Tensor] = []
        if me:
            if len(input_lists) != 1 or len(input_lists[0]) != n:
                raise ValueError(f"kbthreads.torch: scatter's root needs a list of {n} input tensors")
            ins = self._tensors(input_lists[0], "scatter's input")
        # the members compare their outputs; the root sends its inputs
        return self._collective(
            self._call_of("scatter", lambda: [snap(t) for t in ins] if me else None, outs, ins, root=root),
            lambda calls: dict(enumerate(calls[root].inputs)),
            lambda r: write(outs[0], r),
            outs,
        )

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None) -> KbWork:
        n = self.size()
        if len(outputs) != n or len(inputs) != n:
            raise ValueError(f"kbthreads.torch: all_to_all needs {n} input and {n} output tensors")
        outs = self._tensors(outputs, "all_to_all's output")
        ins = self._tensors(inputs, "all_to_all's input")

        def wrong(ci: Call, cj: Call, i: int, j: int) -> str:
            return (
                f"rank {self._info.ranks[j]} sends {list(cj.inputs[i].shape)} to rank "
                f"{self._info.ranks[i]}, which expects {list(ci.extra[j])}"
            )

        # the shapes each member expects from each are its extra: the check is _pieces_agree's
        return self._collective(
            self._call_of(
                "all_to_all",
                lambda: [snap(t) for t in ins],
                ins,
                outputs=outs,
                shapes=(),
                extra=[tuple(t.shape) for t in outs],
            ),
            _pieces_to_each,
            lambda res: write_all(outs, res),
            outs,
            bumped=outs,
            check=lambda calls: same(calls, _pieces_agree(wrong)),
        )

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
        want = _ops.chunk_shapes(tuple(output.shape), output_split_sizes, n)

        def rows(shape: Sequence[int]) -> int:
            return shape[0] if shape else 1

        def wrong(ci: Call, cj: Call, i: int, j: int) -> str:
            return (
                f"rank {self._info.ranks[j]} sends {rows(cj.inputs[i].shape)} rows to rank "
                f"{self._info.ranks[i]}, which expects {rows(ci.extra[j])}"
            )

        # the members compare their rows' shape; the pieces each expects from each are its extra
        return self._collective(
            self._call_of(
                "all_to_all_single",
                lambda: _ops.chunks(snap(input), input_split_sizes, n),
                [input],
                outputs=[output],
                shapes=(tuple(input.shape[1:]),),
                extra=want,
            ),
            _pieces_to_each,
            lambda res: write(output, torch.cat([r.reshape(-1) for r in res]).view(output.shape)),
            output,
            check=lambda calls: same(calls, _pieces_agree(wrong)),
        )

    # torch's all_to_all_single overloads name their parameters differently
    all_to_all_single = alltoall_base  # type: ignore[assignment]
