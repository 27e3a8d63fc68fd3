# SPDX-License-Identifier: MIT
"""A workaround a dry run on fake tensors needs, in the example only: the
pipeline's warm-up vote.

PyTorch 2.13's pipeline schedules open with a vote: each stage multiplies
an integer tensor received from its neighbour by its own vote (1 when it was
given its complete input and output metadata, as the example gives every
stage), sends it on, and the product travels back; each stage then reads it
with ``.item()``. A fake tensor has no value, so under FakeTensorMode that
read fails (``DataDependentOutputException`` on ``aten._local_scalar_dense``).
Every stage here votes 1, so the product is 1: the dispatch mode below,
entered above the rank's FakeTensorMode, answers that one read (a
one-element integer tensor read inside the schedule's warm-up) with 1 and
passes every other op on. With real tensors the example does not use it.
"""
from __future__ import annotations

import sys
from typing import Any

import torch
from torch.distributed.pipelining import schedules as pp_schedules
from torch.utils._python_dispatch import TorchDispatchMode


class AnswerPipelineVote(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default and _in_pipeline_warmup():
            (t,) = args
            if t.numel() == 1 and not t.is_floating_point():
                return 1
        return func(*args, **(kwargs or {}))


def _in_pipeline_warmup() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_warmup_p2p" and f.f_globals.get("__name__") == pp_schedules.__name__:
            return True
        f = f.f_back  # type: ignore[assignment]
    return False
