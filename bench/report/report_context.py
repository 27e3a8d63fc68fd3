# SPDX-License-Identifier: MIT
"""What every section of the report receives and shares, for bench/report/report.py
and its section modules (report_floors_peers.py, report_python.py,
report_batons.py, report_best_config.py, report_simulation.py,
report_load.py).

A section is a function of a ReportContext: it reads the results through
its lookups and appends its lines with w(). The lookups more than one
section uses (LABELS, CONFIGS) and the markdown helpers live here, not in
report.py, so that a section module never needs report.py itself
(report.py imports the sections, so the other way round would be circular).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench_shared import BUSY_SHARE, fmt_val

# One figure of the results' "summary": bench, impl, pin, n, unit, median,
# min, max, count, others_cpu, flagged, ... (bench/harness/aggregate.py: summarize).
Row = Dict[str, Any]

# How the report's tables name each implementation.
LABELS = {
    "kbthreads": "libkbthreads",
    "kbthreads_spread": "libkbthreads, spread",
    "futex_ring": "futex ring",
    "sem_ring": "semaphore ring",
    "cond_bcast": "mutex + condvar broadcast",
    "swapcontext": "swapcontext (1 thread)",
    "greenlet": "greenlet (Python)",
    "kbthreads_join": "libkbthreads, timed kb_join",
    "kbthreads_py": "kbthreads (Python)",
    "kbthreads_py_ctypes": "kbthreads (Python, ctypes only)",
    "kbthreads_py_look": "kbthreads (Python), KB_WAIT_POLICY=look",
    "kbthreads_py_nudge": "kbthreads (Python), KB_WAIT_POLICY=nudge",
    "kbthreads_py_sleep": "kbthreads (Python), KB_WAIT_POLICY=sleep",
    "kbthreads_py_spin": "kbthreads (Python), KB_WAIT_POLICY=spin",
    "simgrid_thread": "SimGrid thread factory",
    "simgrid_raw": "SimGrid raw factory",
}

# The libkbthreads configurations the targets are checked for, in the order of
# the report's rows: (tag, impl, pin). Each is compared with the floors of the
# same pin. "spread" is the KB_AFFINITY_SPREAD spawn option (kb_bench
# --spread): its threads do not share one CPU, so its figures have pin 0 and
# it is held to the unpinned floors.
CONFIGS = [("unpinned", "kbthreads", 0), ("spread", "kbthreads_spread", 0), ("pinned", "kbthreads", 1)]
CONFIG_PIN = {tag: pin for tag, _, pin in CONFIGS}
CONFIG_IMPL = {tag: impl for tag, impl, _ in CONFIGS}


class Results:
    """A results file of bench/harness/run.py with lookups by (bench, impl, pin, N)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.d = data
        self.rows: Dict[Tuple[str, str, int, int], Row] = {}
        for r in data["summary"]:
            self.rows[(r["bench"], r["impl"], r["pin"], r["n"])] = r
        self.ns: List[int] = data["params"]["ns"]

    def get(self, bench: str, impl: str, pin: int, n: int) -> Optional[Row]:
        return self.rows.get((bench, impl, pin, n))

    def med(self, bench: str, impl: str, pin: int, n: int) -> Optional[float]:
        r = self.get(bench, impl, pin, n)
        return r["median"] if r else None

    def has(self, bench: str, impl: str, pin: Optional[int] = None) -> bool:
        """Whether the figure was measured at some N (with this pin, when given)."""
        return any(k[0] == bench and k[1] == impl and (pin is None or k[2] == pin) for k in self.rows)

    def busy_share(self) -> float:
        """The share of the CPUs above which others made a figure busy: the run's,
        or the shared default for results files written before it was recorded."""
        return self.d.get("busy_share", BUSY_SHARE)

    def busy(self, r: Row) -> bool:
        """Measured while other processes used the CPUs (the hog and side-by-side
        sections load the machine on purpose: not counted)."""
        if r["impl"].endswith(("_hog", "_pair")):
            return False
        return r.get("others_cpu", 0.0) > self.busy_share()

    def cell(self, bench: str, impl: str, pin: int, n: int) -> str:
        """"median (min–max)" of a figure, † when it was busy; "–" when not measured."""
        r = self.get(bench, impl, pin, n)
        if not r:
            return "–"
        return "%s (%s–%s)%s" % (fmt_val(r["median"], r["unit"]), fmt_val(r["min"], r["unit"]),
                                 fmt_val(r["max"], r["unit"]), " †" if self.busy(r) else "")

    def floor(self, pin: int, n: int) -> Tuple[Optional[float], Optional[str]]:
        """The faster of the futex and the semaphore ring (median, impl)."""
        c = [(self.med("handoff", k, pin, n), k) for k in ("futex_ring", "sem_ring")]
        c = [x for x in c if x[0] is not None]
        return min(c) if c else (None, None)


@dataclass
class ReportContext:
    """What a section needs: the results and the report's lines so far."""
    results: Results
    lines: List[str] = field(default_factory=list)
    # When set, written above every table (a line starting with "|" after a
    # line that is not one): how the table was made (report.py: provenance).
    caption: str | None = None

    def w(self, line: str) -> None:
        """Append one line (or several, joined by newlines) to the report."""
        if self.caption and line.startswith("|") and not (self.lines and self.lines[-1].startswith("|")):
            self.lines.append(self.caption)
            self.lines.append("")
        self.lines.append(line)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; every cell through str()."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def verdict(ok: Optional[bool]) -> str:
    """A target's verdict cell: met, not met, or not measured (None)."""
    return {True: "**met**", False: "**not met**", None: "not measured"}[ok]


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b, or None when either is missing (or b is 0)."""
    return a / b if a is not None and b else None


def busy_figures(R: Results) -> Tuple[List[Row], List[Row]]:
    """(the timed figures, those of them measured while others used the CPUs)."""
    timed = [r for r in R.d["summary"] if r["bench"] != "maxn"]
    return timed, [r for r in timed if R.busy(r)]

