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
    "nudge" or "spin"); ``wait_reactive`` says whether the reactive wait
    policy chose it (the default; ``KB_WAIT_POLICY`` forces a fixed mode),
    ``wait_switches`` how often it changed its choice, ``wait_probes`` how
    often it tried another mode, and ``wait_ns`` its last estimate per mode
    in wall nanoseconds per handoff (0: never measured). ``wait_seats``
    counts the times a rank thread was moved onto its CPU when a stretch of
    nudges began, or onto one CPU for all when it ended (its affinity left
    as it was). docs/design.md, "the wait policy", says what is measured.
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
    wait_probes: int
    wait_ns: dict[str, int]
    wait_seats: int


def read(pc: int) -> SpawnStats:
    """kb_process_context_stats of a live process context."""
    return SpawnStats(*_accel.process_context_stats(pc))
