# SPDX-License-Identifier: MIT
"""kbthreads-torchrun's --network and --device-flops texts, read into the
numbers Network and spawn take (seconds, bytes per second, FLOP/s).

A launch line is read by people: ``latency=5us,bandwidth=25GB/s`` says
what ``Network(5e-6, 25e9)`` says. Units are case-sensitive where case
carries meaning (``B`` bytes, ``b`` bits; ``M`` mega, ``m`` milli); a bare
number is in the base unit (seconds, bytes per second, FLOP/s). Every
error names the text it could not read and what would have been read."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

# (bare number, unit) with optional spaces: "5us", "25 GB/s", "1.5e-6"
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\S*)\s*$")

# Scales are exact (Decimal) so that "5us" reads as the float nearest 5e-6, as 5e-6 does.
_SECONDS = {
    u: Decimal(s) for u, s in {"": "1", "s": "1", "ms": "1e-3", "us": "1e-6", "\u00b5s": "1e-6", "ns": "1e-9"}.items()
}

_DECIMAL = {p: Decimal(10) ** e for p, e in {"": 0, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15}.items()}
_BINARY = {p: Decimal(2) ** e for p, e in {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50}.items()}


def _bandwidth_units() -> dict[str, Decimal]:
    units: dict[str, Decimal] = {"": Decimal(1)}
    for prefix, scale in (_DECIMAL | _BINARY).items():
        units[f"{prefix}B/s"] = scale  # bytes
        for bits in (f"{prefix}b/s", f"{prefix}bit/s", f"{prefix}bps"):  # bits: 100Gb/s is 12.5 GB/s
            units[bits] = scale / 8
    return units


_BYTES_PER_SECOND = _bandwidth_units()
_FLOPS = {
    f"{prefix}{unit}": scale
    for prefix, scale in _DECIMAL.items()
    for unit in ("", "FLOP/s", "FLOPS", "flop/s", "flops")
    if prefix or unit
} | {"": Decimal(1)}

LATENCY_UNITS = "s, ms, us, ns"
BANDWIDTH_UNITS = "B/s with k, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (of 1024); b/s, bit/s or bps for bits"
FLOPS_UNITS = "k, M, G, T or P, optionally followed by FLOP/s or FLOPS"


class UnitError(ValueError):
    """A quantity that could not be read; the message says why."""


def quantity(text: str, units: dict[str, Decimal], what: str, names: str) -> float:
    """text (a number and an optional unit from units) in the base unit."""
    m = _NUMBER.match(text)
    if m is None or m.group(2) not in units:
        raise UnitError(f"{what}: cannot read {text!r} (a number and a unit: {names})")
    try:
        value = float(Decimal(m.group(1)) * units[m.group(2)])
    except ArithmeticError:  # an exponent beyond Decimal's range
        value = math.inf
    if not math.isfinite(value):
        raise UnitError(f"{what}: {text!r} is not a finite number")
    return value


def seconds(text: str, what: str) -> float:
    return quantity(text, _SECONDS, what, LATENCY_UNITS)


def bytes_per_second(text: str, what: str) -> float:
    value = quantity(text, _BYTES_PER_SECOND, what, BANDWIDTH_UNITS)
    if value <= 0:
        raise UnitError(f"{what}: {text!r} must be above zero")
    return value


def flops(text: str, what: str) -> float:
    value = quantity(text, _FLOPS, what, FLOPS_UNITS)
    if value <= 0:
        raise UnitError(f"{what}: {text!r} must be above zero")
    return value


@dataclass(frozen=True)
class NetworkSpec:
    """--network's fields, read; ranks_per_node None means "one node of
    --nproc-per-node ranks" (the launcher fills it in)."""

    latency: float
    bandwidth: float
    ranks_per_node: int | None = None
    inter_latency: float | None = None
    inter_bandwidth: float | None = None
    allreduce: str = "ring"


NETWORK_KEYS = "latency, bandwidth, ranks-per-node, inter-latency, inter-bandwidth, allreduce"


def network_spec(text: str) -> NetworkSpec:
    """``key=value,...`` (keys in NETWORK_KEYS, '-' or '_' alike) read;
    latency and bandwidth are required."""
    fields: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        key = key.strip().replace("_", "-")
        if not eq or not key or not value.strip():
            raise UnitError(f"--network: {item.strip()!r} is not key=value (keys: {NETWORK_KEYS})")
        if key not in NETWORK_KEYS.split(", "):
            raise UnitError(f"--network: unknown key {key!r} (keys: {NETWORK_KEYS})")
        if key in fields:
            raise UnitError(f"--network: {key} given twice")
        fields[key] = value.strip()
    missing = [k for k in ("latency", "bandwidth") if k not in fields]
    if missing:
        raise UnitError(f"--network: {' and '.join(missing)} missing (e.g. latency=5us,bandwidth=25GB/s)")
    rpn = fields.get("ranks-per-node")
    if rpn is not None and (not rpn.isdigit() or int(rpn) < 1):
        raise UnitError(f"--network: ranks-per-node must be a positive integer, not {rpn!r}")
    allreduce = fields.get("allreduce", "ring")
    if allreduce not in ("ring", "tree"):
        raise UnitError(f"--network: allreduce must be ring or tree, not {allreduce!r}")
    inter_lat = fields.get("inter-latency")
    inter_bw = fields.get("inter-bandwidth")
    if (inter_lat is None) != (inter_bw is None):
        raise UnitError("--network: inter-latency and inter-bandwidth go together (the link between nodes)")
    return NetworkSpec(
        latency=seconds(fields["latency"], "--network latency"),
        bandwidth=bytes_per_second(fields["bandwidth"], "--network bandwidth"),
        ranks_per_node=int(rpn) if rpn is not None else None,
        inter_latency=None if inter_lat is None else seconds(inter_lat, "--network inter-latency"),
        inter_bandwidth=None if inter_bw is None else bytes_per_second(inter_bw, "--network inter-bandwidth"),
        allreduce=allreduce,
    )
