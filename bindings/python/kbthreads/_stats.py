# SPDX-License-Identifier: MIT
"""A spawn's statistics (kb_spawn_stats): ProcessContext.stats and
Context.last_stats."""

from __future__ import annotations

from dataclasses import dataclass

from ._loader import accel as _accel


@dataclass(frozen=True)
class SpawnStats:
    """What a spawn did, as libkbthreads counts it (``kb_spawn_stats``).

    ``wait_mode`` is how a suspended rank waited at the end ("sleep", "look",
    "nudge" or "spin"); ``wait_reactive`` says whether the mode adapted to
    what handoffs cost (the default; ``KB_WAIT_POLICY`` forces a fixed
    mode), ``wait_switches`` how often it changed its choice, and
    ``wait_ns`` its last figure per mode in wall nanoseconds per handoff (0:
    never measured): a mode much faster than ``wait_mode`` there is worth
    forcing with ``KB_WAIT_POLICY``.
    """

    rounds: int
    turns: int
    handoffs: int
    drains: int
    engine_waits: int
    collectives: int
    wall_ns: int
    wait_mode: str
    wait_reactive: bool
    wait_switches: int
    wait_ns: dict[str, int]


def read(pc: int) -> SpawnStats:
    """kb_process_context_stats of a live process context."""
    return SpawnStats(*_accel.process_context_stats(pc))
