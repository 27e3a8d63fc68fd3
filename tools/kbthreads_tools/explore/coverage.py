# SPDX-License-Identifier: MIT
"""Coverage: distinct schedules and the orders tried per round index."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from .results import RESULT_FILE
from .schedule_file import Section

# Coverage keeps the orders of the first COVERAGE_ROUNDS rounds of each
# spawn, ORDERS_CAP at most per round index, so its memory and the result
# file stay bounded on long programs and many runs.
COVERAGE_ROUNDS = 1000
ORDERS_CAP = 1000  # distinct orders counted per round index; "1000+" beyond


def orders_of(sections: list[Section]) -> list[list[list[int]]]:
    """The orders coverage counts: every spawn's first COVERAGE_ROUNDS rounds."""
    return [s.rounds[:COVERAGE_ROUNDS] for s in sections]


def order_key(order: list[int]) -> str:
    return hashlib.blake2b(" ".join(map(str, order)).encode(), digest_size=8).hexdigest()


class Coverage:
    """Distinct schedules, distinct orders per round index (the first
    COVERAGE_ROUNDS rounds of each spawn, at most ORDERS_CAP orders each),
    and how many runs in a row (the last ones) added no new schedule.

    Each order is kept with the number of the run that first took it (0:
    the baseline), so that merge can count the orders of the runs up to any
    run from the shards' counts alone: the first ORDERS_CAP orders of a
    round in run order are the same whichever process saw them."""

    def __init__(self) -> None:
        self.schedules: set[str] = set()
        self.first: dict[tuple[int, int], dict[str, tuple[int, int]]] = {}  # key -> (run, ranks)
        self.stale = 0

    def add(self, number: int, digest: str, orders: list[list[list[int]]] | None, is_run: bool = True) -> None:
        new = digest not in self.schedules
        self.schedules.add(digest)
        if is_run:
            self.stale = 0 if new else self.stale + 1
        for si, spawn in enumerate(orders or ()):
            for ri, order in enumerate(spawn[:COVERAGE_ROUNDS]):
                seen = self.first.setdefault((si, ri), {})
                if len(seen) < ORDERS_CAP:
                    seen.setdefault(order_key(order), (number, len(order)))

    def take_orders(self, saved: list[dict[str, Any]], upto: int) -> None:
        """A shard's saved orders that runs up to `upto` took first."""
        for entry in saved:
            seen = self.first.setdefault((entry["spawn"] - 1, entry["round"] - 1), {})
            for key, (number, ranks) in sorted(entry["first"].items(), key=lambda kv: kv[1][0]):
                if number <= upto and (key in seen or len(seen) < ORDERS_CAP):
                    seen[key] = min(seen.get(key, (number, ranks)), (number, ranks))

    def rounds(self) -> list[dict[str, Any]]:
        rows = []
        for (si, ri), seen in sorted(self.first.items()):
            if seen:
                exist = math.factorial(max(ranks for _, ranks in seen.values()))
                rows.append(
                    {
                        "spawn": si + 1,
                        "round": ri + 1,
                        "tried": len(seen),
                        "exist": exist,
                        "capped": len(seen) >= ORDERS_CAP and exist > ORDERS_CAP,
                    }
                )
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "distinct_schedules": len(self.schedules),
            "runs_in_a_row_with_nothing_new": self.stale,
            "rounds": self.rounds(),
            "orders": [
                {"spawn": si + 1, "round": ri + 1, "first": {k: list(v) for k, v in seen.items()}}
                for (si, ri), seen in sorted(self.first.items())
            ],
        }


def exist_text(n: int) -> str:
    return str(n) if n < 10**9 else f"{n:.3g}".replace("e+", "e")


def coverage_lines(cov: Coverage, shown: int = 24) -> list[str]:
    rows = cov.rounds()
    several = len({r["spawn"] for r in rows}) > 1
    items = [
        (f"spawn {r['spawn']} " if several else "")
        + f"round {r['round']} {r['tried']}{'+' if r['capped'] else ''}/{exist_text(r['exist'])}"
        for r in rows
    ]
    lines = [f"coverage: orders tried per round (of those that exist): {', '.join(items[:shown])}"]
    if len(items) > shown:
        lines[0] += f", ... ({len(items) - shown} more rounds in {RESULT_FILE})"
    return lines
