# SPDX-License-Identifier: MIT
"""The report's section on Python ranks and timed joins (issue 12), for
bench/report/report.py: the figures side by side, their ratios and the targets.

Figures (bench/harness/jobs_loops.py: python_jobs): per yield, per wait (+ drain) and per
collective, at every N, of
  kbthreads            the C loop through kb_spawn (kb_bench)
  kbthreads_join       the same loop driven by kb_start + kb_join(pc, JOIN_SLICE_MS) slices
  kbthreads_py         the loop in Python through the binding (its compiled part)
  greenlet             the greenlet peer in the reference's shape (bench/python/peer_greenlet.py)
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from bench_shared import JOIN_SLICE_MS, fmt_ratio
from report_context import ReportContext, Results, md_table, verdict
from targets import limit

# (n, median a, median b, a / b, ok): one N of a target.
TargetRow = Tuple[int, Optional[float], Optional[float], Optional[float], Optional[bool]]

BENCHES = ("yield", "wait", "collective")
IMPLS = [
    ("kbthreads", "C, kb_spawn"),
    ("kbthreads_join", "C, timed kb_join (%d ms slices)" % JOIN_SLICE_MS),
    ("kbthreads_py", "Python, the binding"),
    ("greenlet", "greenlet (Python, the reference's shape)"),
]
PY_AT_GREENLET_NS = (1, 2)  # Python yield held to greenlet here, to the C library at the other Ns


def targets(R: Results) -> List[Tuple[str, List[TargetRow], Optional[bool]]]:
    """[(text, [(n, a, b, ratio, ok)], ok)] for the issue's targets."""
    def rows(bench_a: str, impl_a: str, bench_b: str, impl_b: str, limit: float,
             ns: Sequence[int]) -> List[TargetRow]:
        out = []
        for n in ns:
            a, b = R.med(bench_a, impl_a, 0, n), R.med(bench_b, impl_b, 0, n)
            r = a / b if a is not None and b else None
            out.append((n, a, b, r, None if r is None else r <= limit))
        return out

    def ok(rs: Sequence[TargetRow]) -> Optional[bool]:
        measured = [x[4] for x in rs if x[4] is not None]
        return all(measured) if measured else None

    ns = list(R.ns)
    big = [n for n in ns if n not in PY_AT_GREENLET_NS]
    t = []
    for bench in ("yield", "wait"):
        rs = rows(bench, "kbthreads_join", bench, "kbthreads", limit("join_vs_spawn"), ns)
        t.append(("C, timed kb_join (%d ms slices) per %s ≤ %gx kb_spawn, every N"
                  % (JOIN_SLICE_MS, bench, limit("join_vs_spawn")),
                  rs, ok(rs)))
    pg, pc = limit("py_vs_greenlet"), limit("py_vs_c")
    rs = rows("yield", "kbthreads_py", "yield", "greenlet", pg, [n for n in ns if n in PY_AT_GREENLET_NS])
    t.append(("Python yield ≤ %.1fx greenlet, N = %s" % (pg, ", ".join(str(n) for n in PY_AT_GREENLET_NS)),
              rs, ok(rs)))
    rs = rows("yield", "kbthreads_py", "yield", "kbthreads", pc, big)
    t.append(("Python yield ≤ %gx the C library's, N = %s" % (pc, ", ".join(str(n) for n in big)), rs, ok(rs)))
    for bench in ("wait", "collective"):
        rs = rows(bench, "kbthreads_py", bench, "kbthreads", pc, ns)
        t.append(("Python %s ≤ %gx the C library's, every N" % (bench, pc), rs, ok(rs)))
    return t


def write(ctx: ReportContext) -> None:
    """Append the section to the report (nothing when the run has no Python or timed-join figures)."""
    R, w = ctx.results, ctx.w
    if not any(R.has(b, "kbthreads_py") or R.has(b, "kbthreads_join") for b in BENCHES):
        return
    w("### Python ranks and timed joins")
    w("")
    w("Per operation, median (min–max) of the runs: the same loop of N ranks (kb_bench's) in C through "
      "`kb_spawn`, in C through `kb_start` and `kb_join(pc, %d, NULL)` until it returns 1 (as the Python "
      "binding drives every spawn), in Python through the binding (`bench/python/py_bench.py`, "
      "`ctx.multiprocessing.spawn`, through its compiled extension), and the greenlet peer. Wait: "
      "`ctx.wait` on a fresh handle, completed by the engine in the drain; collective: a collective "
      "submitted then waited for, completed in the drain's phase (b)." % JOIN_SLICE_MS)
    w("")
    write_figures(ctx)
    write_ratios(ctx)
    write_targets(ctx)


def write_figures(ctx: ReportContext) -> None:
    """A table per operation: every implementation's figures against N."""
    R, w = ctx.results, ctx.w
    for bench in BENCHES:
        rows = [[label] + [R.cell(bench, impl, 0, n) for n in R.ns] for impl, label in IMPLS if R.has(bench, impl, 0)]
        if rows:
            w("Per %s:" % bench)
            w("")
            w(md_table(["N"] + [str(n) for n in R.ns], rows))
            w("")


# The ratios shown, per operation: (label, numerator impl, denominator impl).
RATIO_PAIRS = [("timed kb_join / kb_spawn", "kbthreads_join", "kbthreads"),
               ("Python / C (kb_spawn)", "kbthreads_py", "kbthreads"),
               ("Python / greenlet", "kbthreads_py", "greenlet")]


def write_ratios(ctx: ReportContext) -> None:
    """The ratios of the medians, every operation and pair both measured."""
    R, w = ctx.results, ctx.w
    w("Ratios (medians of this run):")
    w("")
    rows = []
    for bench in BENCHES:
        for label, a, b in RATIO_PAIRS:
            if R.has(bench, a, 0) and R.has(bench, b, 0):
                cells = []
                for n in R.ns:
                    x, y = R.med(bench, a, 0, n), R.med(bench, b, 0, n)
                    cells.append(fmt_ratio(x / y if x is not None and y else None))
                rows.append(["%s: %s" % (bench, label)] + cells)
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")


def write_targets(ctx: ReportContext) -> None:
    """Issue 12's targets with their verdicts."""
    R, w = ctx.results, ctx.w
    summary = []
    for text, rs, ok in targets(R):
        measured = ", ".join("N=%d %s" % (n, fmt_ratio(r)) for n, _, _, r, _ in rs if r is not None) or "–"
        summary.append([text, measured, verdict(ok)])
    w(md_table(["target (issue 12)", "measured (ratio of medians)", "verdict"], summary))
    w("")
