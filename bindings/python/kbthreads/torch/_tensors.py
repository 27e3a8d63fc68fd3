# SPDX-License-Identifier: MIT
"""A collective's tensors: the checks every input and output passes, the
copies a result refers to, and writing results into outputs as gloo does
(its version-counter moves included). Used by the collectives
(``_group.py``) and point-to-point (``_p2p.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def check_tensor(t: Any, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"kbthreads.torch: {what} must be a torch.Tensor, not {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(
            f"kbthreads.torch: {what} is on {t.device}; the kbthreads backend serves CPU tensors only "
            "(move it to the CPU, or run this program with a GPU backend outside kbthreads)"
        )
    if t.layout != torch.strided:
        raise ValueError(f"kbthreads.torch: {what} has layout {t.layout}; only dense (strided) tensors are supported")
    return t


def snap(t: torch.Tensor) -> torch.Tensor:
    """A copy of an input whose values a result refers to (gathers,
    broadcasts, scatters, all-to-all, sends)."""
    return t.detach().clone()


def write(dst: torch.Tensor, src: torch.Tensor, bumps: int = 0) -> None:
    """Write src's values into the output dst as gloo does, below autograd:
    no graph records it, so a leaf that requires grad may be an output.
    ``dst.data`` is an alias of dst's memory with a version counter of its
    own, so dst's counter (shared with the tensor dst views and its other
    views) moves by ``bumps`` only: what ProcessGroupGloo's own copies add,
    measured per collective (GLOO_BUMPS). An inference tensor, which has
    no counter, is written in inference mode, the only mode that may."""
    if dst.is_inference():
        with torch.inference_mode():
            dst.copy_(src)
        return
    dst.data.copy_(src)
    if _increment_version is not None:
        for _ in range(bumps):
            _increment_version(dst)


def write_all(outputs: Sequence[torch.Tensor], parts: Sequence[torch.Tensor], bumps: int = 0) -> None:
    """write each part into its output."""
    for dst, src in zip(outputs, parts):
        write(dst, src, bumps)


# torch's public way to move a version counter (a PyTorch 2.x without it: the
# counters of the kinds below stay where they are, as for the others)
_increment_version: Callable[[torch.Tensor], None] | None = getattr(torch.autograd.graph, "increment_version", None)


# How far gloo moves an output's version counter, per output tensor (PyTorch
# 2.13's ProcessGroupGloo: the kinds that gather into a flat buffer copy out
# of it with ATen below autograd; all_reduce, broadcast, reduce, scatter,
# all_to_all_single, recv write in place and move nothing). A saved tensor
# later overwritten by one of these fails backward's check as under gloo.
GLOO_BUMPS = {
    "all_gather": 1,
    "all_gather_coalesced": 1,
    "all_gather_into_tensor": 2,
    "gather": 1,
    "reduce_scatter": 1,
    "reduce_scatter_tensor": 1,
    "all_to_all": 1,
    "all_reduce_coalesced": 1,
}


def live(t: torch.Tensor) -> torch.Tensor:
    """An input a reduction reads when the last member arrives, into new
    tensors: no copy needed (an async caller that changes it before then
    changes the result, the same way every run)."""
    return t.detach()
