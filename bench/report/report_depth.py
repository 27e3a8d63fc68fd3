# SPDX-License-Identifier: MIT
"""The report's section on the depth job (issue 30), for bench/report/report.py:
the cost of one yield against the depth of C frames at the suspension
point, the Python binding against greenlet, the ratio at every depth and
the crossover depth; the plot is report_plots.py's (bench-depth.png).

Figures (bench/harness/jobs_depth.py, bench/python/depth_model.py): depth_<D>, impls
kbthreads_py (py_bench.py depth) and greenlet (peer_greenlet.py depth),
pin 0, N = the plan's depth N (8).
"""
from __future__ import annotations

from typing import List, Optional

from bench_shared import fmt_ratio
from report_context import ReportContext, Results, md_table, ratio

PREFIX = "depth_"
KB, GREENLET = "kbthreads_py", "greenlet"
DEFAULT_N = 8  # results files whose params do not record the depth job's N


def depth_n(R: Results) -> int:
    return int((R.d["params"].get("depth") or {}).get("n", DEFAULT_N))


def depths(R: Results) -> List[int]:
    """The depths measured in this run, ascending (from the figures' names)."""
    found = {int(r["bench"][len(PREFIX):]) for r in R.d["summary"]
             if r["bench"].startswith(PREFIX) and r["bench"][len(PREFIX):].isdigit()}
    return sorted(found)


def med(R: Results, impl: str, depth: int) -> Optional[float]:
    return R.med(PREFIX + str(depth), impl, 0, depth_n(R))


def crossover(R: Results) -> Optional[int]:
    """The smallest measured depth where kbthreads' median is below greenlet's, or None."""
    for d in depths(R):
        kb, gr = med(R, KB, d), med(R, GREENLET, d)
        if kb is not None and gr is not None and kb < gr:
            return d
    return None


def crossover_line(R: Results) -> str:
    """The crossover as one sentence, naming any deeper depth where greenlet is faster again (noise)."""
    ds = depths(R)
    c = crossover(R)
    if c is None:
        return "**Crossover: none up to D = %d**: greenlet's median is below kbthreads' at every depth." % ds[-1]
    again = [d for d in ds if d > c and (med(R, KB, d) or 0) >= (med(R, GREENLET, d) or float("inf"))]
    tail = ("; greenlet is faster again at D = %s" % ", ".join(str(d) for d in again)) if again else \
        ", and at every deeper depth measured"
    return ("**Crossover: D = %d**, the smallest measured depth where kbthreads' median is below greenlet's%s."
            % (c, tail))


def write(ctx: ReportContext) -> None:
    """Append the section (nothing when the run has no depth figures)."""
    R, w = ctx.results, ctx.w
    ds = depths(R)
    if not ds:
        return
    n = depth_n(R)
    w("### Switch cost against the depth of C frames")
    w("")
    w("Per yield (one switch away from the rank and back), median (min–max) of the runs: N = %d ranks, each "
      "yielding from inside D nested C calls that call back into Python (`list(map(f, [0]))` per level, "
      "`bench/python/depth_model.py`), through the binding (`py_bench.py depth`) and on greenlet (`peer_greenlet.py "
      "depth`). A greenlet switch copies the slice of the C stack the rank uses out and in again, so its cost "
      "grows with D; a kbthreads rank keeps its own thread's stack." % n)
    w("")
    w("![per yield against the depth of C frames](bench-depth.png)")
    w("")
    rows = []
    for d in ds:
        key = PREFIX + str(d)
        rows.append([str(d), R.cell(key, KB, 0, n), R.cell(key, GREENLET, 0, n),
                     fmt_ratio(ratio(med(R, GREENLET, d), med(R, KB, d)))])
    w(md_table(["D (C levels)", "kbthreads (Python)", "greenlet (Python)", "greenlet / kbthreads"], rows))
    w("")
    w(crossover_line(R))
    w("")
