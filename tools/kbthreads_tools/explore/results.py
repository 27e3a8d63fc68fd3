# SPDX-License-Identifier: MIT
"""The result of an exploration: exit statuses, the --out directory, the
result file and the options it records."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

EXIT_NONE_FOUND = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
# No failure found, but the exploration stopped before the bound it was
# asked for (cut_short): a shorter search proves less than it was asked to.
EXIT_CUT_SHORT = 3

# The strategies with a bound to cover: --strategy delay (every schedule
# within --delays) and exhaustive (every order of the first k rounds). pct
# and seeded draw --runs samples, and have none.
BOUNDED = ("delay", "exhaustive")


def cut_short(strategy: str, stopped: str) -> bool:
    """Did an exploration that found no failure stop before its bound
    (--runs, --time-budget or --until-stale cut it)?"""
    return strategy in BOUNDED and stopped in ("runs", "time", "stale")


def no_failure_status(strategy: str, stopped: str) -> int:
    return EXIT_CUT_SHORT if cut_short(strategy, stopped) else EXIT_NONE_FOUND


RESULT_FORMAT = "kbthreads-explore-result 1"
RESULT_FILE = "result.json"
# The options a shard's result must share with the others to be merged.
MERGED_OPTIONS = ("command", "strategy", "runs", "depth", "timeout", "compare_output", "until_stale", "delays")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def prepare_out(out: str) -> str | None:
    """Create DIR and its runs/ folder, clear files an earlier exploration
    left there; why it cannot be written, or None."""
    try:
        for sub in ("runs", "shrink"):
            d = os.path.join(out, sub)
            os.makedirs(d, exist_ok=True)
            for name in os.listdir(d):
                if re.fullmatch(r"\d{4,}\.(schedule|recorded|out|err)", name):
                    os.unlink(os.path.join(d, name))
        for name in ("original.schedule", "shrunk.schedule", "replay.gdb", RESULT_FILE):
            if os.path.exists(os.path.join(out, name)):
                os.unlink(os.path.join(out, name))
        probe = os.path.join(out, ".kbthreads-explore-probe")
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError as e:
        return f"cannot write to --out {out}: {e.strerror or e}"
    return None


def write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


@dataclass
class Options:
    """What the report and the stop rules depend on (and merge compares)."""

    command: list[str]
    strategy: str
    runs: int | None  # None: no cap (--strategy delay without --runs)
    depth: int
    timeout: float
    compare_output: bool
    until_stale: int | None
    time_budget: float | None
    delays: int | None = None  # --strategy delay: the most delays (--delays)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)
