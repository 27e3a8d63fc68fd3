#!/usr/bin/python3
"""Write docs/benchmarks.md and its plots from a results file of bench/run.py.

    report.py [--results bench/results/bench-latest.json] [--out docs/benchmarks.md] [--png-dir docs]

Everything in the report comes from the results file (the machine, every
figure, the ratios to the floors and peers, the verdict on each target of
issue 4), except bench/report-notes.md, which is copied in as it is (the
hand-kept notes: what each lever bought, profiles). Plots need gnuplot.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import report_python  # noqa: E402  (the section on Python ranks and timed joins)
import report_baton  # noqa: E402  (the section on the condvar and futex batons)
import report_idle  # noqa: E402  (issue 20: the default against the best configuration; loads)
import report_sim  # noqa: E402  (issue 20: the simulation-shaped job, a CPU hog, two side by side)

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


def fmt_ns(v):
    if v is None:
        return "–"
    if v >= 1e6:
        return "%.2f ms" % (v / 1e6)
    if v >= 1e4:
        return "%.1f µs" % (v / 1e3)
    if v >= 1e3:
        return "%.2f µs" % (v / 1e3)
    return "%.0f ns" % v


def fmt_val(v, unit):
    if unit == "ns":
        return fmt_ns(v)
    if unit == "KiB":
        return "%.1f KiB" % v
    return "%d" % v if float(v).is_integer() else "%g" % v


def fmt_ratio(r):
    if r is None:
        return "–"
    return "%.2fx" % r if r >= 0.1 else "%.2gx" % r


class Results:
    def __init__(self, data):
        self.d = data
        self.rows = {}
        for r in data["summary"]:
            self.rows[(r["bench"], r["impl"], r["pin"], r["n"])] = r
        self.ns = data["params"]["ns"]

    def get(self, bench, impl, pin, n):
        return self.rows.get((bench, impl, pin, n))

    def med(self, bench, impl, pin, n):
        r = self.get(bench, impl, pin, n)
        return r["median"] if r else None

    def has(self, bench, impl, pin=None):
        return any(k[0] == bench and k[1] == impl and (pin is None or k[2] == pin) for k in self.rows)

    def busy(self, r):
        """Measured while other processes used the CPUs (the hog and side-by-side
        sections load the machine on purpose: not counted)."""
        if r["impl"].endswith(("_hog", "_pair")):
            return False
        return r.get("others_cpu", 0.0) > self.d.get("busy_share", 0.15)

    def cell(self, bench, impl, pin, n):
        r = self.get(bench, impl, pin, n)
        if not r:
            return "–"
        return "%s (%s–%s)%s" % (fmt_val(r["median"], r["unit"]), fmt_val(r["min"], r["unit"]),
                                 fmt_val(r["max"], r["unit"]), " †" if self.busy(r) else "")

    def floor(self, pin, n):
        """The faster of the futex and the semaphore ring (median)."""
        c = [(self.med("handoff", k, pin, n), k) for k in ("futex_ring", "sem_ring")]
        c = [x for x in c if x[0] is not None]
        return min(c) if c else (None, None)


# The libkbthreads configurations the targets are checked for, in the order of
# the report's rows: (tag, impl, pin). Each is compared with the floors of the
# same pin. "spread" is the KB_AFFINITY_SPREAD spawn option (kb_bench
# --spread): its threads do not share one CPU, so its figures have pin 0 and
# it is held to the unpinned floors.
CONFIGS = [("unpinned", "kbthreads", 0), ("spread", "kbthreads_spread", 0), ("pinned", "kbthreads", 1)]
CONFIG_PIN = {tag: pin for tag, _, pin in CONFIGS}
CONFIG_IMPL = {tag: impl for tag, impl, _ in CONFIGS}


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(ok):
    return {True: "**met**", False: "**not met**", None: "not measured"}[ok]


# ---------------------------------------------------------------------------
# Targets (issue 4)
# ---------------------------------------------------------------------------

def target_floor(R, pin, impl="kbthreads"):
    rows, oks = [], []
    for n in R.ns:
        kb = R.med("yield", impl, pin, n)
        fl, which = R.floor(pin, n)
        r = ratio(kb, fl)
        ok = None if r is None else r <= 1.25
        oks.append(ok)
        rows.append((n, kb, fl, which, r, ok))
    measured = [o for o in oks if o is not None]
    return rows, (all(measured) if measured else None)


def target_simgrid(R, impl="kbthreads"):
    rows, oks = [], []
    for n in R.ns:
        kb = R.med("yield", impl, 0, n)
        sg = R.med("yield", "simgrid_thread", 0, n)
        r = ratio(kb, sg)
        ok = None if r is None else r <= 0.25
        oks.append(ok)
        rows.append((n, kb, sg, r, ok))
    measured = [o for o in oks if o is not None]
    return rows, (all(measured) if measured else None)


def target_flat(R, pin, impl="kbthreads"):
    a = R.med("yield", impl, pin, 4096)
    b = R.med("yield", impl, pin, 8)
    r = ratio(a, b)
    return a, b, r, (None if r is None else r <= 1.5)


def target_spawn(R, pin, impl="kbthreads"):
    rows = [(n, R.med("spawn_repeat", impl, pin, n), R.med("spawn_cold", impl, pin, n))
            for n in R.ns]
    measured = [v for _, v, _ in rows if v is not None]
    return rows, (max(measured) <= 10000 if measured else None)


def target_memory(R):
    n = R.d["params"]["mem_n"]
    v = R.med("mem_idle", "kbthreads", 0, n)
    return n, v, (None if v is None or n != 4096 else v <= 64)


def target_spare(R):
    spare = (R.d["machine"].get("nproc") or 1) - 1
    rows, oks = [], []
    for n in R.ns:
        if n > spare:
            continue
        kb = R.med("yield", "kbthreads", 0, n)
        gl = R.med("yield", "greenlet", 0, n)
        ok = None if kb is None else (kb <= 1000 and (gl is None or kb < gl))
        oks.append(ok)
        rows.append((n, kb, gl, ok))
    measured = [o for o in oks if o is not None]
    return spare, rows, (all(measured) if measured else None)


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------

def gnuplot_terminal():
    gp = shutil.which("gnuplot")
    if not gp:
        return None, None
    for term in ("pngcairo", "png"):
        p = subprocess.run([gp, "-e", "set terminal %s" % term], capture_output=True)
        if p.returncode == 0:
            return gp, term
    return gp, None


def plot(R, png, pin, title, series_spec):
    gp, term = gnuplot_terminal()
    if not gp or not term:
        return False
    tmp = tempfile.mkdtemp(prefix="kbbench-plot-")
    try:
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
        if not plots:
            return False
        font = "font 'DejaVu Sans,11'" if term == "pngcairo" else ""
        script = "\n".join([
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
        p = subprocess.run([gp], input=script, capture_output=True, text=True)
        if p.returncode != 0:
            print("report.py: gnuplot failed: %s" % p.stderr.strip(), file=sys.stderr)
            return False
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def write_report(R, src, out, png_dir, notes_path):
    d = R.d
    m = d["machine"]
    lines = []
    w = lines.append
    rel = "bench/results/" + d.get("file", os.path.basename(src))
    w("# Benchmarks")
    w("")
    w("<!-- Generated by `make bench-report` (bench/report.py) from %s. Do not edit: edit bench/report.py or "
      "bench/report-notes.md and regenerate. -->" % rel)
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

    # -- machine
    w("## The machine and the run")
    w("")
    lc = m.get("lscpu", {})
    rows = [
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
        ("peers", "%s; %s" % (
            "greenlet %s on Python %s" % (d["info"]["greenlet_version"], d["info"].get("python_version", "?"))
            if "greenlet_version" in d["info"] else "greenlet: not run",
            "SimGrid %s" % d["info"]["simgrid_version"] if "simgrid_version" in d["info"] else "SimGrid: not run")),
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
    w(md_table(["", ""], rows))
    w("")
    share = d.get("busy_share", 0.15)
    timed = [r for r in d["summary"] if r["bench"] != "maxn"]
    busy_rows = [r for r in timed if R.busy(r)]
    if busy_rows:
        retries = d["params"].get("retry_busy", 0)
        w("> **Part of this run shared the machine.** While %d of its %d figures were measured, other "
          "processes used more than %d%% of the CPUs (measured per job from /proc/stat, less the benchmark's "
          "own CPU time%s). They are marked † in the tables and listed with their share in the last table. "
          "Thread handoffs (libkbthreads, the floors, SimGrid's thread factory) suffer most, unpinned ones "
          "above all: a thread woken on a CPU that another process is using can wait for it. Rerun "
          "`make bench-report` on a quiet machine for reference numbers." % (
              len(busy_rows), len(timed), 100 * share,
              "; such jobs were measured again, up to %d time(s) within a %d s budget, and the quietest "
              "attempt kept" % (retries, d["params"].get("retry_budget", 0)) if retries else ""))
        w("")
    else:
        w("Other processes used at most %d%% of the CPUs while any figure was measured (per job, from "
          "/proc/stat less the benchmark's own CPU time)." % round(100 * max(
              [r.get("others_cpu", 0.0) for r in timed] or [0])))
        w("")
    for note in d["notes"]:
        w("> Note: %s" % note)
        w("")
    for f in d["failures"]:
        w("> **Failed:** %s" % f)
        w("")

    # -- targets
    w("## Targets")
    w("")
    # Keyed by configuration tag (CONFIGS), in CONFIGS order: unpinned, spread, pinned.
    t1 = {tag: target_floor(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("yield", impl, pin)}
    t2_rows, t2 = target_simgrid(R)
    t2s = target_simgrid(R, "kbthreads_spread") if R.has("yield", "kbthreads_spread", 0) else None
    t3 = {tag: target_flat(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("yield", impl, pin)}
    t4 = {tag: target_spawn(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("spawn_repeat", impl, pin)}
    mem_n, mem_v, t5 = target_memory(R)
    spare, t6_rows, t6 = target_spare(R)

    def worst(rows, idx):
        vals = [r[idx] for r in rows if r[idx] is not None]
        return max(vals) if vals else None

    def measured_only(rows, idx):
        """" (measured at N = ... only)" when not every N of the run has the figure (a smoke run's spread jobs)."""
        have = [r[0] for r in rows if r[idx] is not None]
        return "" if len(have) == len(rows) else " (measured at N = %s only)" % ", ".join(str(n) for n in have)

    def spread_vs_default(bench):
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

    # Every row with the configuration it is about: "unpinned" (default
    # options; also the rows without a mark), "pinned" (KB_AFFINITY_ONE_CPU),
    # "spread" (KB_AFFINITY_SPREAD). The spread rows sit next to the default
    # unpinned ones and are counted apart.
    summary, configs = [], []

    def target_row(config, text, measured, ok):
        summary.append((text, measured, verdict(ok)))
        configs.append(config)

    floor_text = {"unpinned": "unpinned", "pinned": "pinned",
                  "spread": "spread (against the unpinned ring)"}
    for tag, (rows, ok) in t1.items():
        target_row(tag, "yield ≤ 1.25x one handoff of the faster ring, same N, %s" % floor_text[tag],
                   "worst %s%s" % (fmt_ratio(worst(rows, 4)), measured_only(rows, 4)), ok)
    target_row("unpinned", "yield ≤ 0.25x SimGrid thread factory, every N",
               "worst %s" % fmt_ratio(worst(t2_rows, 3)), t2)
    if t2s is not None:
        target_row("spread", "yield ≤ 0.25x SimGrid thread factory, every N, spread",
                   "worst %s%s" % (fmt_ratio(worst(t2s[0], 3)), measured_only(t2s[0], 3)), t2s[1])
    for tag, (a, b, r, ok) in t3.items():
        target_row(tag, "flat: yield at N=4096 ≤ 1.5x N=8, %s" % tag,
                   "%s / %s = %s" % (fmt_ns(a), fmt_ns(b), fmt_ratio(r)), ok)
    for tag, (rows, ok) in t4.items():
        target_row(tag, "repeated spawn on one ctx ≤ 10 µs per rank, every N, %s" % tag,
                   "worst %s%s" % (fmt_ns(worst(rows, 1)), measured_only(rows, 1)), ok)
    target_row("unpinned", "≤ 64 KiB resident per idle rank, N=4096, default options",
               "%s" % ("–" if mem_v is None else "%.1f KiB (N=%d)" % (mem_v, mem_n)), t5)
    target_row("unpinned", "spare CPU, N ≤ %d: yield ≤ 1 µs and faster than greenlet" % spare,
               ", ".join("N=%d: %s vs %s" % (n, fmt_ns(kb), fmt_ns(gl)) for n, kb, gl, _ in t6_rows) or "–", t6)
    w(md_table(["target (issue 4)", "measured (medians)", "verdict"], summary))
    w("")

    def count(tags):
        rows = [row for row, c in zip(summary, configs) if c in tags]
        return sum(1 for row in rows if row[2] == "**met**"), len(rows)

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
    w(line)
    w("")

    report_python.write(R, w, sys.modules[__name__])
    report_baton.write(R, w, sys.modules[__name__])
    report_idle.write(R, w, sys.modules[__name__])
    report_sim.write(R, w, sys.modules[__name__])

    # -- yield
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
    series = [("yield", "kbthreads", 0), ("yield", "kbthreads_spread", 0), ("yield", "kbthreads", 1),
              ("handoff", "futex_ring", 0),
              ("handoff", "futex_ring", 1), ("handoff", "sem_ring", 0), ("handoff", "sem_ring", 1),
              ("handoff", "cond_bcast", 0), ("handoff", "cond_bcast", 1), ("yield", "greenlet", 0),
              ("yield", "simgrid_thread", 0), ("yield", "simgrid_raw", 0)]
    rows = []
    for bench, impl, pin in series:
        if R.has(bench, impl, pin):
            rows.append(["%s%s" % (LABELS[impl], ", pinned" if pin else "")]
                        + [R.cell(bench, impl, pin, n) for n in R.ns])
    sw = R.get("switch", "swapcontext", 0, 1)
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")
    if sw:
        w("Single thread: one `swapcontext` switch costs %s (%s–%s)." % (
            fmt_ns(sw["median"]), fmt_ns(sw["min"]), fmt_ns(sw["max"])))
        w("")

    w("### Ratios")
    w("")
    hdr = ["N"] + [str(n) for n in R.ns]
    rrows = []
    def mixed(pairs):
        if not all(R.get(*p) for p in pairs):
            return ""  # a ratio that was not measured ("–")
        return " †" if any(R.busy(R.get(*p)) for p in pairs) else ""

    floor_label = {"unpinned": "libkbthreads / faster ring (target ≤ 1.25)",
                   "spread": "libkbthreads spread / faster ring (unpinned) (target ≤ 1.25)",
                   "pinned": "libkbthreads / faster ring, pinned (target ≤ 1.25)"}
    for tag, (rws, _) in t1.items():
        impl, pin = CONFIG_IMPL[tag], CONFIG_PIN[tag]
        rrows.append([floor_label[tag]]
                     + ["%s%s%s" % (fmt_ratio(r[4]), "" if r[4] is None else (" ✓" if r[5] else " ✗"),
                                    mixed([("yield", impl, pin, r[0]), ("handoff", r[3], pin, r[0])]))
                        for r in rws])
    for impl, label, sg_rows in (("kbthreads", "libkbthreads / SimGrid thread (target ≤ 0.25)", t2_rows),
                                 ("kbthreads_spread", "libkbthreads spread / SimGrid thread (target ≤ 0.25)",
                                  t2s[0] if t2s else [])):
        if any(r[3] is not None for r in sg_rows):
            rrows.append([label]
                         + ["%s%s%s" % (fmt_ratio(r[3]), "" if r[3] is None else (" ✓" if r[4] else " ✗"),
                                        mixed([("yield", impl, 0, r[0]), ("yield", "simgrid_thread", 0, r[0])]))
                            for r in sg_rows])
    for impl in ("greenlet", "simgrid_raw"):
        if R.has("yield", impl, 0):
            rrows.append(["libkbthreads / %s" % LABELS[impl]]
                         + [fmt_ratio(ratio(R.med("yield", "kbthreads", 0, n), R.med("yield", impl, 0, n)))
                            for n in R.ns])
    if R.has("handoff", "cond_bcast", 0):
        rrows.append(["condvar broadcast / faster ring (the naive baton)"]
                     + [fmt_ratio(ratio(R.med("handoff", "cond_bcast", 0, n), R.floor(0, n)[0])) for n in R.ns])
    for tag in ("pinned", "spread"):
        if tag in t1 and "unpinned" in t1:
            rrows.append(["libkbthreads %s / unpinned" % tag]
                         + [fmt_ratio(ratio(R.med("yield", CONFIG_IMPL[tag], CONFIG_PIN[tag], n),
                                            R.med("yield", "kbthreads", 0, n)))
                            for n in R.ns])
    if R.has("handoff", "futex_ring", 1):
        rrows.append(["futex ring pinned / unpinned"]
                     + ["%s%s" % (fmt_ratio(ratio(R.med("handoff", "futex_ring", 1, n),
                                                  R.med("handoff", "futex_ring", 0, n))),
                                  mixed([("handoff", "futex_ring", 0, n), ("handoff", "futex_ring", 1, n)]))
                        for n in R.ns])
    w(md_table(hdr, rrows))
    w("")
    w("† in a ratio: at least one of its two figures was measured while other processes used the CPUs, "
      "so the two may have been measured under different conditions.")
    w("")

    # -- discussion of the targets
    w("### What the numbers say")
    w("")
    quiet_pairs = []
    for n in R.ns:
        a, b = R.get("handoff", "futex_ring", 0, n), R.get("handoff", "futex_ring", 1, n)
        if a and b and not R.busy(a) and not R.busy(b):
            quiet_pairs.append((n, a["median"], b["median"]))
    if quiet_pairs:
        slow = [(n, u, p) for n, u, p in quiet_pairs if u > 2 * p]
        if slow:
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
                  ", ".join("N=%d" % n for n, u, p in slow), " (the † figures)" if busy_rows else ""))
    floor_missed = False
    for tag, (rws, ok) in t1.items():
        bad = [r for r in rws if r[5] is False]
        good = [r for r in rws if r[5]]
        if ok:
            below = tag != "pinned" and worst(rws, 4) is not None and worst(rws, 4) < 1.0
            w("- **Floor, %s: met at every N%s.** A yield costs at most %s of the faster %sring's handoff.%s"
              % (floor_text[tag], measured_only(rws, 4), fmt_ratio(worst(rws, 4)),
                 "unpinned " if tag == "spread" else "",
                 " Below the ring because the ring's threads sleep at once, so each handoff wakes a halted "
                 "vCPU, while the library keeps the CPUs busy between turns: %s (docs/design.md)." % (
                     "the next holder is woken one turn ahead and watches its slot on its own CPU"
                     if tag == "spread" else
                     "a suspended rank looks at its slot, yielding, for up to 50 µs before it sleeps")
                 if below else ""))
        elif ok is False:
            floor_missed = True
            w("- **Floor, %s: not met at N = %s**; met at %s. Ratios: %s." % (
                floor_text[tag], ", ".join(str(r[0]) for r in bad),
                ", ".join(str(r[0]) for r in good) or "no N",
                "; ".join("N=%d %s (%s vs %s)" % (r[0], fmt_ratio(r[4]), fmt_ns(r[1]), fmt_ns(r[2]))
                          for r in rws if r[4] is not None)))
    if floor_missed:
        w("")
        w("  Why: a yield is one handoff to the next rank, like a ring's, so the ratio is the library's own "
          "work per turn (its bookkeeping and the cache misses over N ranks' state) next to one wake-up. "
          "Unpinned, a wake-up of a thread on the other, idle vCPU costs 10-25 µs on this VM and varies "
          "from run to run; where the baton comes straight back (two threads taking turns) only a short "
          "spin while the other CPU is free would avoid it. Pinned, nothing can spin (the next holder "
          "needs the only CPU).%s" % spread_vs_default("yield"))
        w("")
    for tag, sg_rows, sg_ok in (("", t2_rows, t2), (", spread", t2s[0] if t2s else [], t2s[1] if t2s else None)):
        if sg_ok is None:
            continue
        if sg_ok:
            w("- **SimGrid thread factory%s: met at every N%s** (worst %s).%s" % (
                tag, measured_only(sg_rows, 3), fmt_ratio(worst(sg_rows, 3)),
                "" if tag else " SimGrid's thread factory pays two handoffs per yield (actor → maestro → next "
                               "actor)."))
        else:
            parts = []
            for n, kb, sg, r, ok in sg_rows:
                if ok is False:
                    budget = 0.25 * sg
                    fl = R.floor(0, n)[0]
                    parts.append("N=%d %s (target %s%s)" % (
                        n, fmt_ratio(r), fmt_ns(budget),
                        "" if fl is None else ", %s one ring handoff of %s" % (
                            "below" if budget < fl else "above", fmt_ns(fl))))
            if tag:
                w("- **SimGrid thread factory%s: not met at %s.**" % (tag, "; ".join(parts)))
            else:
                w("- **SimGrid thread factory: not met at %s.** SimGrid's thread factory pays two handoffs per "
                  "yield (actor → maestro → next actor) plus its own bookkeeping; where a quarter of it is "
                  "below one ring handoff, only yields that avoid waking a sleeping thread can meet it."
                  % "; ".join(parts))
    for tag, (a, b, r, ok) in t3.items():
        if ok is not None:
            pin = CONFIG_PIN[tag]
            fa, fb = R.floor(pin, 4096)[0], R.floor(pin, 8)[0]
            fr = ratio(fa, fb)
            w("- **Flat in N, %s: %s** (N=4096 / N=8 = %s; the faster %sring itself: %s, %s → %s%s)." % (
                tag, "met" if ok else "not met", fmt_ratio(r), "unpinned " if tag == "spread" else "",
                fmt_ratio(fr), fmt_ns(fb), fmt_ns(fa),
                ": the floor is not flat either, likely because a handoff among 4097 threads touches memory "
                "that is no longer in cache" if fr is not None and fr > 1.3 else ""))
    for tag, (t4_rows, ok) in t4.items():
        pin = CONFIG_PIN[tag]
        pairs = [(n, v, c) for n, v, c in t4_rows if v is not None and c]
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
        over = [(n, v) for n, v, _ in t4_rows if v is not None and v > 10000]
        if over and reused:
            hard, soft = [], []
            for n, v in over:
                f = R.floor(pin, n)[0]
                if f is None:
                    continue
                need = f * (n + 1) / n
                (hard if need > 10000 else soft).append((n, v, need))
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
        elif over and not reused:
            why.append("Every spawn seems to create and join its threads (pthread_create + join is tens of µs "
                       "here): keeping a ctx's threads parked and reusing them across spawns is the lever.")
        w("- **Repeated spawn, %s: %s.** Per rank on one ctx: %s; cold (fresh ctx, threads created and "
          "joined): %s. %s" % (
              tag, ("met" + measured_only(t4_rows, 1)) if ok else "not met",
              ", ".join("N=%d %s" % (n, fmt_ns(v)) for n, v, _ in t4_rows if v is not None),
              ", ".join("N=%d %s" % (n, fmt_ns(c)) for n, _, c in t4_rows if c is not None), " ".join(why)))
    if t5 is not None:
        w("- **Memory: %s.** %.1f KiB resident per idle rank at N=%d (user pages: the touched part of the "
          "thread stack, TLS, the rank's record). The kernel also pins about %s of kernel stack per thread, "
          "outside the process's RSS." % (
              "met" if t5 else "not met", mem_v, mem_n,
              fmt_val(R.med("mem_kstack", "kbthreads", 0, mem_n) or 0, "KiB")))
    if t6 is not None:
        sw_ns = sw["median"] if sw else 150.0
        noswitch = [n for n, kb, _, _ in t6_rows if kb is not None and kb < sw_ns]
        text = "; ".join("N=%d: libkbthreads %s, greenlet %s" % (n, fmt_ns(kb), fmt_ns(gl)) for n, kb, gl, _ in t6_rows)
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
        w("- **A spare CPU (N ≤ %d): %s.** %s." % (spare, "met" if t6 else "not met", text))
    w("")

    # -- wait / collective
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

    # -- spawn
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

    # -- memory
    w("## Memory")
    w("")
    small = d["params"]["small_stack"] // 1024
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
    if mx:
        w("Largest N that runs (a spawn whose ranks each yield once), searched by doubling from 4096 and then "
          "bisecting to 1024:")
        w("")
        rows = []
        for impl, r in mx["by_stack"].items():
            label = "default stack" if impl == "kbthreads" else "stack_size = %d KiB" % small
            if r["capped"]:
                why = "not limited below the search cap (%d: the OS limit %d less the machine's other threads " \
                      "and %d spare pids)" % (mx["cap"], mx["os_limit"], mx["headroom"])
            elif r["first_failed"]:
                det = [t["detail"] for t in r["tries"] if t["n"] == r["first_failed"]]
                why = "N=%d failed: %s" % (r["first_failed"], det[0] if det else "?")
            else:
                why = "smoke run: one try"
            rows.append([label, r["largest_ok"], why])
        w(md_table(["", "largest N that ran", "limit"], rows))
        w("")
        w("Every rank is a thread, so the kernel's pid_max (%s here) bounds N for the whole machine; the "
          "search stops %d pids short of it so that the machine's other processes can still fork."
          % (m.get("pid_max"), mx["headroom"]))
        w("")

    # -- notes (hand-kept)
    if notes_path and os.path.exists(notes_path):
        with open(notes_path) as f:
            w(f.read().rstrip())
        w("")

    report_idle.write_loads(R, w, sys.modules[__name__])

    # -- method
    w("## How each figure is measured")
    w("")
    p = d["params"]
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
    w("")

    # -- every figure
    w("## Every figure")
    w("")
    rows = []
    for r in d["summary"]:
        rows.append([r["bench"], r["impl"], r["pin"], r["n"], fmt_val(r["median"], r["unit"]),
                     fmt_val(r["min"], r["unit"]), fmt_val(r["max"], r["unit"]), r["count"],
                     "–" if r["bench"] == "maxn" else "%.0f%%%s" % (100 * r.get("others_cpu", 0.0),
                                                                     " †" if R.busy(r) else "")])
    w("The last column is the largest share of the CPUs that other processes used while one of the figure's "
      "runs was measured († above %d%%)." % (100 * d.get("busy_share", 0.15)))
    w("")
    w(md_table(["figure", "implementation", "pinned", "N", "median", "min", "max", "runs", "others' CPU"], rows))
    w("")
    w("Raw samples: `bench/results/%s` (git-ignored: kept on the machine that ran)."
      % d.get("file", os.path.basename(src)))
    w("")

    with open(out, "w") as f:
        f.write("\n".join(lines))


def main():
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
    os.makedirs(a.png_dir, exist_ok=True)
    unpinned = [("yield", "kbthreads", 0, "libkbthreads", "lw 3 pt 7 lc rgb '#d62728'"),
                ("yield", "kbthreads_spread", 0, "libkbthreads, spread", "lw 3 dt 2 pt 6 lc rgb '#ff7f0e'"),
                ("handoff", "futex_ring", 0, "futex ring (per handoff)", "lw 2 pt 5 lc rgb '#1f77b4'"),
                ("handoff", "sem_ring", 0, "semaphore ring (per handoff)", "lw 2 pt 9 lc rgb '#17becf'"),
                ("handoff", "cond_bcast", 0, "mutex+condvar broadcast (per handoff)", "lw 2 pt 11 lc rgb '#8c564b'"),
                ("yield", "greenlet", 0, "greenlet (Python)", "lw 2 pt 13 lc rgb '#2ca02c'"),
                ("yield", "simgrid_thread", 0, "SimGrid thread factory", "lw 2 pt 3 lc rgb '#9467bd'"),
                ("yield", "simgrid_raw", 0, "SimGrid raw factory", "lw 2 pt 2 lc rgb '#e377c2'")]
    pinned = [("yield", "kbthreads", 1, "libkbthreads, pinned", "lw 3 pt 7 lc rgb '#d62728'"),
              ("yield", "kbthreads", 0, "libkbthreads, unpinned", "lw 1 dt 2 pt 6 lc rgb '#d62728'"),
              ("handoff", "futex_ring", 1, "futex ring, pinned", "lw 2 pt 5 lc rgb '#1f77b4'"),
              ("handoff", "sem_ring", 1, "semaphore ring, pinned", "lw 2 pt 9 lc rgb '#17becf'"),
              ("handoff", "cond_bcast", 1, "mutex+condvar broadcast, pinned", "lw 2 pt 11 lc rgb '#8c564b'")]
    ok1 = plot(R, os.path.join(a.png_dir, "bench-yield.png"), 0,
               "ns per yield against N (unpinned; floors: per handoff)", unpinned)
    ok2 = plot(R, os.path.join(a.png_dir, "bench-yield-pinned.png"), 1,
               "ns per yield against N, every thread on one CPU (floors: per handoff)", pinned)
    if not (ok1 and ok2):
        print("report.py: note: plots not (all) written (gnuplot missing or no data)", file=sys.stderr)
    write_report(R, a.results, a.out, a.png_dir, a.notes)
    print("wrote %s%s" % (a.out, " and plots in %s" % a.png_dir if ok1 else ""))


if __name__ == "__main__":
    main()
