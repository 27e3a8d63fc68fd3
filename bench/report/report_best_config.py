# SPDX-License-Identifier: MIT
"""The report's section on the default options against the best of the
library's own configurations at every N on an idle machine (wall and CPU
time per operation), for bench/report/report.py.

Figures (bench/harness/jobs_loops.py): kb_bench yield and wait, per
operation (yield, wait) and the process's CPU time over the same interval
(yield_cpu, wait_cpu), of
  kbthreads, pin 0     default options
  kbthreads, pin 1     --pin (KB_AFFINITY_ONE_CPU)
  kbthreads_spread     --spread (KB_AFFINITY_SPREAD)
  kbthreads_taskset    default options, the whole process on one CPU (as `taskset -c 0`)
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from bench_shared import fmt_ns, fmt_ratio
from report_context import ReportContext, Results, md_table, verdict
from targets import limit

OPS = ("yield", "wait")
# (label, impl, pin): the library's own configurations the default is held to.
BEST_OF = [("`--pin`", "kbthreads", 1), ("`--spread`", "kbthreads_spread", 0), ("taskset", "kbthreads_taskset", 0)]
DEFAULT_LIMIT = limit("default_vs_best")  # default / best, every N
WAIT_N1_LIMIT_NS = limit("wait_n1")  # a wait at N=1, default options


def wall_cpu(R: Results, op: str, impl: str, pin: int, n: int) -> str:
    """"wall / CPU" per operation (medians), † when a run was flagged."""
    r = R.get(op, impl, pin, n)
    if not r:
        return "–"
    cpu = R.med(op + "_cpu", impl, pin, n)
    return "%s / %s%s" % (fmt_ns(r["median"]), fmt_ns(cpu) if cpu is not None else "–",
                          " †" if r.get("flagged") else "")


def best_of(R: Results, op: str, n: int) -> Tuple[Optional[float], Optional[str]]:
    """(median, label) of the fastest of the library's own configurations at n, or (None, None)."""
    c = [(R.med(op, impl, pin, n), label) for label, impl, pin in BEST_OF]
    c = [x for x in c if x[0] is not None]
    return min(c) if c else (None, None)


def targets(R: Results) -> List[Tuple[str, str, Optional[bool]]]:
    """[(text, measured, ok)]."""
    rows, oks = [], []
    for op in OPS:
        for n in R.ns:
            d, (b, _) = R.med(op, "kbthreads", 0, n), best_of(R, op, n)
            if d is not None and b:
                rows.append((op, n, d / b))
                oks.append(d / b <= DEFAULT_LIMIT)
    out = []
    worst = max(rows, key=lambda x: x[2]) if rows else None
    out.append(("default ≤ %.2fx the best of `--pin`, `--spread`, taskset, per yield and per wait, every N"
                % DEFAULT_LIMIT,
                "worst %s (%s N=%d); %d of %d met" % ("%.2fx" % worst[2], worst[0], worst[1], sum(oks), len(oks))
                if worst else "–", all(oks) if oks else None))
    w1 = R.med("wait", "kbthreads", 0, 1)
    out.append(("default, a wait at N=1 ≤ %g µs" % (WAIT_N1_LIMIT_NS / 1e3),
                "–" if w1 is None else "%.2f µs" % (w1 / 1e3),
                None if w1 is None else w1 <= WAIT_N1_LIMIT_NS))
    return out


def write(ctx: ReportContext) -> None:
    """Append the section to the report (nothing when the run has no taskset figures)."""
    R, w = ctx.results, ctx.w
    if not R.has("yield", "kbthreads_taskset") and not R.has("wait", "kbthreads_taskset"):
        return
    w("### The default against the library's best configuration")
    w("")
    w("Per operation: wall time / CPU time of the whole process (every thread) over the same interval, "
      "medians of the runs. taskset: default options with the whole process on one CPU (CPU %s, as "
      "`taskset -c %s` does). Best: the fastest of `--pin` (`KB_AFFINITY_ONE_CPU`), `--spread` "
      "(`KB_AFFINITY_SPREAD`) and taskset at that N. † a run of the figure was flagged (started on a busy "
      "machine or shared it; see the load table below)."
      % ((R.d.get("idle") or {}).get("taskset_cpu", 0), (R.d.get("idle") or {}).get("taskset_cpu", 0)))
    w("")
    rows = []
    for op in OPS:
        for n in R.ns:
            if not R.has(op, "kbthreads", 0):
                continue
            d = R.med(op, "kbthreads", 0, n)
            b, which = best_of(R, op, n)
            r = d / b if d is not None and b else None
            cap = WAIT_N1_LIMIT_NS if op == "wait" and n == 1 else None
            mark = "" if r is None else (" ✓" if r <= DEFAULT_LIMIT else " ✗")
            if cap is not None and d is not None:
                mark += " (≤ %g µs %s)" % (cap / 1e3, "✓" if d <= cap else "✗")
            rows.append([op, n, wall_cpu(R, op, "kbthreads", 0, n)]
                        + [wall_cpu(R, op, impl, pin, n) for _, impl, pin in BEST_OF]
                        + [which or "–", fmt_ratio(r) + mark])
    w(md_table(["op", "N", "default", "`--pin`", "`--spread`", "taskset", "best", "default / best"], rows))
    w("")
    summary = [[text, measured, verdict(ok)] for text, measured, ok in targets(R)]
    w(md_table(["target (issue 20)", "measured (medians)", "verdict"], summary))
    w("")
