# SPDX-License-Identifier: MIT
"""The report's sections on the simulation-shaped job and on a loaded
machine (issue 20), for bench/report.py.

Figures (bench/run_idle.py): sim / sim_cpu (ns per operation: one kernel
wait, one collective or one yield) of kbthreads (kb_bench sim),
kbthreads_py (py_bench.py sim), greenlet (peer_greenlet.py sim) and, with
--baseline-bindir, kbthreads_baseline and kbthreads_py_baseline; the same
with a _pair suffix for two copies started together; yield / wait of
kbthreads_hog and kbthreads_baseline_hog, with a busy loop on the other CPU.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from bench_shared import fmt_ns, fmt_ratio
from report_context import ReportContext, Results, md_table, verdict

# One block of a loaded section's table: (bench, label, quiet word, quiet
# impl, loaded word, loaded impl, baseline's loaded impl).
LoadedBlock = Tuple[str, str, str, str, str, str, str]

# The targets for the Python simulation: at most this many times greenlet's time.
PY_LIMITS = {1: 1.25, 2: 1.5, 8: 2.5, 64: 2.5, 512: 2.5}
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
    impl, rows, oks = py_impl(R), [], []
    for n in sim_ns(R):
        r = ratio(R, "sim", impl, "greenlet", n)
        if r is not None and n in PY_LIMITS:
            ok = r <= PY_LIMITS[n]
            oks.append(ok)
            rows.append("N=%d %.2fx (≤ %.2fx %s)" % (n, r, PY_LIMITS[n], "✓" if ok else "✗"))
    return [("Python simulation ≤ 1.25x greenlet at N=1, 1.5x at N=2, 2.5x at N=8, 64, 512",
             ", ".join(rows) or "–", all(oks) if oks else None)]


def newer_vs_baseline(R: Results, bench: str, new: str, base: str,
                      ns: Sequence[int]) -> Tuple[List[str], Optional[bool]]:
    """A row of new / baseline ratios with ✓ (no slower) or ✗."""
    cells, oks = [], []
    for n in ns:
        r = ratio(R, bench, new, base, n)
        if r is not None:
            oks.append(r <= 1.0)
        cells.append("–" if r is None else "%s %s" % (fmt_ratio(r), "✓" if r <= 1.0 else "✗"))
    return cells, (all(oks) if oks else None)


def write(ctx: ReportContext) -> None:
    """Append the sections to the report, each only when the run has its figures."""
    R = ctx.results
    ns = sim_ns(R)
    if ns and R.has("sim", "kbthreads"):
        write_sim(ctx, ns)
    if R.has("yield", "kbthreads_hog") or R.has("wait", "kbthreads_hog"):
        write_hog(ctx)
    if R.has("sim", "kbthreads_pair"):
        write_pair(ctx)


def write_sim(ctx: ReportContext, ns: List[int]) -> None:
    """The simulation-shaped job: every scheduler, their ratios, the event-order check, the target."""
    R, w = ctx.results, ctx.w
    sim = R.d["sim"]
    w("## A simulation-shaped job (issue 20)")
    w("")
    w("The reference runtime's shape (`bench/sim_model.py`, `bench/kb_sim.c`): per step every rank launches 4 "
      "kernels on a heap-based engine and waits for each (the engine's wait pops the heap in simulated-time "
      "order until the awaited kernel is completed), then submits an all-reduce that the engine completes "
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


def write_hog(ctx: ReportContext) -> None:
    """Yield and wait with a busy loop on the other CPU, against quiet and the baseline."""
    R, w = ctx.results, ctx.w
    ns = loaded_ns(R)
    idle = R.d.get("idle") or {}
    w("## With a CPU hog on the other CPU (issue 20)")
    w("")
    w("Default options while a busy loop (`/bin/sh -c 'while :; do :; done'`) pinned to CPU %s runs; the "
      "benchmark itself is not pinned. The baseline build (`--baseline-bindir`, an older library) is measured "
      "the same way right after. Per operation, wall time / CPU time, medians; the quiet figure is the same "
      "job without the hog, from the main tables." % idle.get("hog_cpu", "?"))
    w("")
    blocks = [(op, op, "quiet", "kbthreads", "hog", "kbthreads_hog", "kbthreads_baseline_hog")
              for op in ("yield", "wait")]
    write_loaded(ctx, ns, blocks, "with a CPU hog, the default no slower than the baseline's default")


def write_loaded(ctx: ReportContext, ns: List[int], blocks: Sequence[LoadedBlock], target: str) -> None:
    """The table of a loaded section and its verdict. blocks: (bench, label,
    quiet word, quiet impl, loaded word, loaded impl, baseline's loaded impl)."""
    R, w = ctx.results, ctx.w
    rows, oks = [], []
    for bench, label, quiet, alone, loaded, new, base in blocks:
        if not R.has(bench, new):
            continue
        rows.append(["%s, %s" % (label, quiet)] + [cell(R, bench, alone, n) for n in ns])
        rows.append(["%s, %s" % (label, loaded)] + [cell(R, bench, new, n) for n in ns])
        if R.has(bench, base):
            rows.append(["%s, %s, baseline" % (label, loaded)] + [cell(R, bench, base, n) for n in ns])
            cells, ok = newer_vs_baseline(R, bench, new, base, ns)
            rows.append(["%s: new / baseline (≤ 1)" % label] + cells)
            oks.append(ok)
    w(md_table(["N"] + [str(n) for n in ns], rows))
    w("")
    measured = [o for o in oks if o is not None]
    w(md_table(["target (issue 20)", "verdict"], [[target, verdict(all(measured) if measured else None)]]))
    w("")


def write_pair(ctx: ReportContext) -> None:
    """Two copies of the simulation started together, against alone and the baseline."""
    R, w = ctx.results, ctx.w
    ns = loaded_ns(R)
    impl = py_impl(R)
    w("## Two simulations side by side (issue 20)")
    w("")
    w("Two copies of the simulation-shaped job started together (the same M); each figure pools both "
      "copies' runs. Per operation, wall time / CPU time of one process, medians; \"alone\" is the same job "
      "run by itself.")
    w("")
    blocks = [("sim", "C", "alone", "kbthreads", "two side by side", "kbthreads_pair", "kbthreads_baseline_pair"),
              ("sim", "Python", "alone", impl, "two side by side", impl + "_pair", "kbthreads_py_baseline_pair")]
    write_loaded(ctx, ns, blocks,
                 "two simulations side by side, the default no slower than the baseline's default")
