#!/usr/bin/python3
"""Write docs/benchmarks.md and its plots from a results file of bench/run.py.

    report.py [--results bench/results/bench-latest.json] [--out docs/benchmarks.md] [--png-dir docs]

Everything in the report comes from the results file (the machine, every
figure, the ratios to the floors and peers, the verdict on each target of
issue 4), except bench/report-notes.md, which is copied in as it is (the
hand-kept notes: what each lever bought, profiles). Plots need gnuplot.

The report is a sequence of sections, one function each (section_* here,
write() in the report_*.py modules), called in order by write_report().
Every section receives a ReportContext (bench/report_context.py): the
results and the lines written so far. Issue 4's targets are computed once
(issue4_targets) because three sections read them: the targets table, the
ratios and the discussion.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import report_python  # noqa: E402  (the section on Python ranks and timed joins)
import report_baton  # noqa: E402  (the section on the condvar and futex batons)
import report_idle  # noqa: E402  (issue 20: the default against the best configuration; loads)
import report_sim  # noqa: E402  (issue 20: the simulation-shaped job, a CPU hog, two side by side)
from bench_shared import fmt_ns, fmt_ratio, fmt_val  # noqa: E402
from report_context import ReportContext, Results, Row, md_table, ratio, verdict  # noqa: E402

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
# How the targets table and the discussion name the floor each configuration is held to.
FLOOR_TEXT = {"unpinned": "unpinned", "pinned": "pinned", "spread": "spread (against the unpinned ring)"}

# Rows of the targets (issue 4), each led by its N:
FloorRow = Tuple[int, Optional[float], Optional[float], Optional[str], Optional[float], Optional[bool]]
#          n, yield, faster ring's handoff, which ring, yield / ring, ok
SimgridRow = Tuple[int, Optional[float], Optional[float], Optional[float], Optional[bool]]
#            n, yield, SimGrid thread factory's yield, ratio, ok
SpawnRow = Tuple[int, Optional[float], Optional[float]]  # n, repeated spawn, cold spawn (per rank)
SpareRow = Tuple[int, Optional[float], Optional[float], Optional[bool]]  # n, yield, greenlet's yield, ok
FlatResult = Tuple[Optional[float], Optional[float], Optional[float], Optional[bool]]  # N=4096, N=8, ratio, ok


# ---------------------------------------------------------------------------
# Targets (issue 4)
# ---------------------------------------------------------------------------

def all_measured(oks: Sequence[Optional[bool]]) -> Optional[bool]:
    """A target met at every N measured; None when no N was."""
    measured = [o for o in oks if o is not None]
    return all(measured) if measured else None


def target_floor(R: Results, pin: int, impl: str = "kbthreads") -> Tuple[List[FloorRow], Optional[bool]]:
    """A yield against one handoff of the faster ring (same pin, same N): at most 1.25x."""
    rows = []
    for n in R.ns:
        kb = R.med("yield", impl, pin, n)
        fl, which = R.floor(pin, n)
        r = ratio(kb, fl)
        rows.append((n, kb, fl, which, r, None if r is None else r <= 1.25))
    return rows, all_measured([row[5] for row in rows])


def target_simgrid(R: Results, impl: str = "kbthreads") -> Tuple[List[SimgridRow], Optional[bool]]:
    """A yield against SimGrid's thread factory's: at most 0.25x."""
    rows = []
    for n in R.ns:
        kb = R.med("yield", impl, 0, n)
        sg = R.med("yield", "simgrid_thread", 0, n)
        r = ratio(kb, sg)
        rows.append((n, kb, sg, r, None if r is None else r <= 0.25))
    return rows, all_measured([row[4] for row in rows])


def target_flat(R: Results, pin: int, impl: str = "kbthreads") -> FlatResult:
    """A yield at N=4096 against one at N=8: at most 1.5x."""
    a = R.med("yield", impl, pin, 4096)
    b = R.med("yield", impl, pin, 8)
    r = ratio(a, b)
    return a, b, r, (None if r is None else r <= 1.5)


def target_spawn(R: Results, pin: int, impl: str = "kbthreads") -> Tuple[List[SpawnRow], Optional[bool]]:
    """A repeated spawn on one ctx: at most 10 µs per rank at every N."""
    rows = [(n, R.med("spawn_repeat", impl, pin, n), R.med("spawn_cold", impl, pin, n))
            for n in R.ns]
    measured = [v for _, v, _ in rows if v is not None]
    return rows, (max(measured) <= 10000 if measured else None)


def target_memory(R: Results) -> Tuple[int, Optional[float], Optional[bool]]:
    """Resident memory per idle rank at N=4096: at most 64 KiB. (N, KiB, ok)"""
    n = R.d["params"]["mem_n"]
    v = R.med("mem_idle", "kbthreads", 0, n)
    return n, v, (None if v is None or n != 4096 else v <= 64)


def target_spare(R: Results) -> Tuple[int, List[SpareRow], Optional[bool]]:
    """With a spare CPU (N < CPUs): a yield under 1 µs and faster than greenlet's."""
    spare = (R.d["machine"].get("nproc") or 1) - 1
    rows = []
    for n in R.ns:
        if n > spare:
            continue
        kb = R.med("yield", "kbthreads", 0, n)
        gl = R.med("yield", "greenlet", 0, n)
        rows.append((n, kb, gl, None if kb is None else (kb <= 1000 and (gl is None or kb < gl))))
    return spare, rows, all_measured([row[3] for row in rows])


@dataclass
class Targets:
    """Issue 4's targets for this run. The dicts are keyed by configuration
    tag, in CONFIGS order, and hold only the configurations measured."""
    floor: Dict[str, Tuple[List[FloorRow], Optional[bool]]]
    simgrid: Tuple[List[SimgridRow], Optional[bool]]
    simgrid_spread: Optional[Tuple[List[SimgridRow], Optional[bool]]]  # None: spread not measured
    flat: Dict[str, FlatResult]
    spawn: Dict[str, Tuple[List[SpawnRow], Optional[bool]]]
    memory: Tuple[int, Optional[float], Optional[bool]]
    spare: Tuple[int, List[SpareRow], Optional[bool]]


def issue4_targets(R: Results) -> Targets:
    """Every target of issue 4, once for the three sections that read them."""
    return Targets(
        floor={tag: target_floor(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("yield", impl, pin)},
        simgrid=target_simgrid(R),
        simgrid_spread=target_simgrid(R, "kbthreads_spread") if R.has("yield", "kbthreads_spread", 0) else None,
        flat={tag: target_flat(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("yield", impl, pin)},
        spawn={tag: target_spawn(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("spawn_repeat", impl, pin)},
        memory=target_memory(R),
        spare=target_spare(R),
    )


def worst(rows: Sequence[Sequence[Any]], idx: int) -> Optional[float]:
    """The largest value in column idx of the rows measured, or None."""
    vals = [r[idx] for r in rows if r[idx] is not None]
    return max(vals) if vals else None


def measured_only(rows: Sequence[Sequence[Any]], idx: int) -> str:
    """" (measured at N = ... only)" when not every N of the run has the figure (a smoke run's spread jobs)."""
    have = [r[0] for r in rows if r[idx] is not None]
    return "" if len(have) == len(rows) else " (measured at N = %s only)" % ", ".join(str(n) for n in have)


def spread_vs_default(R: Results, bench: str) -> str:
    """A sentence on what the spread option changes for this figure against the default, unpinned."""
    pairs = [(n, R.med(bench, "kbthreads_spread", 0, n), R.med(bench, "kbthreads", 0, n)) for n in R.ns]
    pairs = [(n, a, b) for n, a, b in pairs if a is not None and b]
    if not pairs:
        return ""
    return (" `KB_AFFINITY_SPREAD` (the spread rows) is that kind of spin: every rank on a CPU of its own, the "
            "holder after next woken one turn ahead to watch its slot. With it a %s costs %s (spread / "
            "default unpinned: %s)." % (
                bench, ", ".join("N=%d %s" % (n, fmt_ns(a)) for n, a, _ in pairs),
                ", ".join(fmt_ratio(a / b) for _, a, b in pairs)))


def busy_figures(R: Results) -> Tuple[List[Row], List[Row]]:
    """(the timed figures, those of them measured while others used the CPUs)."""
    timed = [r for r in R.d["summary"] if r["bench"] != "maxn"]
    return timed, [r for r in timed if R.busy(r)]


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------

# The two plots' series: (bench, impl, pin, label, gnuplot style).
PlotSeries = Tuple[str, str, int, str, str]
UNPINNED_PLOT: List[PlotSeries] = [
    ("yield", "kbthreads", 0, "libkbthreads", "lw 3 pt 7 lc rgb '#d62728'"),
    ("yield", "kbthreads_spread", 0, "libkbthreads, spread", "lw 3 dt 2 pt 6 lc rgb '#ff7f0e'"),
    ("handoff", "futex_ring", 0, "futex ring (per handoff)", "lw 2 pt 5 lc rgb '#1f77b4'"),
    ("handoff", "sem_ring", 0, "semaphore ring (per handoff)", "lw 2 pt 9 lc rgb '#17becf'"),
    ("handoff", "cond_bcast", 0, "mutex+condvar broadcast (per handoff)", "lw 2 pt 11 lc rgb '#8c564b'"),
    ("yield", "greenlet", 0, "greenlet (Python)", "lw 2 pt 13 lc rgb '#2ca02c'"),
    ("yield", "simgrid_thread", 0, "SimGrid thread factory", "lw 2 pt 3 lc rgb '#9467bd'"),
    ("yield", "simgrid_raw", 0, "SimGrid raw factory", "lw 2 pt 2 lc rgb '#e377c2'")]
PINNED_PLOT: List[PlotSeries] = [
    ("yield", "kbthreads", 1, "libkbthreads, pinned", "lw 3 pt 7 lc rgb '#d62728'"),
    ("yield", "kbthreads", 0, "libkbthreads, unpinned", "lw 1 dt 2 pt 6 lc rgb '#d62728'"),
    ("handoff", "futex_ring", 1, "futex ring, pinned", "lw 2 pt 5 lc rgb '#1f77b4'"),
    ("handoff", "sem_ring", 1, "semaphore ring, pinned", "lw 2 pt 9 lc rgb '#17becf'"),
    ("handoff", "cond_bcast", 1, "mutex+condvar broadcast, pinned", "lw 2 pt 11 lc rgb '#8c564b'")]


def gnuplot_terminal() -> Tuple[Optional[str], Optional[str]]:
    """(gnuplot's path, the best PNG terminal it has), None for what is missing."""
    gp = shutil.which("gnuplot")
    if not gp:
        return None, None
    for term in ("pngcairo", "png"):
        p = subprocess.run([gp, "-e", "set terminal %s" % term], capture_output=True)
        if p.returncode == 0:
            return gp, term
    return gp, None


def plot_lines(R: Results, tmp: str, series_spec: Sequence[PlotSeries]) -> List[str]:
    """gnuplot's plot clauses: a data file in tmp per measured series, and the swapcontext line."""
    plots = []
    for bench, impl, spin, label, style in series_spec:
        pts = [R.get(bench, impl, spin, n) for n in R.ns]
        pts = [p for p in pts if p]
        if not pts:
            continue
        path = os.path.join(tmp, "%s-%s-%d.dat" % (bench, impl, spin))
        with open(path, "w") as f:
            for p in pts:
                f.write("%d %.3f %.3f %.3f\n" % (p["n"], p["median"], p["min"], p["max"]))
        plots.append("'%s' using 1:2:3:4 with yerrorlines %s title '%s'" % (path, style, label))
    sw = R.get("switch", "swapcontext", 0, 1)
    if sw:
        plots.append("%.3f with lines dt 3 lw 2 lc rgb '#777777' title 'swapcontext, 1 thread (%s)'"
                     % (sw["median"], fmt_ns(sw["median"])))
    return plots


def plot_script(R: Results, term: str, png: str, title: str, plots: Sequence[str]) -> str:
    """The gnuplot script of one plot: log-log, N on x, ns on y."""
    font = "font 'DejaVu Sans,11'" if term == "pngcairo" else ""
    return "\n".join([
        "set terminal %s size 1000,760 %s" % (term, font),
        "set output '%s'" % png,
        "set title '%s'" % title,
        "set logscale x 2",
        "set logscale y 10",
        "set xrange [0.8:%g]" % (max(R.ns) * 1.3),
        "set xtics (%s)" % ", ".join("'%d' %d" % (n, n) for n in R.ns),
        "set ytics ('10 ns' 10, '100 ns' 100, '1 µs' 1e3, '10 µs' 1e4, '100 µs' 1e5, '1 ms' 1e6, "
        "'10 ms' 1e7, '100 ms' 1e8)",
        "set xlabel 'N (ranks; the floors: a ring of N threads, 2 at N=1)'",
        "set ylabel 'per yield or per handoff (median; bars: min to max)'",
        "set grid xtics ytics mytics",
        "set key inside left top opaque box samplen 3 spacing 1.1",
        "plot " + ", \\\n     ".join(plots),
    ])


def plot(R: Results, png: str, title: str, series_spec: Sequence[PlotSeries]) -> bool:
    """Write one plot; False when gnuplot is missing, fails, or nothing was measured."""
    gp, term = gnuplot_terminal()
    if not gp or not term:
        return False
    tmp = tempfile.mkdtemp(prefix="kbbench-plot-")
    try:
        plots = plot_lines(R, tmp, series_spec)
        if not plots:
            return False
        p = subprocess.run([gp], input=plot_script(R, term, png, title, plots), capture_output=True, text=True)
        if p.returncode != 0:
            print("report.py: gnuplot failed: %s" % p.stderr.strip(), file=sys.stderr)
            return False
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_plots(R: Results, png_dir: str) -> Tuple[bool, bool]:
    """The unpinned and the pinned plot: whether each was written."""
    os.makedirs(png_dir, exist_ok=True)
    ok1 = plot(R, os.path.join(png_dir, "bench-yield.png"),
               "ns per yield against N (unpinned; floors: per handoff)", UNPINNED_PLOT)
    ok2 = plot(R, os.path.join(png_dir, "bench-yield-pinned.png"),
               "ns per yield against N, every thread on one CPU (floors: per handoff)", PINNED_PLOT)
    return ok1, ok2


# ---------------------------------------------------------------------------
# The report: one function per section, in the order write_report calls them
# ---------------------------------------------------------------------------

def results_name(R: Results, src: str) -> str:
    """The results file's name as run.py wrote it (or as given)."""
    return R.d.get("file", os.path.basename(src))


def section_header(ctx: ReportContext, src: str) -> None:
    """The title, where the report comes from and how to regenerate it."""
    d, w = ctx.results.d, ctx.w
    w("# Benchmarks")
    w("")
    w("<!-- Generated by `make bench-report` (bench/report.py) from %s. Do not edit: edit bench/report.py or "
      "bench/report-notes.md and regenerate. -->" % ("bench/results/" + results_name(ctx.results, src)))
    w("")
    w("What a yield costs when every rank is a real thread, measured side by side in one run with the floors "
      "(what the kernel's primitives cost for the same handoff) and the peers (greenlet, SimGrid), against the "
      "targets of issue 4. Every figure is the median of %d runs, with the min and max of those runs."
      % d["params"]["reps"])
    w("")
    w("Regenerate: `make bench-report` (builds `build-bench/` with `-DCMAKE_BUILD_TYPE=Release`, runs "
      "`make bench`, about %d minute(s) here, then writes this file and the plots); "
      "`make bench-report BENCH_REUSE=1` rewrites it from the last results in `bench/results/` without "
      "running again. `make bench-smoke` is the seconds-long version CI runs (no time is asserted)."
      % max(1, round(d["duration_s"] / 60)))
    w("")


def peers_text(info: Dict[str, Any]) -> str:
    """The peers' versions, or which were not run."""
    return "%s; %s" % (
        "greenlet %s on Python %s" % (info["greenlet_version"], info.get("python_version", "?"))
        if "greenlet_version" in info else "greenlet: not run",
        "SimGrid %s" % info["simgrid_version"] if "simgrid_version" in info else "SimGrid: not run")


def machine_rows(d: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """The machine table: CPU, memory, kernel, build, peers, how the run went."""
    m, lc = d["machine"], d["machine"].get("lscpu", {})
    return [
        ("CPU", "%s, %s CPUs (%s core(s) per socket, %s thread(s) per core)" % (
            lc.get("Model name", "?"), lc.get("CPU(s)", m.get("nproc")), lc.get("Core(s) per socket", "?"),
            lc.get("Thread(s) per core", "?"))),
        ("virtualisation", "%s %s" % (lc.get("Hypervisor vendor", "none"), lc.get("Virtualization type", ""))),
        ("caches", ", ".join("%s %s" % (k, lc[k]) for k in ("L1d cache", "L2 cache", "L3 cache") if k in lc) or "?"),
        ("nproc", m.get("nproc")),
        ("memory", m.get("memory")),
        ("kernel", m.get("kernel")),
        ("OS, libc", "%s, %s" % (m.get("os"), m.get("glibc"))),
        ("compiler", m.get("cc")),
        ("limits", "pid_max %s, threads-max %s, vm.max_map_count %s" % (
            m.get("pid_max"), m.get("threads_max"), m.get("max_map_count"))),
        ("libkbthreads", "%s, commit %s, %s build" % (d["info"].get("kb_version", "?"), m.get("git_commit", "?"),
                                                      d.get("build_type", "?"))),
        ("peers", peers_text(d["info"])),
        ("pinned libkbthreads", {"option": "the KB_AFFINITY_ONE_CPU spawn option",
                                 "inherited": "driver pinned before the spawn, ranks inherit its CPU (the header "
                                              "has no KB_AFFINITY_ONE_CPU yet)"}.get(
                                     d["info"].get("pin_method"), "not run")),
        ("spread libkbthreads", "the KB_AFFINITY_SPREAD spawn option (kb_bench --spread)"
         if d["info"].get("spread_method") == "option" else "not run"),
        ("run", "%s UTC, %.0f s; load average (1, 5, 15 min) %s at the start, %s at the end" % (
            d["started"].replace("T", " ").split("+")[0], d["duration_s"],
            ", ".join("%.2f" % x for x in d["load_start"]), ", ".join("%.2f" % x for x in d["load_end"]))),
    ]


def run_conditions(ctx: ReportContext) -> None:
    """Whether other processes shared the machine during the run (the † figures)."""
    R, w = ctx.results, ctx.w
    d = R.d
    timed, busy_rows = busy_figures(R)
    if busy_rows:
        retries = d["params"].get("retry_busy", 0)
        w("> **Part of this run shared the machine.** While %d of its %d figures were measured, other "
          "processes used more than %d%% of the CPUs (measured per job from /proc/stat, less the benchmark's "
          "own CPU time%s). They are marked † in the tables and listed with their share in the last table. "
          "Thread handoffs (libkbthreads, the floors, SimGrid's thread factory) suffer most, unpinned ones "
          "above all: a thread woken on a CPU that another process is using can wait for it. Rerun "
          "`make bench-report` on a quiet machine for reference numbers." % (
              len(busy_rows), len(timed), 100 * R.busy_share(),
              "; such jobs were measured again, up to %d time(s) within a %d s budget, and the quietest "
              "attempt kept" % (retries, d["params"].get("retry_budget", 0)) if retries else ""))
        w("")
    else:
        w("Other processes used at most %d%% of the CPUs while any figure was measured (per job, from "
          "/proc/stat less the benchmark's own CPU time)." % round(100 * max(
              [r.get("others_cpu", 0.0) for r in timed] or [0])))
        w("")


def section_machine(ctx: ReportContext) -> None:
    """The machine and the run: the table, the run's conditions, its notes and failures."""
    d, w = ctx.results.d, ctx.w
    w("## The machine and the run")
    w("")
    w(md_table(["", ""], machine_rows(d)))
    w("")
    run_conditions(ctx)
    for note in d["notes"]:
        w("> Note: %s" % note)
        w("")
    for f in d["failures"]:
        w("> **Failed:** %s" % f)
        w("")


def target_rows(t: Targets) -> List[Tuple[str, str, str, Optional[bool]]]:
    """The rows of the targets table, in order, each with the configuration it
    is about: "unpinned" (default options; also the rows without a mark),
    "pinned" (KB_AFFINITY_ONE_CPU), "spread" (KB_AFFINITY_SPREAD). The spread
    rows sit next to the default unpinned ones and are counted apart.
    (configuration, target, measured, ok)"""
    rows = []
    for tag, (frows, ok) in t.floor.items():
        rows.append((tag, "yield ≤ 1.25x one handoff of the faster ring, same N, %s" % FLOOR_TEXT[tag],
                     "worst %s%s" % (fmt_ratio(worst(frows, 4)), measured_only(frows, 4)), ok))
    sg_rows, sg_ok = t.simgrid
    rows.append(("unpinned", "yield ≤ 0.25x SimGrid thread factory, every N",
                 "worst %s" % fmt_ratio(worst(sg_rows, 3)), sg_ok))
    if t.simgrid_spread is not None:
        sp_rows, sp_ok = t.simgrid_spread
        rows.append(("spread", "yield ≤ 0.25x SimGrid thread factory, every N, spread",
                     "worst %s%s" % (fmt_ratio(worst(sp_rows, 3)), measured_only(sp_rows, 3)), sp_ok))
    for tag, (a, b, r, ok) in t.flat.items():
        rows.append((tag, "flat: yield at N=4096 ≤ 1.5x N=8, %s" % tag,
                     "%s / %s = %s" % (fmt_ns(a), fmt_ns(b), fmt_ratio(r)), ok))
    for tag, (srows, ok) in t.spawn.items():
        rows.append((tag, "repeated spawn on one ctx ≤ 10 µs per rank, every N, %s" % tag,
                     "worst %s%s" % (fmt_ns(worst(srows, 1)), measured_only(srows, 1)), ok))
    mem_n, mem_v, mem_ok = t.memory
    rows.append(("unpinned", "≤ 64 KiB resident per idle rank, N=4096, default options",
                 "%s" % ("–" if mem_v is None else "%.1f KiB (N=%d)" % (mem_v, mem_n)), mem_ok))
    spare, spare_rows, spare_ok = t.spare
    rows.append(("unpinned", "spare CPU, N ≤ %d: yield ≤ 1 µs and faster than greenlet" % spare,
                 ", ".join("N=%d: %s vs %s" % (n, fmt_ns(kb), fmt_ns(gl)) for n, kb, gl, _ in spare_rows) or "–",
                 spare_ok))
    return rows


def targets_met_line(rows: Sequence[Tuple[str, str, str, Optional[bool]]]) -> str:
    """The sentence counting the targets met: default options and pinned together, spread apart."""
    configs = [row[0] for row in rows]

    def count(tags: Tuple[str, ...]) -> Tuple[int, int]:
        mine = [row for row in rows if row[0] in tags]
        return sum(1 for row in mine if verdict(row[3]) == "**met**"), len(mine)

    nmet, ntot = count(("unpinned", "pinned"))
    parts = ["%d of the %d rows marked unpinned or without a mark (default options, threads unpinned)"
             % count(("unpinned",))]
    if "pinned" in configs:
        parts.append("%d of the %d rows marked pinned (`KB_AFFINITY_ONE_CPU`)" % count(("pinned",)))
    line = "**%d of %d targets met in this run with the default options%s**: %s." % (
        nmet, ntot, " and `KB_AFFINITY_ONE_CPU`" if "pinned" in configs else "", ", ".join(parts))
    if "spread" in configs:
        line += (" **With `KB_AFFINITY_SPREAD`** (the rows marked spread, counted apart): %d of %d met."
                 % count(("spread",)))
    return line


def section_targets(ctx: ReportContext, t: Targets) -> None:
    """Issue 4's targets: one row each, with its verdict, and how many were met."""
    w = ctx.w
    w("## Targets")
    w("")
    rows = target_rows(t)
    w(md_table(["target (issue 4)", "measured (medians)", "verdict"],
               [(text, measured, verdict(ok)) for _, text, measured, ok in rows]))
    w("")
    w(targets_met_line(rows))
    w("")


# Every yield and handoff figure of the yield table, in its row order: (bench, impl, pin).
YIELD_SERIES = [("yield", "kbthreads", 0), ("yield", "kbthreads_spread", 0), ("yield", "kbthreads", 1),
                ("handoff", "futex_ring", 0),
                ("handoff", "futex_ring", 1), ("handoff", "sem_ring", 0), ("handoff", "sem_ring", 1),
                ("handoff", "cond_bcast", 0), ("handoff", "cond_bcast", 1), ("yield", "greenlet", 0),
                ("yield", "simgrid_thread", 0), ("yield", "simgrid_raw", 0)]


def section_yield(ctx: ReportContext) -> None:
    """The plots and the table of ns per yield (and per ring handoff) against N."""
    R, w = ctx.results, ctx.w
    w("## Yield: ns per yield against N")
    w("")
    w("![ns per yield against N, unpinned](bench-yield.png)")
    w("")
    if any(k[2] == 1 for k in R.rows):
        w("![ns per yield against N, every thread on one CPU](bench-yield-pinned.png)")
        w("")
    w("libkbthreads, greenlet and SimGrid: ns per yield (N ranks, each yielding M times). Floors: ns per "
      "handoff in a ring of N threads (2 at N=1): the threads a yield loop of N ranks passes the baton among, "
      "since rounds with nothing to drain leave the driver out. "
      "Median (min–max).")
    w("")
    rows = [["%s%s" % (LABELS[impl], ", pinned" if pin else "")] + [R.cell(bench, impl, pin, n) for n in R.ns]
            for bench, impl, pin in YIELD_SERIES if R.has(bench, impl, pin)]
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")
    sw = R.get("switch", "swapcontext", 0, 1)
    if sw:
        w("Single thread: one `swapcontext` switch costs %s (%s–%s)." % (
            fmt_ns(sw["median"]), fmt_ns(sw["min"]), fmt_ns(sw["max"])))
        w("")


def busy_mark(R: Results, figures: Sequence[Tuple[str, str, int, int]]) -> str:
    """" †" on a ratio when one of its figures was busy; "" when one was not measured (the ratio is "–")."""
    if not all(R.get(*f) for f in figures):
        return ""
    return " †" if any(R.busy(R.get(*f)) for f in figures) else ""


def check_mark(r: Optional[float], ok: Optional[bool]) -> str:
    """A ratio against its target: "1.10x ✓", "1.30x ✗", or "–"."""
    return "%s%s" % (fmt_ratio(r), "" if r is None else (" ✓" if ok else " ✗"))


def floor_ratio_rows(R: Results, t: Targets) -> List[List[str]]:
    """libkbthreads / the faster ring, per configuration, against 1.25."""
    label = {"unpinned": "libkbthreads / faster ring (target ≤ 1.25)",
             "spread": "libkbthreads spread / faster ring (unpinned) (target ≤ 1.25)",
             "pinned": "libkbthreads / faster ring, pinned (target ≤ 1.25)"}
    rows = []
    for tag, (rws, _) in t.floor.items():
        impl, pin = CONFIG_IMPL[tag], CONFIG_PIN[tag]
        rows.append([label[tag]] + [check_mark(r[4], r[5]) + busy_mark(R, [("yield", impl, pin, r[0]),
                                                                          ("handoff", r[3], pin, r[0])])
                                    for r in rws])
    return rows


def simgrid_ratio_rows(R: Results, t: Targets) -> List[List[str]]:
    """libkbthreads (default, spread) / SimGrid's thread factory, against 0.25."""
    rows = []
    for impl, label, sg_rows in (("kbthreads", "libkbthreads / SimGrid thread (target ≤ 0.25)", t.simgrid[0]),
                                 ("kbthreads_spread", "libkbthreads spread / SimGrid thread (target ≤ 0.25)",
                                  t.simgrid_spread[0] if t.simgrid_spread else [])):
        if any(r[3] is not None for r in sg_rows):
            rows.append([label] + [check_mark(r[3], r[4]) + busy_mark(R, [("yield", impl, 0, r[0]),
                                                                        ("yield", "simgrid_thread", 0, r[0])])
                                   for r in sg_rows])
    return rows


def other_ratio_rows(R: Results, t: Targets) -> List[List[str]]:
    """The ratios without a target: to the other peers, the naive baton, pinned and spread to unpinned."""
    rows = []
    for impl in ("greenlet", "simgrid_raw"):
        if R.has("yield", impl, 0):
            rows.append(["libkbthreads / %s" % LABELS[impl]]
                        + [fmt_ratio(ratio(R.med("yield", "kbthreads", 0, n), R.med("yield", impl, 0, n)))
                           for n in R.ns])
    if R.has("handoff", "cond_bcast", 0):
        rows.append(["condvar broadcast / faster ring (the naive baton)"]
                    + [fmt_ratio(ratio(R.med("handoff", "cond_bcast", 0, n), R.floor(0, n)[0])) for n in R.ns])
    for tag in ("pinned", "spread"):
        if tag in t.floor and "unpinned" in t.floor:
            rows.append(["libkbthreads %s / unpinned" % tag]
                        + [fmt_ratio(ratio(R.med("yield", CONFIG_IMPL[tag], CONFIG_PIN[tag], n),
                                           R.med("yield", "kbthreads", 0, n)))
                           for n in R.ns])
    if R.has("handoff", "futex_ring", 1):
        rows.append(["futex ring pinned / unpinned"]
                    + ["%s%s" % (fmt_ratio(ratio(R.med("handoff", "futex_ring", 1, n),
                                                 R.med("handoff", "futex_ring", 0, n))),
                                 busy_mark(R, [("handoff", "futex_ring", 0, n), ("handoff", "futex_ring", 1, n)]))
                       for n in R.ns])
    return rows


def section_ratios(ctx: ReportContext, t: Targets) -> None:
    """Ratios of the yield medians to the floors and peers, ✓/✗ against the targets."""
    R, w = ctx.results, ctx.w
    w("### Ratios")
    w("")
    rows = floor_ratio_rows(R, t) + simgrid_ratio_rows(R, t) + other_ratio_rows(R, t)
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")
    w("† in a ratio: at least one of its two figures was measured while other processes used the CPUs, "
      "so the two may have been measured under different conditions.")
    w("")


def say_unpinned_handoffs(ctx: ReportContext) -> None:
    """Why unpinned handoffs cost more than pinned ones, when quiet figures show it."""
    R, w = ctx.results, ctx.w
    quiet_pairs = []
    for n in R.ns:
        a, b = R.get("handoff", "futex_ring", 0, n), R.get("handoff", "futex_ring", 1, n)
        if a and b and not R.busy(a) and not R.busy(b):
            quiet_pairs.append((n, a["median"], b["median"]))
    slow = [(n, u, p) for n, u, p in quiet_pairs if u > 2 * p]
    if not slow:
        return
    w("- **Unpinned handoffs are slow on this machine when it is otherwise idle.** Measured on a quiet "
      "machine, an unpinned futex-ring handoff costs %s against %s pinned (%s). Handing the baton "
      "to a thread that sleeps on the other CPU means waking that CPU; the likely cause is that on a "
      "virtual machine an idle vCPU is halted in the host, so the wake-up goes through the "
      "hypervisor. Pinned, the same "
      "handoff is a context switch on one CPU. When another process keeps the second CPU busy, "
      "unpinned threads mostly share the first one and cost closer to pinned%s. So "
      "unpinned figures here measure the machine's cross-CPU wake-up more than the library, and the "
      "pinned rows are the steadier comparison." % (
          ", ".join(fmt_ns(u) for n, u, p in slow), ", ".join(fmt_ns(p) for n, u, p in slow),
          ", ".join("N=%d" % n for n, u, p in slow), " (the † figures)" if busy_figures(R)[1] else ""))


def floor_met_text(tag: str, rws: List[FloorRow]) -> str:
    """The bullet for a floor target met at every N (and why it is below the ring, if it is)."""
    below = tag != "pinned" and worst(rws, 4) is not None and worst(rws, 4) < 1.0
    return ("- **Floor, %s: met at every N%s.** A yield costs at most %s of the faster %sring's handoff.%s"
            % (FLOOR_TEXT[tag], measured_only(rws, 4), fmt_ratio(worst(rws, 4)),
               "unpinned " if tag == "spread" else "",
               " Below the ring because the ring's threads sleep at once, so each handoff wakes a halted "
               "vCPU, while the library keeps the CPUs busy between turns: %s (docs/design.md)." % (
                   "the next holder is woken one turn ahead and watches its slot on its own CPU"
                   if tag == "spread" else
                   "a suspended rank looks at its slot, yielding, for up to 50 µs before it sleeps")
               if below else ""))


def say_floors(ctx: ReportContext, t: Targets) -> None:
    """The floor targets, per configuration; why a missed one is missed."""
    R, w = ctx.results, ctx.w
    floor_missed = False
    for tag, (rws, ok) in t.floor.items():
        if ok:
            w(floor_met_text(tag, rws))
        elif ok is False:
            floor_missed = True
            w("- **Floor, %s: not met at N = %s**; met at %s. Ratios: %s." % (
                FLOOR_TEXT[tag], ", ".join(str(r[0]) for r in rws if r[5] is False),
                ", ".join(str(r[0]) for r in rws if r[5]) or "no N",
                "; ".join("N=%d %s (%s vs %s)" % (r[0], fmt_ratio(r[4]), fmt_ns(r[1]), fmt_ns(r[2]))
                          for r in rws if r[4] is not None)))
    if floor_missed:
        w("")
        w("  Why: a yield is one handoff to the next rank, like a ring's, so the ratio is the library's own "
          "work per turn (its bookkeeping and the cache misses over N ranks' state) next to one wake-up. "
          "Unpinned, a wake-up of a thread on the other, idle vCPU costs 10-25 µs on this VM and varies "
          "from run to run; where the baton comes straight back (two threads taking turns) only a short "
          "spin while the other CPU is free would avoid it. Pinned, nothing can spin (the next holder "
          "needs the only CPU).%s" % spread_vs_default(R, "yield"))
        w("")


def simgrid_misses(R: Results, sg_rows: List[SimgridRow]) -> str:
    """Each N where the SimGrid target was missed, with the budget next to one ring handoff."""
    parts = []
    for n, kb, sg, r, ok in sg_rows:
        if ok is False:
            budget = 0.25 * sg
            fl = R.floor(0, n)[0]
            parts.append("N=%d %s (target %s%s)" % (
                n, fmt_ratio(r), fmt_ns(budget),
                "" if fl is None else ", %s one ring handoff of %s" % (
                    "below" if budget < fl else "above", fmt_ns(fl))))
    return "; ".join(parts)


def say_simgrid(ctx: ReportContext, t: Targets) -> None:
    """The SimGrid targets (default, then spread)."""
    R, w = ctx.results, ctx.w
    for tag, sg_rows, sg_ok in (("", t.simgrid[0], t.simgrid[1]),
                                (", spread", t.simgrid_spread[0] if t.simgrid_spread else [],
                                 t.simgrid_spread[1] if t.simgrid_spread else None)):
        if sg_ok is None:
            continue
        if sg_ok:
            w("- **SimGrid thread factory%s: met at every N%s** (worst %s).%s" % (
                tag, measured_only(sg_rows, 3), fmt_ratio(worst(sg_rows, 3)),
                "" if tag else " SimGrid's thread factory pays two handoffs per yield (actor → maestro → next "
                               "actor)."))
        elif tag:
            w("- **SimGrid thread factory%s: not met at %s.**" % (tag, simgrid_misses(R, sg_rows)))
        else:
            w("- **SimGrid thread factory: not met at %s.** SimGrid's thread factory pays two handoffs per "
              "yield (actor → maestro → next actor) plus its own bookkeeping; where a quarter of it is "
              "below one ring handoff, only yields that avoid waking a sleeping thread can meet it."
              % simgrid_misses(R, sg_rows))


def say_flat(ctx: ReportContext, t: Targets) -> None:
    """The flat-in-N targets, next to how flat the ring itself is."""
    R, w = ctx.results, ctx.w
    for tag, (a, b, r, ok) in t.flat.items():
        if ok is None:
            continue
        pin = CONFIG_PIN[tag]
        fa, fb = R.floor(pin, 4096)[0], R.floor(pin, 8)[0]
        fr = ratio(fa, fb)
        w("- **Flat in N, %s: %s** (N=4096 / N=8 = %s; the faster %sring itself: %s, %s → %s%s)." % (
            tag, "met" if ok else "not met", fmt_ratio(r), "unpinned " if tag == "spread" else "",
            fmt_ratio(fr), fmt_ns(fb), fmt_ns(fa),
            ": the floor is not flat either, likely because a handoff among 4097 threads touches memory "
            "that is no longer in cache" if fr is not None and fr > 1.3 else ""))


def spawn_over_budget(R: Results, pin: int, rows: List[SpawnRow]) -> List[str]:
    """Where reused threads still miss 10 µs: how much of it the round's handoffs alone take."""
    hard, soft = [], []
    for n, v in [(n, v) for n, v, _ in rows if v is not None and v > 10000]:
        f = R.floor(pin, n)[0]
        if f is None:
            continue
        need = f * (n + 1) / n
        (hard if need > 10000 else soft).append((n, v, need))
    why = []
    if hard:
        why.append("Even with reused threads a spawn is a round: the driver wakes each rank and the last "
                   "one wakes the driver, (N+1)/N handoffs per rank; at N = %s those handoffs alone cost "
                   "%s per rank (the faster %s ring), so 10 µs needs cheaper handoffs there."
                   % (", ".join(str(n) for n, _, _ in hard), ", ".join(fmt_ns(x) for _, _, x in hard),
                      "pinned" if pin else "unpinned"))
    if soft:
        why.append("At N = %s the (N+1)/N handoffs of a round account for %s of the %s per rank; the "
                   "rest is the spawn's own work per rank and per spawn."
                   % (", ".join(str(n) for n, _, _ in soft), ", ".join(fmt_ns(x) for _, _, x in soft),
                      ", ".join(fmt_ns(v) for _, v, _ in soft)))
    return why


def spawn_reasons(R: Results, pin: int, rows: List[SpawnRow]) -> List[str]:
    """Sentences on a configuration's spawn figures: whether threads are reused, why 10 µs is missed."""
    pairs = [(n, v, c) for n, v, c in rows if v is not None and c]
    reused = [(n, v / c) for n, v, c in pairs if v / c < 0.5]
    not_reused = [(n, v / c) for n, v, c in pairs if v / c >= 0.5]
    why = []
    if reused:
        why.append("A repeated spawn costs %s of a cold one at N = %s: the ctx's threads are reused." % (
            " to ".join(sorted({fmt_ratio(min(x for _, x in reused)), fmt_ratio(max(x for _, x in reused))})),
            ", ".join(str(n) for n, _ in reused)))
    if not_reused:
        why.append("At N = %s it costs %s of a cold one." % (
            ", ".join(str(n) for n, _ in not_reused), ", ".join(fmt_ratio(x) for _, x in not_reused)))
    over = any(v is not None and v > 10000 for _, v, _ in rows)
    if over and reused:
        why += spawn_over_budget(R, pin, rows)
    elif over and not reused:
        why.append("Every spawn seems to create and join its threads (pthread_create + join is tens of µs "
                   "here): keeping a ctx's threads parked and reusing them across spawns is the lever.")
    return why


def say_spawn(ctx: ReportContext, t: Targets) -> None:
    """The repeated-spawn targets, per configuration, with the cold figures beside."""
    R, w = ctx.results, ctx.w
    for tag, (rows, ok) in t.spawn.items():
        w("- **Repeated spawn, %s: %s.** Per rank on one ctx: %s; cold (fresh ctx, threads created and "
          "joined): %s. %s" % (
              tag, ("met" + measured_only(rows, 1)) if ok else "not met",
              ", ".join("N=%d %s" % (n, fmt_ns(v)) for n, v, _ in rows if v is not None),
              ", ".join("N=%d %s" % (n, fmt_ns(c)) for n, _, c in rows if c is not None),
              " ".join(spawn_reasons(R, CONFIG_PIN[tag], rows))))


def say_memory(ctx: ReportContext, t: Targets) -> None:
    """The memory target, and the kernel stack outside the process's RSS."""
    R, w = ctx.results, ctx.w
    mem_n, mem_v, ok = t.memory
    if ok is None:
        return
    w("- **Memory: %s.** %.1f KiB resident per idle rank at N=%d (user pages: the touched part of the "
      "thread stack, TLS, the rank's record). The kernel also pins about %s of kernel stack per thread, "
      "outside the process's RSS." % (
          "met" if ok else "not met", mem_v, mem_n,
          fmt_val(R.med("mem_kstack", "kbthreads", 0, mem_n) or 0, "KiB")))


def say_spare(ctx: ReportContext, t: Targets) -> None:
    """The spare-CPU target; where a yield switches no thread at all, the wait figures instead."""
    R, w = ctx.results, ctx.w
    spare, rows, ok = t.spare
    if ok is None:
        return
    sw = R.get("switch", "swapcontext", 0, 1)
    sw_ns = sw["median"] if sw else 150.0
    noswitch = [n for n, kb, _, _ in rows if kb is not None and kb < sw_ns]
    text = "; ".join("N=%d: libkbthreads %s, greenlet %s" % (n, fmt_ns(kb), fmt_ns(gl)) for n, kb, gl, _ in rows)
    if noswitch:
        waits = ["N=%d %s" % (n, fmt_ns(R.med("wait", "kbthreads", 0, n))) for n in noswitch
                 if R.med("wait", "kbthreads", 0, n) is not None]
        spread_waits = ["N=%d %s" % (n, fmt_ns(R.med("wait", "kbthreads_spread", 0, n))) for n in noswitch
                        if R.med("wait", "kbthreads_spread", 0, n) is not None]
        text += (". At N = %s a yield costs less than one `swapcontext`: no thread switch happens (a single "
                 "rank whose round has nothing to drain keeps the baton), so this is met without a handoff. "
                 "A wait, whose round needs the drain and so the driver, costs %s%s (wait table below): the "
                 "case where a spare CPU would have to carry a real handoff under 1 µs"
                 % (", ".join(str(n) for n in noswitch), ", ".join(waits) or "–",
                    "; with the spread option %s" % ", ".join(spread_waits) if spread_waits else ""))
    else:
        text += (". A yield under 1 µs means the rank and the driver meet without sleeping: one spins on "
                 "its own CPU while the other runs")
    w("- **A spare CPU (N ≤ %d): %s.** %s." % (spare, "met" if ok else "not met", text))


def section_discussion(ctx: ReportContext, t: Targets) -> None:
    """What the numbers say: one bullet per target, with the likely cause of a miss."""
    ctx.w("### What the numbers say")
    ctx.w("")
    say_unpinned_handoffs(ctx)
    say_floors(ctx, t)
    say_simgrid(ctx, t)
    say_flat(ctx, t)
    say_spawn(ctx, t)
    say_memory(ctx, t)
    say_spare(ctx, t)
    ctx.w("")


def section_wait(ctx: ReportContext) -> None:
    """ns per wait (+ drain) and per collective against N."""
    R, w = ctx.results, ctx.w
    w("## wait + drain and collectives")
    w("")
    w("Every rank waits on a fresh handle each step (`kb_wait`: queued, yields, completed by the drain "
      "after the round through the engine's wait hook); collective: `kb_collective_submit` then `kb_wait` "
      "on the same handle. ns per wait, median (min–max); greenlet: the same waits in the Python scheduler.")
    w("")
    rows = []
    for bench, impl, label in (("wait", "kbthreads", "libkbthreads wait"),
                               ("wait", "kbthreads_spread", "libkbthreads, spread: wait"),
                               ("collective", "kbthreads", "libkbthreads collective"),
                               ("collective", "kbthreads_spread", "libkbthreads, spread: collective"),
                               ("wait", "greenlet", "greenlet (Python) wait")):
        if R.has(bench, impl, 0):
            rows.append([label] + [R.cell(bench, impl, 0, n) for n in R.ns])
    if R.has("wait", "kbthreads", 0):
        rows.append(["libkbthreads wait / yield"] + [
            fmt_ratio(ratio(R.med("wait", "kbthreads", 0, n), R.med("yield", "kbthreads", 0, n))) for n in R.ns])
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")


def section_spawn(ctx: ReportContext) -> None:
    """ns per rank of a cold and a repeated spawn, per configuration."""
    R, w = ctx.results, ctx.w
    w("## Spawn cost")
    w("")
    w("N ranks that return at once. Cold: `kb_ctx_create`, `kb_spawn`, `kb_ctx_destroy` (every thread "
      "created and joined). Repeated: further spawns on one ctx after a first one. ns per rank, median "
      "(min–max).")
    w("")
    rows = []
    for tag, impl, pin in CONFIGS:
        for bench, label in (("spawn_cold", "cold (fresh ctx)"), ("spawn_repeat", "repeated on one ctx")):
            if R.has(bench, impl, pin):
                rows.append([label + ("" if tag == "unpinned" else ", " + tag)]
                            + [R.cell(bench, impl, pin, n) for n in R.ns])
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")


def maxn_rows(mx: Dict[str, Any], small_kib: int) -> List[List[Any]]:
    """Per stack size: the largest N that ran and what stopped the search."""
    rows = []
    for impl, r in mx["by_stack"].items():
        label = "default stack" if impl == "kbthreads" else "stack_size = %d KiB" % small_kib
        if r["capped"]:
            why = "not limited below the search cap (%d: the OS limit %d less the machine's other threads " \
                  "and %d spare pids)" % (mx["cap"], mx["os_limit"], mx["headroom"])
        elif r["first_failed"]:
            det = [t["detail"] for t in r["tries"] if t["n"] == r["first_failed"]]
            why = "N=%d failed: %s" % (r["first_failed"], det[0] if det else "?")
        else:
            why = "smoke run: one try"
        rows.append([label, r["largest_ok"], why])
    return rows


def section_memory(ctx: ReportContext) -> None:
    """Memory per idle rank, and the largest N that runs."""
    R, w = ctx.results, ctx.w
    d = R.d
    mem_n = d["params"]["mem_n"]
    small = d["params"]["small_stack"] // 1024
    w("## Memory")
    w("")
    w("A spawn of N=%d ranks, each yielding once: measured by rank 0 at its second turn, when every other "
      "rank is suspended (idle). Per rank, as deltas from before the spawn: resident (VmRSS), peak (VmHWM) "
      "and kernel stacks (KernelStack in /proc/meminfo, system-wide). One process per run." % mem_n)
    w("")
    rows = []
    for impl, label in (("kbthreads", "default stack (8 MiB virtual)"),
                        ("kbthreads-stack%dk" % small, "stack_size = %d KiB" % small)):
        if R.has("mem_idle", impl, 0):
            rows.append([label] + [R.cell(b, impl, 0, mem_n) for b in ("mem_idle", "mem_peak", "mem_kstack")])
    w(md_table(["N=%d" % mem_n, "resident per idle rank", "peak per rank", "kernel stack per rank"], rows))
    w("")
    mx = d.get("maxn")
    if not mx:
        return
    w("Largest N that runs (a spawn whose ranks each yield once), searched by doubling from 4096 and then "
      "bisecting to 1024:")
    w("")
    w(md_table(["", "largest N that ran", "limit"], maxn_rows(mx, small)))
    w("")
    w("Every rank is a thread, so the kernel's pid_max (%s here) bounds N for the whole machine; the "
      "search stops %d pids short of it so that the machine's other processes can still fork."
      % (d["machine"].get("pid_max"), mx["headroom"]))
    w("")


def section_notes(ctx: ReportContext, notes_path: Optional[str]) -> None:
    """bench/report-notes.md as it is (hand-kept: what each lever bought)."""
    if notes_path and os.path.exists(notes_path):
        with open(notes_path) as f:
            ctx.w(f.read().rstrip())
        ctx.w("")


def method_library(ctx: ReportContext) -> None:
    """How the libkbthreads loops (default options and spread) are timed."""
    R, w = ctx.results, ctx.w
    p = R.d["params"]
    w("- **libkbthreads loops** (`bench/kb_bench.c`, through `kb_spawn` on one ctx with an engine whose wait "
      "completes at once): every rank makes one warm-up call, stamps the clock, makes M calls and stamps it "
      "again. Only one rank runs at a time, so from the earliest first stamp to the latest last stamp "
      "exactly M whole rounds pass (N·M calls, N·M + M handoffs, M drains); thread creation and teardown "
      "are outside. M = max(4, ⌈%d / N⌉); a warm-up spawn comes first." % p["kb_ops"])
    spread_ns = p.get("spread_ns", R.ns)
    if R.has("yield", "kbthreads_spread", 0) or R.has("spawn_repeat", "kbthreads_spread", 0):
        w("- **Spread** (`kb_bench --spread`, rows \"libkbthreads, spread\"): the same loops and spawns with the "
          "`KB_AFFINITY_SPREAD` spawn option: rank r's thread pinned to the r-th CPU the driver may use (modulo "
          "their number), the driver unpinned, and a rank handing the baton on also wakes the rank after next, "
          "which spins on its own CPU before it would sleep. Its threads do not share one CPU, so it is held to "
          "the unpinned floors; same M, K and number of runs as the default unpinned figures%s."
          % ("" if list(spread_ns) == list(R.ns) else
             "; measured at N = %s only in this run" % ", ".join(str(n) for n in spread_ns)))


def method_others(ctx: ReportContext) -> None:
    """How the floors and peers are timed, the spawn and memory runs, and the order of the jobs."""
    R, w = ctx.results, ctx.w
    p = R.d["params"]
    w("- **Floors** (`bench/floor_ring.c`): a ring of N threads (2 at N=1) passes a token, %d handoffs per run "
      "(condvar ring: max(16, %d / N), as each of its handoffs wakes every thread); a controller thread "
      "starts and ends each run, its two handoffs counted among the others. futex: one futex word per "
      "thread with three states (empty, posted, sleeping), no wake call when the owner does not sleep, no "
      "spinning. Pinned: every thread on the CPU the main thread is on. `swapcontext`: two contexts on one "
      "thread, ns per switch." % (p["ring_ops"], p["cond_budget"]))
    w("- **greenlet** (`bench/peer_greenlet.py`, Debian's python3-greenlet under /usr/bin/python3): the "
      "reference scheduler's loop, written anew: each round switches to every live rank in rank order, a "
      "rank yields with one switch to the driver, a drain after every round; timed like kb_bench, "
      "M = ⌈%d / N⌉." % p["greenlet_ops"])
    w("- **SimGrid** (`bench/peer_simgrid.cpp`, libsimgrid-dev): N actors on one host call "
      "`this_actor::yield()`, timed like kb_bench; `--cfg=contexts/factory:thread` (every actor a thread, "
      "two handoffs per yield through maestro) and `raw` (user-level switches). One process per run, "
      "M = ⌈%d / N⌉ (thread) and ⌈%d / N⌉ (raw)." % (p["simgrid_ops"]["thread"], p["simgrid_ops"]["raw"]))
    w("- **Spawn**: K spawns per run, K = max(1, %d / N). **Memory**: see above. Every figure: %d runs; "
      "the runs of one figure share a process except SimGrid and memory (a process per run)."
      % (p["spawn_budget"], p["reps"]))
    w("- Order: for each N, libkbthreads (default options%s) and the floors unpinned, then libkbthreads and "
      "the floors pinned, then the peers, so figures compared with each other are taken close in time."
      % (", then the spread option" if R.has("yield", "kbthreads_spread", 0) else ""))


def section_method(ctx: ReportContext) -> None:
    """How each figure is measured."""
    ctx.w("## How each figure is measured")
    ctx.w("")
    method_library(ctx)
    method_others(ctx)
    ctx.w("")


def figure_row(R: Results, r: Row) -> List[Any]:
    """One row of the table of every figure, with the others' share of the CPUs († when busy)."""
    return [r["bench"], r["impl"], r["pin"], r["n"], fmt_val(r["median"], r["unit"]),
            fmt_val(r["min"], r["unit"]), fmt_val(r["max"], r["unit"]), r["count"],
            "–" if r["bench"] == "maxn" else "%.0f%%%s" % (100 * r.get("others_cpu", 0.0),
                                                           " †" if R.busy(r) else "")]


def section_every_figure(ctx: ReportContext, src: str) -> None:
    """Every figure of the results file, and where its raw samples are."""
    R, w = ctx.results, ctx.w
    w("## Every figure")
    w("")
    w("The last column is the largest share of the CPUs that other processes used while one of the figure's "
      "runs was measured († above %d%%)." % (100 * R.busy_share()))
    w("")
    w(md_table(["figure", "implementation", "pinned", "N", "median", "min", "max", "runs", "others' CPU"],
               [figure_row(R, r) for r in R.d["summary"]]))
    w("")
    w("Raw samples: `bench/results/%s` (git-ignored: kept on the machine that ran)." % results_name(R, src))
    w("")


def write_report(R: Results, src: str, out: str, notes_path: Optional[str]) -> None:
    """Write docs/benchmarks.md: every section in order. src: the results file's path."""
    ctx = ReportContext(R)
    t = issue4_targets(R)
    section_header(ctx, src)
    section_machine(ctx)
    section_targets(ctx, t)
    report_python.write(ctx)
    report_baton.write(ctx)
    report_idle.write(ctx)
    report_sim.write(ctx)
    section_yield(ctx)
    section_ratios(ctx, t)
    section_discussion(ctx, t)
    section_wait(ctx)
    section_spawn(ctx)
    section_memory(ctx)
    section_notes(ctx, notes_path)
    report_idle.write_loads(ctx)
    section_method(ctx)
    section_every_figure(ctx, src)
    with open(out, "w") as f:
        f.write("\n".join(ctx.lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(HERE, "results", "bench-latest.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--png-dir", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--notes", default=os.path.join(HERE, "report-notes.md"))
    a = ap.parse_args()
    if not os.path.exists(a.results):
        sys.exit("report.py: %s not found: run `make bench` first" % a.results)
    with open(a.results) as f:
        R = Results(json.load(f))
    ok1, ok2 = write_plots(R, a.png_dir)
    if not (ok1 and ok2):
        print("report.py: note: plots not (all) written (gnuplot missing or no data)", file=sys.stderr)
    write_report(R, a.results, a.out, a.notes)
    print("wrote %s%s" % (a.out, " and plots in %s" % a.png_dir if ok1 else ""))


if __name__ == "__main__":
    main()
