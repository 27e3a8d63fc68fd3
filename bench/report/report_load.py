# SPDX-License-Identifier: MIT
"""The report's sections on load, for bench/report/report.py: the default loops
with a CPU hog on the other CPU, two simulations side by side (each against
the --baseline-bindir build when the run has it), and the load at each
job's start with the idle gate's rule and the flagged jobs.

Figures (bench/harness/jobs_loaded.py): yield / wait of kbthreads_hog and
kbthreads_baseline_hog, with a busy loop on the other CPU; sim / sim_cpu of
kbthreads_pair, kbthreads_py_pair and their _baseline_ twins, two copies
started together. The jobs' records: the results' "jobs" (bench/harness/aggregate.py).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench_shared import fmt_ratio
from report_context import ReportContext, Results, md_table, verdict
from report_simulation import cell, loaded_ns, py_impl, ratio
from targets import limit

# One block of a loaded section's table: (bench, label, quiet word, quiet
# impl, loaded word, loaded impl, baseline's loaded impl).
LoadedBlock = Tuple[str, str, str, str, str, str, str]


def write(ctx: ReportContext) -> None:
    """The hog and side-by-side sections, each only when the run has its figures."""
    R = ctx.results
    if R.has("yield", "kbthreads_hog") or R.has("wait", "kbthreads_hog"):
        write_hog(ctx)
    if R.has("sim", "kbthreads_pair"):
        write_pair(ctx)


def newer_vs_baseline(R: Results, bench: str, new: str, base: str,
                      ns: Sequence[int]) -> Tuple[List[str], Optional[bool]]:
    """A row of new / baseline ratios with ✓ (no slower) or ✗."""
    cells, oks, cap = [], [], limit("loaded_vs_baseline")
    for n in ns:
        r = ratio(R, bench, new, base, n)
        if r is not None:
            oks.append(r <= cap)
        cells.append("–" if r is None else "%s %s" % (fmt_ratio(r), "✓" if r <= cap else "✗"))
    return cells, (all(oks) if oks else None)


def write_hog(ctx: ReportContext) -> None:
    """Yield and wait with a busy loop on the other CPU, against quiet and the baseline."""
    R, w = ctx.results, ctx.w
    ns = loaded_ns(R)
    idle = R.d.get("idle") or {}
    w("### With a CPU hog on the other CPU")
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
            rows.append(["%s: new / baseline (≤ %g)" % (label, limit("loaded_vs_baseline"))] + cells)
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
    w("### Two simulations side by side")
    w("")
    w("Two copies of the simulation-shaped job started together (the same M); each figure pools both "
      "copies' runs. Per operation, wall time / CPU time of one process, medians; \"alone\" is the same job "
      "run by itself.")
    w("")
    blocks = [("sim", "C", "alone", "kbthreads", "two side by side", "kbthreads_pair", "kbthreads_baseline_pair"),
              ("sim", "Python", "alone", impl, "two side by side", impl + "_pair", "kbthreads_py_baseline_pair")]
    write_loaded(ctx, ns, blocks,
                 "two simulations side by side, the default no slower than the baseline's default")


# The flagged jobs named in the report, the worst first (others' share of the CPUs); the rest are counted.
FLAGGED_SHOWN = 10


def write_loads(ctx: ReportContext, loads_name: str | None) -> None:
    """A short summary of the load at each job's start: the idle gate's rule, how
    many jobs were flagged busy and the worst of them; every job's row is in the
    page loads_name (write_loads_page), when given. Nothing for results files
    written before jobs recorded their load."""
    R, w = ctx.results, ctx.w
    idle = R.d.get("idle")
    jobs = R.d.get("jobs", [])
    if not idle or not jobs or "load1" not in jobs[0]:
        return
    flagged = sorted((j for j in jobs if j.get("flag")), key=lambda j: -j.get("others_cpu", 0.0))
    w("### The load at each job's start")
    w("")
    w(gate_text(R, idle, len(flagged), len(jobs)))
    w("")
    if flagged:
        w(md_table(["flagged job (the worst %d)" % min(len(flagged), FLAGGED_SHOWN), "why"],
                   [[j["label"], j["flag"]] for j in flagged[:FLAGGED_SHOWN]]
                   + ([["… and %d more" % (len(flagged) - FLAGGED_SHOWN), ""]]
                      if len(flagged) > FLAGGED_SHOWN else [])))
        w("")
    if loads_name:
        w("Every job's load, others' share of the CPUs and CPU time: [%s](%s)." % (loads_name, loads_name))
        w("")


def write_loads_page(ctx: ReportContext, title_note: str) -> bool:
    """The page of every job's row (docs/benchmarks-loads.md); False when the
    results file has no per-job loads."""
    jobs = ctx.results.d.get("jobs", [])
    if not jobs or "load1" not in jobs[0]:
        return False
    ctx.w("# Benchmarks: the load at each job's start")
    ctx.w("")
    ctx.w(title_note)
    ctx.w("")
    write_every_job(ctx, jobs)
    return True


def gate_text(R: Results, idle: Dict[str, Any], nflagged: int, njobs: int) -> str:
    """The idle gate's rule as this run applied it, and how many jobs were flagged."""
    ncpu = R.d["machine"].get("nproc") or 1
    return ("Before every job the run %s until the 1-minute load average is at most %.1f per CPU (%.1f here) or "
            "no task but the runner is runnable (`procs_running` in /proc/stat, median of 5 samples): the suite's "
            "own big spawns raise the load average, which decays over minutes, while `procs_running` shows the "
            "machine as it is. It waited %.0f s in all (at most %d s per job, %d s per run). A job that started "
            "with the load above the limit while other tasks were runnable, or during which other processes used "
            "more than %d%% of the CPUs, is flagged and measured again (the quietest attempt kept). The hog and "
            "side-by-side sections load the machine on purpose and are not flagged. %d of %d jobs flagged."
            % ("waits (bounded)" if idle.get("waiting") else
               "records the load and the runnable tasks (this run did not wait: a smoke run or --no-idle-wait); a "
               "full run waits",
               idle["load_per_cpu"], idle["load_per_cpu"] * ncpu, idle.get("waited_s", 0), idle["max_wait_s"],
               idle["budget_s"], 100 * R.busy_share(), nflagged, njobs))


def write_every_job(ctx: ReportContext, jobs: List[Dict[str, Any]]) -> None:
    """Every job's load, others' share and CPU time: one row a job."""
    w = ctx.w
    rows = []
    for j in jobs:
        rows.append([j["label"], "%.2f" % j["load1"], j.get("others_runnable", "–"),
                     "%.0f%%" % (100 * j["others_cpu"]), "%.2f s / %.2f s" % (j.get("cpu_s", 0), j["seconds"]),
                     j["attempts"], j.get("deliberate") or ("**flagged**" if j.get("flag") else "")])
    w(md_table(["job", "load (1 min) at start", "others runnable", "others' CPU", "CPU / wall",
                "attempts", "note"], rows))
    w("")
