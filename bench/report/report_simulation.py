# SPDX-License-Identifier: MIT
"""The report's section on the simulation-shaped job, for bench/report/report.py:
every scheduler's figures, their ratios, the event-order check and the
Python target; and the lookups the load sections (report_load.py) share.

Figures (bench/harness/jobs_sim.py): sim / sim_cpu (ns per operation: one kernel
wait, one collective or one yield) of kbthreads (kb_bench sim),
kbthreads_py (py_bench.py sim), greenlet (peer_greenlet.py sim) and, with
--baseline-bindir, kbthreads_baseline and kbthreads_py_baseline.
kbthreads_py_ctypes: the ctypes-only binding of results files from before
the binding had its compiled part.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from bench_shared import fmt_ns, fmt_ratio
from report_context import ReportContext, Results, md_table, verdict
from targets import sim_py_limits

SIM_IMPLS = [("C, default options", "kbthreads"), ("C, baseline build", "kbthreads_baseline"),
             ("Python (binding)", "kbthreads_py"), ("Python, ctypes only", "kbthreads_py_ctypes"),
             ("Python, baseline build", "kbthreads_py_baseline"), ("greenlet (Python)", "greenlet")]


def sim_ns(R: Results) -> List[int]:
    """The N of the simulation jobs (none when the run had none)."""
    return [int(n) for n in (R.d.get("sim") or {}).get("ns", [])]


def loaded_ns(R: Results) -> List[int]:
    """The N of the hog and side-by-side jobs."""
    return [int(n) for n in (R.d.get("sim") or {}).get("loaded_ns", [])]


def cell(R: Results, bench: str, impl: str, n: int) -> str:
    """"wall / CPU" per operation (medians)."""
    r = R.get(bench, impl, 0, n)
    if not r:
        return "–"
    cpu = R.med(bench + "_cpu", impl, 0, n)
    return "%s / %s%s" % (fmt_ns(r["median"]), fmt_ns(cpu) if cpu is not None else "–",
                          " †" if r.get("flagged") else "")


def ratio(R: Results, bench: str, a: str, b: str, n: int) -> Optional[float]:
    """Median of a / median of b (unpinned), None when either is missing."""
    x, y = R.med(bench, a, 0, n), R.med(bench, b, 0, n)
    return x / y if x is not None and y else None


def py_impl(R: Results) -> str:
    """The Python binding's impl: with its compiled part, or the ctypes-only one of older runs."""
    return "kbthreads_py" if R.has("sim", "kbthreads_py") else "kbthreads_py_ctypes"


def targets(R: Results) -> List[Tuple[str, str, Optional[bool]]]:
    """[(text, measured, ok)] for the Python simulation against greenlet."""
    impl, rows, oks, limits = py_impl(R), [], [], sim_py_limits()
    for n in sim_ns(R):
        r = ratio(R, "sim", impl, "greenlet", n)
        if r is not None and n in limits:
            ok = r <= limits[n]
            oks.append(ok)
            rows.append("N=%d %.2fx (≤ %.2fx %s)" % (n, r, limits[n], "✓" if ok else "✗"))
    return [("Python simulation ≤ %s" % limits_text(limits),
             ", ".join(rows) or "–", all(oks) if oks else None)]


def limits_text(limits: dict) -> str:
    """"1.25x greenlet at N=1, 1.5x at N=2, 2.5x at N=8, 64, 512": the Ns of one limit together."""
    by_limit: dict = {}
    for n, lim in sorted(limits.items()):
        by_limit.setdefault(lim, []).append(n)
    parts = ["%gx at N=%s" % (lim, ", ".join(str(n) for n in ns)) for lim, ns in by_limit.items()]
    return parts[0].replace(" at", " greenlet at", 1) + "".join(", " + p for p in parts[1:])


def write(ctx: ReportContext) -> None:
    """Append the section to the report (nothing when the run has no sim figures)."""
    R = ctx.results
    ns = sim_ns(R)
    if ns and R.has("sim", "kbthreads"):
        write_sim(ctx, ns)


def write_sim(ctx: ReportContext, ns: List[int]) -> None:
    """The simulation-shaped job: every scheduler, their ratios, the event-order check, the target."""
    R, w = ctx.results, ctx.w
    sim = R.d["sim"]
    w("### A simulation-shaped job")
    w("")
    w("The reference runtime's shape (`bench/python/sim_model.py`, `bench/handoff/kb_sim.c`): per step "
      "every rank launches 4 kernels on a heap-based engine and waits for each (the engine's wait pops the "
      "heap in simulated-time order until the awaited kernel is completed), then submits an all-reduce that the engine completes "
      "once every rank has arrived and waits for it, then yields once. An operation is one wait, one "
      "collective or one yield (%d per rank and step); M steps per run: %s. Per operation, wall time / CPU "
      "time of the process, medians." % (sim.get("ops_per_step", 6), ", ".join(
          "N=%s %s" % kv for kv in sorted(sim.get("m", {}).items(), key=lambda kv: int(kv[0])))))
    w("")
    rows = [[label] + [cell(R, "sim", impl, n) for n in ns] for label, impl in SIM_IMPLS
            if R.has("sim", impl)]
    impl = py_impl(R)
    for label, a, b in (("Python / greenlet", impl, "greenlet"), ("C / greenlet", "kbthreads", "greenlet"),
                        ("C / C baseline", "kbthreads", "kbthreads_baseline"),
                        ("Python / Python baseline", impl, "kbthreads_py_baseline")):
        if R.has("sim", a) and R.has("sim", b):
            rows.append([label] + [fmt_ratio(ratio(R, "sim", a, b, n)) for n in ns])
    sums = sim.get("checksums", {})
    rows.append(["same event order (checksum)"] + [
        "–" if str(n) not in sums else ("**differs**" if len(set(sums[str(n)].values())) > 1 else
                                        "yes (%d schedulers)" % len(sums[str(n)])) for n in ns])
    w(md_table(["N"] + [str(n) for n in ns], rows))
    w("")
    if sim.get("mismatch"):
        w("> **The event order differed between schedulers at N = %s**: a scheduling bug (the run failed)."
          % ", ".join(str(n) for n in sim["mismatch"]))
        w("")
    summary = [[text, measured, verdict(ok)] for text, measured, ok in targets(R)]
    w(md_table(["target (issue 20)", "measured (ratio of medians)", "verdict"], summary))
    w("")
