#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Compare two results files of bench/harness/run.py, figure by figure.

    compare.py OLD.json NEW.json [--only WORD ...]

For every figure (bench, impl, pin, N, unit) in both files' "summary":
the old and the new median, new / old, and whether the two differ beyond
noise: "slower" when the new run's fastest repetition is slower than the
old run's slowest, "faster" the other way round, blank when their ranges
overlap. A figure in one file only is counted, not shown. --only keeps
the figures whose bench or impl is one of the words.

Two files of separate runs compare (a `make bench` in each checkout), and
so do the two that one `make bench BENCH_BASELINE_SRC=<checkout>` run
writes: bench/results/<kind>-baseline-latest.json (the baseline build's
figures under the new build's names) against <kind>-latest.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

# bench/harness/ for bench_shared (the runner's and the report's shared formatting)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_shared import fmt_ratio, fmt_val  # noqa: E402

Key = Tuple[str, str, int, int, str]
Row = Dict[str, Any]


def figures(data: Dict[str, Any]) -> Dict[Key, Row]:
    return {(r["bench"], r["impl"], r["pin"], r["n"], r["unit"]): r for r in data["summary"]}


def beyond_noise(old: Row, new: Row) -> str:
    """"slower" / "faster" when the two runs' ranges do not overlap (lower is better for every unit but ranks)."""
    higher_is_better = old["unit"] == "ranks"
    if new["min"] > old["max"]:
        return "faster" if higher_is_better else "slower"
    if new["max"] < old["min"]:
        return "slower" if higher_is_better else "faster"
    return ""


def comparison(old: Dict[str, Any], new: Dict[str, Any], only: Optional[Sequence[str]] = None) -> List[List[str]]:
    """The rows: figure, impl, pin, N, old median, new median, new / old, beyond noise."""
    a, b = figures(old), figures(new)
    rows = []
    for key in sorted(set(a) & set(b)):
        if only and key[0] not in only and key[1] not in only:
            continue
        o, n = a[key], b[key]
        r = n["median"] / o["median"] if o["median"] else None
        rows.append([key[0], key[1], str(key[2]), str(key[3]), fmt_val(o["median"], key[4], terminal=True),
                     fmt_val(n["median"], key[4], terminal=True), fmt_ratio(r), beyond_noise(o, n)])
    return rows


def print_comparison(old: Dict[str, Any], new: Dict[str, Any], old_name: str, new_name: str,
                     only: Optional[Sequence[str]] = None) -> None:
    rows = comparison(old, new, only)
    print("%s (old) against %s (new): %d figure(s) in both" % (old_name, new_name, len(rows)))
    fmt = "%-13s %-24s %3s %6s %12s %12s %8s  %s"
    print(fmt % ("figure", "impl", "pin", "N", "old median", "new median", "new/old", "beyond noise"))
    for row in rows:
        print(fmt % tuple(row))
    slower = [r for r in rows if r[7] == "slower"]
    print("%d figure(s) slower beyond noise, %d faster" % (len(slower), sum(1 for r in rows if r[7] == "faster")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--only", nargs="*", default=None, help="figures whose bench or impl is one of these")
    a = ap.parse_args()
    with open(a.old) as f:
        old = json.load(f)
    with open(a.new) as f:
        new = json.load(f)
    print_comparison(old, new, a.old, a.new, a.only)


if __name__ == "__main__":
    main()
