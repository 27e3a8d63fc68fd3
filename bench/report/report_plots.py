# SPDX-License-Identifier: MIT
"""The report's plots, for bench/report/report.py: ns per yield (and per ring
handoff) against N, unpinned and with every thread on one CPU; and µs per
yield against the depth of C frames at the yield (the depth job, N = 8).
gnuplot draws them when it is installed; without it the report is written
alone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, List, Optional, Sequence, Tuple

from bench_shared import fmt_ns
import report_depth
from report_context import Results

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
# The depth plot's series: (impl, label, gnuplot style); x is the depth, not N.
DepthSeries = Tuple[str, str, str]
DEPTH_PLOT: List[DepthSeries] = [
    ("kbthreads_py", "kbthreads (Python)", "lw 3 pt 7 lc rgb '#d62728'"),
    ("greenlet", "greenlet (Python)", "lw 2 pt 13 lc rgb '#2ca02c'")]


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


def depth_plot_lines(R: Results, tmp: str) -> List[str]:
    """The depth plot's clauses: a data file in tmp per measured series, µs against D."""
    plots = []
    n = report_depth.depth_n(R)
    for impl, label, style in DEPTH_PLOT:
        pts = [(d, R.get(report_depth.PREFIX + str(d), impl, 0, n)) for d in report_depth.depths(R)]
        pts = [(d, p) for d, p in pts if p]
        if not pts:
            continue
        path = os.path.join(tmp, "depth-%s.dat" % impl)
        with open(path, "w") as f:
            for d, p in pts:
                f.write("%d %.4f %.4f %.4f\n" % (d, p["median"] / 1e3, p["min"] / 1e3, p["max"] / 1e3))
        plots.append("'%s' using 1:2:3:4 with yerrorlines %s title '%s'" % (path, style, label))
    return plots


def depth_plot_script(R: Results, term: str, png: str, title: str, plots: Sequence[str]) -> str:
    """The depth plot's script: linear axes (greenlet's cost grows with D), D on x, µs on y."""
    font = "font 'DejaVu Sans,11'" if term == "pngcairo" else ""
    ds = report_depth.depths(R)
    c = report_depth.crossover(R)
    lines = [
        "set terminal %s size 1000,760 %s" % (term, font),
        "set output '%s'" % png,
        "set title '%s'" % title,
        "set xrange [-10:%g]" % (max(ds) * 1.05 + 10),
        "set yrange [0:*]",
        "set xtics (%s)" % ", ".join("'%d' %d" % (d, d) for d in ds),
        "set xlabel 'D (nested C calls back into Python at the yield; N = %d ranks)'" % report_depth.depth_n(R),
        "set ylabel 'µs per yield (median; bars: min to max)'",
        "set grid xtics ytics",
        "set key inside left top opaque box samplen 3 spacing 1.1",
    ]
    if c is not None:  # why a line: the crossover is the figure the section reports
        lines.append("set arrow from %d, graph 0 to %d, graph 1 nohead dt 3 lw 2 lc rgb '#777777'" % (c, c))
        lines.append("set label 'crossover D = %d' at %d, graph 0.95 offset 1,0" % (c, c))
    return "\n".join(lines + ["plot " + ", \\\n     ".join(plots)])


LinesFn = Callable[[Results, str], List[str]]
ScriptFn = Callable[[Results, str, str, str, Sequence[str]], str]


def plot(R: Results, png: str, title: str, series_spec: Sequence[PlotSeries],
         lines_fn: Optional[LinesFn] = None, script_fn: ScriptFn = plot_script) -> bool:
    """Write one plot; False when gnuplot is missing, fails, or nothing was measured.
    lines_fn and script_fn: another plot's clauses and script (default: the yield plots')."""
    gp, term = gnuplot_terminal()
    if not gp or not term:
        return False
    tmp = tempfile.mkdtemp(prefix="kbbench-plot-")
    try:
        plots = lines_fn(R, tmp) if lines_fn else plot_lines(R, tmp, series_spec)
        if not plots:
            return False
        p = subprocess.run([gp], input=script_fn(R, term, png, title, plots), capture_output=True, text=True)
        if p.returncode != 0:
            print("report.py: gnuplot failed: %s" % p.stderr.strip(), file=sys.stderr)
            return False
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_plots(R: Results, png_dir: str) -> Tuple[bool, bool, bool]:
    """The unpinned, the pinned and the depth plot: whether each was written."""
    os.makedirs(png_dir, exist_ok=True)
    ok1 = plot(R, os.path.join(png_dir, "bench-yield.png"),
               "ns per yield against N (unpinned; floors: per handoff)", UNPINNED_PLOT)
    ok2 = plot(R, os.path.join(png_dir, "bench-yield-pinned.png"),
               "ns per yield against N, every thread on one CPU (floors: per handoff)", PINNED_PLOT)
    ok3 = plot(R, os.path.join(png_dir, "bench-depth.png"),
               "µs per yield against the depth of C frames at the yield, kbthreads against greenlet", [],
               lines_fn=depth_plot_lines, script_fn=depth_plot_script)
    return ok1, ok2, ok3

