# SPDX-License-Identifier: MIT
"""What bench/harness/run.py (and its modules) and the report (bench/report/report*.py) share: the thresholds
both apply to the same results, and the formatting of the numbers.

Each value is defined here once so that the runner and the report cannot
drift apart: a figure the runner measured again as "busy" is the figure the
report marks with †, and the join slice the runner passed to kb_bench is the
one the report names.
"""
from __future__ import annotations

from typing import Optional

# A job during which other processes used more than this share of the
# machine's CPU time counts as busy: run.py measures it again
# (--retry-busy) and records the share in the results ("busy_share"); the
# report marks such figures † and uses this value for results files written
# before that key existed.
BUSY_SHARE = 0.15

# The timed kb_join slice, in ms, of the C figures "kbthreads_join": run.py
# passes it to kb_bench as `--join MS` (kb_bench.c has no value of its own),
# and the report names it. It mirrors the Python binding's timed-join slice
# (bindings/python), so that the C loop is driven the way the binding drives
# every spawn; change both together.
JOIN_SLICE_MS = 50


def fmt_ns(v: Optional[float], terminal: bool = False) -> str:
    """A time in ns, scaled to ns, µs or ms.

    The report (the default) gives 3 significant digits from 1 µs on. The
    terminal table of run.py (terminal=True) keeps its narrower style: ASCII
    "us", as a terminal or a log may not be UTF-8, and whole ns up to 10 µs.
    """
    if v is None:
        return "–"
    if v >= 1e6:
        return "%.2f ms" % (v / 1e6)
    if v >= 1e4:
        return "%.1f %s" % (v / 1e3, "us" if terminal else "µs")
    if v >= 1e3 and not terminal:
        return "%.2f µs" % (v / 1e3)
    return "%.0f ns" % v


def fmt_val(v: float, unit: str, terminal: bool = False) -> str:
    """A figure's value in its unit (ns, KiB or a count); terminal: as fmt_ns.

    The report writes whole counts without an exponent (1234567, not
    1.23457e+06); the terminal table has always used %g.
    """
    if unit == "ns":
        return fmt_ns(v, terminal)
    if unit == "KiB":
        return "%.1f KiB" % v
    if terminal:
        return "%g" % v
    return "%d" % v if float(v).is_integer() else "%g" % v


def fmt_ratio(r: Optional[float]) -> str:
    """A ratio of two figures, "1.23x"; below 0.1 two significant digits."""
    if r is None:
        return "–"
    return "%.2fx" % r if r >= 0.1 else "%.2gx" % r
