# SPDX-License-Identifier: MIT
"""The compute models of simulated time, read from spawn's arguments:
what a rank's compute between two of its events costs (docs/torch-time.md,
"Compute").

- "flops" (the default): the FLOPs the rank's FlopCounterMode counted,
  divided by ``device_flops``; without ``device_flops`` compute is free;
- "roofline": each op ``max(flops / device_flops, bytes / device_bandwidth)``
  (``_roofline.py``);
- "cpu_time": the rank thread's CPU time times ``cpu_factor``;
- a function ``(rank, flops, cpu_seconds) -> seconds``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _flops, _roofline

ComputeFn = Callable[[int, int, float], float]


@dataclass(frozen=True)
class ComputeModel:
    """name ("none", "flops", "roofline", "cpu_time" or "custom"); fn(rank,
    flops, cpu_seconds) -> seconds for the models priced per span (None for
    the roofline, priced per op by its counting mode)."""

    name: str
    fn: ComputeFn | None
    rate: float | None = None  # FLOP/s
    bandwidth: float | None = None  # bytes/s (the roofline's)

    def start_counter(self) -> Any:
        """The rank's FLOP counter, entered on the calling thread (None
        where the model counts nothing)."""
        if self.name == "roofline":
            assert self.rate is not None and self.bandwidth is not None
            return _roofline.start_counter(self.rate, self.bandwidth)
        if self.name in ("flops", "custom"):
            return _flops.start_counter()
        return None

    def describe(self) -> str:
        if self.name == "roofline":
            return f"roofline(device_flops={self.rate!r}, device_bandwidth={self.bandwidth!r})"
        return self.name


def _rate(name: str, value: Any, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"kbthreads.torch.spawn: {name} must be a positive number of {unit}, not {value!r}")
    return float(value)


def compute_model(
    device_flops: float | None, compute: Any, cpu_factor: float, device_bandwidth: float | None = None
) -> ComputeModel:
    """spawn's compute arguments, checked (ValueError naming the problem)."""
    if compute is None:
        compute = "flops"
    if device_bandwidth is not None and compute != "roofline":
        raise ValueError("kbthreads.torch.spawn: device_bandwidth is the roofline's (compute='roofline')")
    if callable(compute):
        return ComputeModel("custom", compute)
    if compute == "flops":
        if device_flops is None:
            return ComputeModel("none", lambda r, f, c: 0.0)
        rate = _rate("device_flops", device_flops, "FLOP/s")
        return ComputeModel("flops", lambda r, f, c: f / rate, rate)
    if compute == "roofline":
        if device_flops is None or device_bandwidth is None:
            raise ValueError(
                "kbthreads.torch.spawn: compute='roofline' needs device_flops (FLOP/s) and device_bandwidth (bytes/s)"
            )
        return ComputeModel(
            "roofline",
            None,
            _rate("device_flops", device_flops, "FLOP/s"),
            _rate("device_bandwidth", device_bandwidth, "bytes per second"),
        )
    if compute == "cpu_time":
        if isinstance(cpu_factor, bool) or not isinstance(cpu_factor, (int, float)) or not cpu_factor >= 0:
            raise ValueError(f"kbthreads.torch.spawn: cpu_factor must be a number >= 0, not {cpu_factor!r}")
        return ComputeModel("cpu_time", lambda r, f, c: c * cpu_factor)
    raise ValueError(
        f"kbthreads.torch.spawn: compute must be 'flops', 'roofline', 'cpu_time' or a function "
        f"(rank, flops, cpu_seconds) -> seconds, not {compute!r}"
    )
