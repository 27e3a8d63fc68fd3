# SPDX-License-Identifier: MIT
"""A collective's tensors: the checks every input and output passes, the
copies a result refers to, and writing results into outputs as gloo does
(its version-counter moves included). Used by the collectives
(``_group.py``) and point-to-point (``_p2p.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def is_abstract(t: torch.Tensor) -> bool:
    """True for a tensor that holds no values: a meta tensor, or a fake
    tensor (a FakeTensorMode's, whose storage, behind the device it reports,
    is a meta storage). A collective of them reads and writes nothing. A
    tensor whose storage cannot be asked for (some wrapper subclasses) is
    taken as real, as before fake tensors were told apart."""
    if t.is_meta:
        return True
    try:
        return t.untyped_storage().device.type == "meta"
    except (RuntimeError, NotImplementedError):
        return False


def tensor_data(t: torch.Tensor) -> str:
    """What a tensor holds, as a call records it: "real" values, or none
    ("meta", "fake")."""
    if not is_abstract(t):
        return "real"
    return "meta" if t.is_meta else "fake"


def call_data(kind: str, tensors: Iterable[torch.Tensor]) -> str:
    """What every tensor of one call holds (real, meta or fake: see
    tensor_data); a call that mixes them is refused, since a result could
    then be neither read nor written."""
    seen: dict[str, torch.Tensor] = {}
    for t in tensors:
        seen.setdefault(tensor_data(t), t)
    if len(seen) > 1:
        kinds = sorted(seen, key=("real", "fake", "meta").index)
        what = ", ".join(f"{d} ({dtype_name(seen[d])} {list(seen[d].shape)})" for d in kinds)
        raise ValueError(
            f"kbthreads.torch: {kind} mixes {' and '.join(kinds)} tensors in one call: {what}; a collective's "
            "tensors are all real, all meta, or all fake tensors of the rank's FakeTensorMode"
        )
    return next(iter(seen), "real")


def check_tensor(t: Any, what: str) -> torch.Tensor:
    """t, a dense tensor a collective can take: with values on the CPU, or
    abstract (meta, or fake on whatever device it reports: there is nothing
    to move)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"kbthreads.torch: {what} must be a torch.Tensor, not {type(t).__name__}")
    if t.layout != torch.strided:
        raise ValueError(f"kbthreads.torch: {what} has layout {t.layout}; only dense (strided) tensors are supported")
    if t.device.type != "cpu" and not is_abstract(t):
        raise ValueError(
            f"kbthreads.torch: {what} is on {t.device}; the kbthreads backend serves CPU tensors only "
            "(move it to the CPU, or run this program with a GPU backend outside kbthreads)"
        )
    return t


def snap(t: torch.Tensor) -> torch.Tensor:
    """A copy of an input whose values a result refers to (gathers,
    broadcasts, scatters, all-to-all, sends)."""
    return t.detach().clone()


def write(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Write src's values into the output dst as gloo does, below autograd:
    no graph records it, so a leaf that requires grad may be an output.
    ``dst.data`` is an alias of dst's memory with a version counter of its
    own, so dst's counter (shared with the tensor dst views and its other
    views) stays where it is; the collective moves it as gloo does
    (``bump``). An inference tensor is written in inference mode, the only
    mode that may."""
    if dst.is_inference():
        with torch.inference_mode():
            dst.copy_(src)
        return
    dst.data.copy_(src)


def bump(outputs: Iterable[torch.Tensor], times: int) -> None:
    """Move each output's version counter by times: what ProcessGroupGloo's
    own copies add, measured per collective (GLOO_BUMPS), so that a saved
    tensor later overwritten by a collective fails backward's check as
    under gloo. The same for abstract outputs, which are never written: a
    fake or meta run of a program fails where its real run would. An
    inference tensor has no counter."""
    if _increment_version is None or times == 0:
        return
    for t in outputs:
        if not t.is_inference():
            for _ in range(times):
                _increment_version(t)


def write_all(outputs: Sequence[torch.Tensor], parts: Sequence[torch.Tensor]) -> None:
    """write each part into its output."""
    for dst, src in zip(outputs, parts):
        write(dst, src)


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
