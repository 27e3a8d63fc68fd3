# SPDX-License-Identifier: MIT
"""The report's section on the reactive wait policy (issue 31), for
bench/report/report.py: the default against every forced mode, the static choice
and the library's affinity modes, idle (0 and 2 µs of work per operation),
beside a CPU hog and with two simulations side by side; what measuring
costs; the Python simulation against greenlet; one verdict per target.

Figures: the results' "policy" cells (bench/harness/jobs_policy.py). A cell's
value is the median of its processes' medians; its noise is the spread of
those process medians ((max - min) / median), the run's own measure of how
much two processes of one configuration differ.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

import report_ablation
from bench_shared import fmt_ns, fmt_ratio
from report_context import ReportContext, Results, md_table, verdict
from targets import limit, policy_sim_limits

FORCED = ("look", "nudge", "sleep", "spin")
OWN = ("one_cpu", "spread", "taskset")
OWN_LABEL = {"one_cpu": "`KB_AFFINITY_ONE_CPU`", "spread": "`KB_AFFINITY_SPREAD`", "taskset": "`taskset -c 0`"}
Key = Tuple[str, str, int]  # (section, bench, N)


class Cells:
    """The run's policy cells by (section, bench, N) and configuration."""

    def __init__(self, R: Results) -> None:
        self.by: Dict[Key, Dict[str, dict]] = {}
        # Filled by the tables: a cell's noise (the larger of the default's
        # and its best forced mode's), and the idle cells' best forced /
        # best own ratio.
        self.noise_of: Dict[str, float] = {}
        self.own_bound: List[Tuple[str, float]] = []
        for c in R.d.get("policy") or []:
            self.by.setdefault((c["section"], c["bench"], c["n"]), {})[c["config"]] = c

    def keys(self, section: str) -> List[Key]:
        return sorted((k for k in self.by if k[0] == section), key=lambda k: (k[1], k[2]))

    def med(self, key: Key, cfg: str) -> Optional[float]:
        c = self.by.get(key, {}).get(cfg)
        pm = c["process_medians"] if c else []
        return statistics.median(pm) if pm else None

    def noise(self, key: Key, cfg: str) -> Optional[float]:
        c = self.by.get(key, {}).get(cfg)
        pm = c["process_medians"] if c else []
        return (max(pm) - min(pm)) / statistics.median(pm) if len(pm) > 1 else None

    def best(self, key: Key, cfgs: Sequence[str]) -> Tuple[Optional[float], Optional[str]]:
        c = [(self.med(key, x), x) for x in cfgs]
        c = [x for x in c if x[0] is not None]
        return min(c) if c else (None, None)

    def ended(self, key: Key, cfg: str) -> str:
        """The modes the configuration's spawns ended in, with their count when they differ."""
        c = self.by.get(key, {}).get(cfg)
        modes = [v.split(":", 1)[0] for v in (c["wait_end"] if c else [])]
        if not modes:
            return "–"
        return "/".join("%s%s" % (m, "" if modes.count(m) == len(modes) else "×%d" % modes.count(m))
                        for m in sorted(set(modes)))

    def switched(self, key: Key) -> str:
        """Switches of the default's extra (stats) spawns, summed."""
        c = self.by.get(key, {}).get("auto")
        ends = [v.split(":") for v in (c["wait_end"] if c else [])]
        ends = [e for e in ends if len(e) >= 3]
        if not ends:
            return "–"
        return "%d" % sum(int(e[2]) for e in ends)


def label(key: Key) -> Tuple[str, str]:
    """(op, work) of a cell's bench name: yield_w2000 -> ("yield", "2 µs")."""
    b = key[1]
    if "_w" in b:
        op, w = b.rsplit("_w", 1)
        return op, "%g µs" % (int(w) / 1000)
    return b, "–"


def pct(x: Optional[float]) -> str:
    return "–" if x is None else "%.0f%%" % (100 * x)


def worst(rows: List[Tuple[str, float]]) -> str:
    if not rows:
        return "–"
    w = max(rows, key=lambda x: x[1])
    return "worst %.2fx (%s)" % (w[1], w[0])


def idle_table(C: Cells, w) -> Tuple[List[Tuple[str, float]], List[Tuple[str, float]], List[Tuple[str, float]]]:
    """The idle table; (default / best forced, default / best own, default / static) per cell."""
    rows, vs_forced, vs_own, vs_static = [], [], [], []
    C.own_bound = []  # (cell, best forced / best own): what no unpinned mode gets below
    for key in C.keys("idle"):
        op, work = label(key)
        d = C.med(key, "auto")
        bf, which_f = C.best(key, FORCED)
        bo, which_o = C.best(key, OWN)
        st = C.med(key, "static")
        name = "%s N=%d W=%s" % (op, key[2], work)
        rf = d / bf if d and bf else None
        ro = d / bo if d and bo else None
        if rf is not None:
            vs_forced.append((name, rf))
            C.noise_of[name] = max(x or 0.0 for x in (C.noise(key, "auto"), C.noise(key, which_f)))
        if ro is not None:
            vs_own.append((name, ro))
            if bf:
                C.own_bound.append((name, bf / bo))
        if d and st:
            vs_static.append((name, d / st))
        rows.append([op, work, key[2], fmt_ns(d), C.ended(key, "auto"), C.switched(key), fmt_ns(st)]
                    + [fmt_ns(C.med(key, m)) for m in FORCED] + [fmt_ns(C.med(key, m)) for m in OWN]
                    + ["%s %s" % (fmt_ratio(rf), which_f or ""), "%s %s" % (fmt_ratio(ro), which_o or ""),
                       fmt_ratio(d / st if d and st else None), pct(C.noise(key, "auto")),
                       pct(C.noise(key, which_f) if which_f else None)])
    w(md_table(["op", "work", "N", "default", "ended in", "switches", "static"] + list(FORCED)
               + [OWN_LABEL[o] for o in OWN] + ["default / best forced", "default / best own", "default / static",
                                                "noise, default", "noise, best forced"], rows))
    return vs_forced, vs_own, vs_static


def loaded_table(C: Cells, section: str, w) -> Tuple[List[Tuple[str, float]], List[Tuple[str, float, float]]]:
    """A hog or pair table; (default / best forced), (default / static, noise) per cell."""
    rows, vs_forced, vs_static = [], [], []
    for key in C.keys(section):
        d, st = C.med(key, "auto"), C.med(key, "static")
        bf, which = C.best(key, FORCED)
        name = "%s N=%d" % ({"sim": "C sim", "sim_py": "Python sim"}.get(key[1], key[1]), key[2])
        rf = d / bf if d and bf else None
        rs = d / st if d and st else None
        noise = max(x for x in (C.noise(key, "auto"), C.noise(key, "static"), 0.0) if x is not None)
        if rf is not None:
            vs_forced.append((name, rf))
            C.noise_of[name] = max(x or 0.0 for x in (C.noise(key, "auto"), C.noise(key, which) if which else 0.0))
        if rs is not None:
            vs_static.append((name, rs, noise))
        rows.append([name, fmt_ns(d), C.ended(key, "auto"), fmt_ns(st)] + [fmt_ns(C.med(key, m)) for m in FORCED]
                    + ["%s %s" % (fmt_ratio(rf), which or ""), fmt_ratio(rs), "%.0f%%" % (100 * noise)])
    w(md_table(["job", "default", "ended in", "static"] + list(FORCED)
               + ["default / best forced", "default / static", "noise"], rows))
    return vs_forced, vs_static


def measuring_cost(C: Cells) -> List[Tuple[str, float]]:
    """Default / the forced mode it ended in, idle, N = 1 and 2."""
    out = []
    for key in C.keys("idle"):
        if key[2] not in (1, 2):
            continue
        c = C.by[key].get("auto")
        modes = sorted(set(v.split(":", 1)[0] for v in (c["wait_end"] if c else [])))
        d = C.med(key, "auto")
        if len(modes) == 1 and modes[0] in FORCED:
            f = C.med(key, modes[0])
            if d and f:
                op, work = label(key)
                name = "%s N=%d W=%s vs %s" % (op, key[2], work, modes[0])
                out.append((name, d / f))
                C.noise_of[name] = max(x or 0.0 for x in (C.noise(key, "auto"), C.noise(key, modes[0])))
    return out


def sim_vs_greenlet(R: Results) -> List[Tuple[int, Optional[float], float, Optional[float], Optional[str]]]:
    """(N, Python sim / greenlet, limit, best forced mode / greenlet, that
    mode) of the simulation job (bench/harness/jobs_sim.py runs it under each mode)."""
    out = []
    for n, lim in sorted(policy_sim_limits().items()):
        py, gl = R.med("sim", "kbthreads_py", 0, n), R.med("sim", "greenlet", 0, n)
        forced = [(R.med("sim", "kbthreads_py_" + m, 0, n), m) for m in FORCED]
        forced = [f for f in forced if f[0]]
        bf, mode = min(forced) if forced else (None, None)
        out.append((n, py / gl if py and gl else None, lim, bf / gl if bf and gl else None, mode))
    return out


def reach(missed: List[Tuple[str, float]], bound: Dict[str, float], lim: float, noise: Dict[str, float]) -> str:
    """Of the cells that missed a limit: how many no mode the policy can
    choose would have met either (bound: a cell's best such ratio), and how
    many missed by less than the cell's own noise."""
    if not missed:
        return "–"
    beyond = [n for n, _ in missed if bound.get(n, 0.0) > lim]
    within = [n for n, r in missed if n not in beyond and r <= lim * (1 + noise.get(n, 0.0))]
    parts = []
    if beyond:
        parts.append("%d beyond any unpinned mode (%s)" % (len(beyond), ", ".join(beyond)))
    if within:
        parts.append("%d by less than the cell's noise" % len(within))
    rest = len(missed) - len(beyond) - len(within)
    if rest:
        parts.append("%d beyond the noise" % rest)
    return "; ".join(parts)


def write(ctx: ReportContext) -> None:
    """Append the section (nothing when the run has no policy cells)."""
    R, w = ctx.results, ctx.w
    C = Cells(R)
    if not C.by:
        return
    p = (R.d.get("params") or {}).get("policy") or {}
    w("### The reactive wait policy")
    w("")
    w("ns per operation, the work included. Each figure is the median of %s interleaved processes (every "
      "configuration once, then again), each the median of its %s repetitions; the noise column is the "
      "spread of the processes' medians ((max − min) / median). default: the reactive policy; static: "
      "`KB_WAIT_POLICY=static` (the count-based choice, the default before); look, nudge, sleep, spin: "
      "`KB_WAIT_POLICY` forcing that mode (spin only where every rank has a CPU, N < CPUs: beyond, a "
      "spinner holds the CPU the next holder needs); ended in: the mode a further spawn of the same shape, with "
      "`kb_spawn_opts.stats`, ended in; switches: that spawn's mode changes, summed over "
      "the processes. bench/harness/jobs_policy.py runs the jobs." % (p.get("processes", "–"), p.get("reps", "–")))
    w("")
    w("#### Idle machine")
    w("")
    vs_forced, vs_own, vs_static = idle_table(C, w)
    w("")
    w("#### Beside a CPU hog")
    w("")
    hog_forced, hog_static = loaded_table(C, "hog", w)
    w("")
    w("#### Two simulations side by side")
    w("")
    pair_forced, pair_static = loaded_table(C, "pair", w)
    w("")
    lf, lo, ll, lm = (limit("policy_idle_forced"), limit("policy_idle_own"), limit("policy_loaded_forced"),
                      limit("policy_measuring"))
    cost = measuring_cost(C)
    loaded_static = hog_static + pair_static
    slower = [(n, r, e) for n, r, e in loaded_static if r > 1 + e]
    sims = sim_vs_greenlet(R)
    loaded = hog_forced + pair_forced
    noise = C.noise_of
    rows = [
        ["idle: default ≤ %.2fx the best forced unpinned mode, every cell" % lf,
         "%s; %d of %d met" % (worst(vs_forced), sum(r <= lf for _, r in vs_forced), len(vs_forced)),
         verdict(all(r <= lf for _, r in vs_forced) if vs_forced else None),
         reach([x for x in vs_forced if x[1] > lf], {}, lf, noise)],
        ["idle: default ≤ %.2fx the best of the library's own modes, every cell" % lo,
         "%s; %d of %d met" % (worst(vs_own), sum(r <= lo for _, r in vs_own), len(vs_own)),
         verdict(all(r <= lo for _, r in vs_own) if vs_own else None),
         reach([x for x in vs_own if x[1] > lo], dict(C.own_bound), lo, {})],
        ["hog and side by side: default ≤ %.2fx the best forced mode" % ll,
         "%s; %d of %d met" % (worst(loaded), sum(r <= ll for _, r in loaded), len(loaded)),
         verdict(all(r <= ll for _, r in loaded) if loaded else None),
         reach([x for x in loaded if x[1] > ll], {}, ll, noise)],
        ["hog and side by side: no cell slower than static beyond the run's noise",
         "%d of %d slower: %s" % (len(slower), len(loaded_static),
                                  ", ".join("%s %.2fx (noise %.0f%%)" % (n, r, 100 * e) for n, r, e in slower)
                                  or "none"),
         verdict(not slower if loaded_static else None), "–"],
        ["measuring: default ≤ %.2fx the forced mode it ended in, N = 1, 2, idle" % lm,
         "%s; %d of %d met" % (worst(cost), sum(r <= lm for _, r in cost), len(cost)),
         verdict(all(r <= lm for _, r in cost) if cost else None),
         reach([x for x in cost if x[1] > lm], {}, lm, noise)],
    ]
    for n, r, lim, rb, mode in sims:
        bound = ("best forced mode %s %s" % (mode, fmt_ratio(rb)) if rb else "–")
        if r is not None and r > lim and rb is not None and rb > lim:
            bound += ": beyond any mode"
        rows.append(["Python simulation ≤ %gx greenlet at N=%d" % (lim, n), fmt_ratio(r),
                     verdict(None if r is None else r <= lim), bound])
    w(md_table(["target (issue 31)", "measured (medians)", "verdict", "the misses: within reach?"], rows))
    w("")
    w("The last column reads each missed cell against what the policy could have done: \"beyond any unpinned "
      "mode\" where even the best forced (unpinned) mode of the same cell misses the limit, so no choice among "
      "the modes the policy switches between meets it; \"by less than the cell's noise\" where the miss is "
      "smaller than the spread between the cell's own processes (the larger of the default's and the best "
      "forced mode's), so this run cannot tell it from a tie.")
    w("")
    if vs_static:
        faster = sum(r < 1 for _, r in vs_static)
        w("Against the static default it replaces, idle: faster in %d of %d cells; median ratio %.2fx, %s."
          % (faster, len(vs_static), statistics.median(r for _, r in vs_static), worst(vs_static)))
        w("")


def write_against_baseline(ctx: ReportContext) -> None:
    """The default against the baseline build's default (run.py --baseline-bindir), every cell of the
    matrix; nothing when the run had no baseline."""
    lines = report_ablation.baseline_report(report_ablation.cells(ctx.results.d.get("policy") or []))
    if not lines:
        return
    ctx.w("### The default against the baseline library's default")
    ctx.w("")
    ctx.w("The baseline's default is one more configuration in every cell, interleaved with the others: the "
          "library built from %s (`make bench BENCH_BASELINE_SRC=...`). A cell's figure is the median of its "
          "processes' medians; noise: the larger spread of the two defaults' process medians; slower beyond "
          "the noise: default / baseline > 1 + noise." % (ctx.results.d.get("baseline_bindir") or "another checkout"))
    ctx.w("")
    for line in lines:
        ctx.w(line)
    ctx.w("")
