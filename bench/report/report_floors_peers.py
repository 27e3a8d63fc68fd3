# SPDX-License-Identifier: MIT
"""The report's sections on the floors and peers, for bench/report/report.py: the
targets of the libkbthreads yield loop (against the faster ring, SimGrid,
flatness in N, the repeated spawn, memory, a spare CPU), the ratios of the
yield figures to the floors and peers, and one verdict line per target.
The targets are computed once (floor_peer_targets) and handed to the three
sections, which report.py calls at their places in the report (the ratios
follow the yield table). Limits: bench/report/targets.py; why a target is met or
missed: bench/report/report-notes.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from bench_shared import fmt_ns, fmt_ratio, fmt_val
from report_context import (CONFIG_IMPL, CONFIG_PIN, CONFIGS, LABELS, ReportContext, Results, md_table, ratio,
                            verdict)
from targets import limit

# How the targets table and the verdicts name the floor each configuration is held to.
FLOOR_TEXT = {"unpinned": "unpinned", "pinned": "pinned", "spread": "spread (against the unpinned ring)"}


class FloorRow(NamedTuple):
    n: int
    kb: Optional[float]  # the yield
    floor: Optional[float]  # one handoff of the faster ring
    ring: Optional[str]  # which ring
    ratio: Optional[float]
    ok: Optional[bool]


class SimgridRow(NamedTuple):
    n: int
    kb: Optional[float]
    sg: Optional[float]  # SimGrid thread factory's yield
    ratio: Optional[float]
    ok: Optional[bool]


class SpawnRow(NamedTuple):
    n: int
    repeat: Optional[float]  # per rank
    cold: Optional[float]  # per rank


class SpareRow(NamedTuple):
    n: int
    kb: Optional[float]
    greenlet: Optional[float]
    ok: Optional[bool]


class FlatResult(NamedTuple):
    at_4096: Optional[float]
    at_8: Optional[float]
    ratio: Optional[float]
    ok: Optional[bool]


def all_measured(oks: Sequence[Optional[bool]]) -> Optional[bool]:
    """A target met at every N measured; None when no N was."""
    measured = [o for o in oks if o is not None]
    return all(measured) if measured else None


def target_floor(R: Results, pin: int, impl: str = "kbthreads") -> Tuple[List[FloorRow], Optional[bool]]:
    """A yield against one handoff of the faster ring (same pin, same N)."""
    rows = []
    for n in R.ns:
        kb = R.med("yield", impl, pin, n)
        fl, which = R.floor(pin, n)
        r = ratio(kb, fl)
        rows.append(FloorRow(n, kb, fl, which, r, None if r is None else r <= limit("floor")))
    return rows, all_measured([row.ok for row in rows])


def target_simgrid(R: Results, impl: str = "kbthreads") -> Tuple[List[SimgridRow], Optional[bool]]:
    """A yield against SimGrid's thread factory's."""
    rows = []
    for n in R.ns:
        kb = R.med("yield", impl, 0, n)
        sg = R.med("yield", "simgrid_thread", 0, n)
        r = ratio(kb, sg)
        rows.append(SimgridRow(n, kb, sg, r, None if r is None else r <= limit("simgrid")))
    return rows, all_measured([row.ok for row in rows])


def target_flat(R: Results, pin: int, impl: str = "kbthreads") -> FlatResult:
    """A yield at N=4096 against one at N=8."""
    a = R.med("yield", impl, pin, 4096)
    b = R.med("yield", impl, pin, 8)
    r = ratio(a, b)
    return FlatResult(a, b, r, None if r is None else r <= limit("flat"))


def target_spawn(R: Results, pin: int, impl: str = "kbthreads") -> Tuple[List[SpawnRow], Optional[bool]]:
    """A repeated spawn on one ctx, per rank, at every N."""
    rows = [SpawnRow(n, R.med("spawn_repeat", impl, pin, n), R.med("spawn_cold", impl, pin, n)) for n in R.ns]
    measured = [row.repeat for row in rows if row.repeat is not None]
    return rows, (max(measured) <= limit("spawn_repeat") if measured else None)


def target_memory(R: Results) -> Tuple[int, Optional[float], Optional[bool]]:
    """Resident memory per idle rank at N=4096. (N, KiB, ok)"""
    n = R.d["params"]["mem_n"]
    v = R.med("mem_idle", "kbthreads", 0, n)
    return n, v, (None if v is None or n != 4096 else v <= limit("mem_idle"))


def target_spare(R: Results) -> Tuple[int, List[SpareRow], Optional[bool]]:
    """With a spare CPU (N < CPUs): a yield within the limit and faster than greenlet's."""
    spare = (R.d["machine"].get("nproc") or 1) - 1
    rows = []
    for n in R.ns:
        if n > spare:
            continue
        kb = R.med("yield", "kbthreads", 0, n)
        gl = R.med("yield", "greenlet", 0, n)
        ok = None if kb is None else (kb <= limit("spare_yield") and (gl is None or kb < gl))
        rows.append(SpareRow(n, kb, gl, ok))
    return spare, rows, all_measured([row.ok for row in rows])


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


def floor_peer_targets(R: Results) -> Targets:
    """Every target of the yield loop, once for the three sections that read them."""
    return Targets(
        floor={tag: target_floor(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("yield", impl, pin)},
        simgrid=target_simgrid(R),
        simgrid_spread=target_simgrid(R, "kbthreads_spread") if R.has("yield", "kbthreads_spread", 0) else None,
        flat={tag: target_flat(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("yield", impl, pin)},
        spawn={tag: target_spawn(R, pin, impl) for tag, impl, pin in CONFIGS if R.has("spawn_repeat", impl, pin)},
        memory=target_memory(R),
        spare=target_spare(R),
    )


def worst(values: Sequence[Optional[float]]) -> Optional[float]:
    """The largest of the values measured, or None."""
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def measured_only(ns: Sequence[int], values: Sequence[Optional[float]]) -> str:
    """" (measured at N = ... only)" when not every N of the run has the figure (a smoke run's spread jobs)."""
    have = [n for n, v in zip(ns, values) if v is not None]
    return "" if len(have) == len(ns) else " (measured at N = %s only)" % ", ".join(str(n) for n in have)


def x(key: str) -> str:
    """A ratio target's limit as the tables state it: "1.25x"."""
    return "%gx" % limit(key)


def us(key: str) -> str:
    """A time target's limit in µs: "10 µs"."""
    return "%g µs" % (limit(key) / 1000)


def target_rows(t: Targets) -> List[Tuple[str, str, str, Optional[bool]]]:
    """The rows of the targets table, in order, each with the configuration it
    is about: "unpinned" (default options; also the rows without a mark),
    "pinned" (KB_AFFINITY_ONE_CPU), "spread" (KB_AFFINITY_SPREAD). The spread
    rows sit next to the default unpinned ones and are counted apart.
    (configuration, target, measured, ok)"""
    rows = []
    for tag, (frows, ok) in t.floor.items():
        rs = [r.ratio for r in frows]
        rows.append((tag, "yield ≤ %s one handoff of the faster ring, same N, %s" % (x("floor"), FLOOR_TEXT[tag]),
                     "worst %s%s" % (fmt_ratio(worst(rs)), measured_only([r.n for r in frows], rs)), ok))
    sg_rows, sg_ok = t.simgrid
    rows.append(("unpinned", "yield ≤ %s SimGrid thread factory, every N" % x("simgrid"),
                 "worst %s" % fmt_ratio(worst([r.ratio for r in sg_rows])), sg_ok))
    if t.simgrid_spread is not None:
        sp_rows, sp_ok = t.simgrid_spread
        rs = [r.ratio for r in sp_rows]
        rows.append(("spread", "yield ≤ %s SimGrid thread factory, every N, spread" % x("simgrid"),
                     "worst %s%s" % (fmt_ratio(worst(rs)), measured_only([r.n for r in sp_rows], rs)), sp_ok))
    for tag, f in t.flat.items():
        rows.append((tag, "flat: yield at N=4096 ≤ %s N=8, %s" % (x("flat"), tag),
                     "%s / %s = %s" % (fmt_ns(f.at_4096), fmt_ns(f.at_8), fmt_ratio(f.ratio)), f.ok))
    for tag, (srows, ok) in t.spawn.items():
        vs = [r.repeat for r in srows]
        rows.append((tag, "repeated spawn on one ctx ≤ %s per rank, every N, %s" % (us("spawn_repeat"), tag),
                     "worst %s%s" % (fmt_ns(worst(vs)), measured_only([r.n for r in srows], vs)), ok))
    mem_n, mem_v, mem_ok = t.memory
    rows.append(("unpinned", "≤ %g KiB resident per idle rank, N=4096, default options" % limit("mem_idle"),
                 "%s" % ("–" if mem_v is None else "%.1f KiB (N=%d)" % (mem_v, mem_n)), mem_ok))
    spare, spare_rows, spare_ok = t.spare
    rows.append(("unpinned", "spare CPU, N ≤ %d: yield ≤ %s and faster than greenlet" % (spare, us("spare_yield")),
                 ", ".join("N=%d: %s vs %s" % (r.n, fmt_ns(r.kb), fmt_ns(r.greenlet)) for r in spare_rows) or "–",
                 spare_ok))
    return rows


def targets_met_line(rows: Sequence[Tuple[str, str, str, Optional[bool]]]) -> str:
    """The sentence counting the targets met: default options and pinned together, spread apart."""
    configs = [row[0] for row in rows]

    def count(tags: Tuple[str, ...]) -> Tuple[int, int]:
        mine = [(tag, ok) for tag, _, _, ok in rows if tag in tags]
        return sum(1 for _, ok in mine if ok), len(mine)

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
    """The yield loop's targets: one row each, with its verdict, and how many were met."""
    w = ctx.w
    w("### Targets")
    w("")
    rows = target_rows(t)
    w(md_table(["target (issue 4)", "measured (medians)", "verdict"],
               [(text, measured, verdict(ok)) for _, text, measured, ok in rows]))
    w("")
    w(targets_met_line(rows))
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
    """libkbthreads / the faster ring, per configuration, against its limit."""
    lim = "%g" % limit("floor")
    label = {"unpinned": "libkbthreads / faster ring (target ≤ %s)" % lim,
             "spread": "libkbthreads spread / faster ring (unpinned) (target ≤ %s)" % lim,
             "pinned": "libkbthreads / faster ring, pinned (target ≤ %s)" % lim}
    rows = []
    for tag, (rws, _) in t.floor.items():
        impl, pin = CONFIG_IMPL[tag], CONFIG_PIN[tag]
        rows.append([label[tag]] + [check_mark(r.ratio, r.ok) + busy_mark(R, [("yield", impl, pin, r.n),
                                                                              ("handoff", r.ring, pin, r.n)])
                                    for r in rws])
    return rows


def simgrid_ratio_rows(R: Results, t: Targets) -> List[List[str]]:
    """libkbthreads (default, spread) / SimGrid's thread factory, against its limit."""
    lim = "%g" % limit("simgrid")
    rows = []
    for impl, label, sg_rows in (("kbthreads", "libkbthreads / SimGrid thread (target ≤ %s)" % lim, t.simgrid[0]),
                                 ("kbthreads_spread", "libkbthreads spread / SimGrid thread (target ≤ %s)" % lim,
                                  t.simgrid_spread[0] if t.simgrid_spread else [])):
        if any(r.ratio is not None for r in sg_rows):
            rows.append([label] + [check_mark(r.ratio, r.ok) + busy_mark(R, [("yield", impl, 0, r.n),
                                                                            ("yield", "simgrid_thread", 0, r.n)])
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
    w("#### Ratios")
    w("")
    rows = floor_ratio_rows(R, t) + simgrid_ratio_rows(R, t) + other_ratio_rows(R, t)
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")
    w("† in a ratio: at least one of its two figures was measured while other processes used the CPUs, "
      "so the two may have been measured under different conditions.")
    w("")


def met_at(ns: Sequence[int], oks: Sequence[Optional[bool]]) -> str:
    """"met at every N", "met at every N (measured at N = 8 only)" or "not met at N = 1, 2 (met at 8)"."""
    measured = [(n, ok) for n, ok in zip(ns, oks) if ok is not None]
    missed = [str(n) for n, ok in measured if not ok]
    if not missed:
        return "met at every N" + ("" if len(measured) == len(ns) else
                                   " (measured at N = %s only)" % ", ".join(str(n) for n, _ in measured))
    return "not met at N = %s (met at %s)" % (", ".join(missed),
                                              ", ".join(str(n) for n, ok in measured if ok) or "no N")


def verdict_lines(R: Results, t: Targets) -> List[str]:
    """One line per target of the yield loop: met or where not, with the figures it compares."""
    out = []
    for tag, (rws, _) in t.floor.items():
        out.append("**Floor, %s: %s.** yield / faster ring: %s." % (
            FLOOR_TEXT[tag], met_at([r.n for r in rws], [r.ok for r in rws]),
            ", ".join("N=%d %s (%s vs %s)" % (r.n, fmt_ratio(r.ratio), fmt_ns(r.kb), fmt_ns(r.floor))
                      for r in rws if r.ratio is not None)))
    for tag, sg in (("", t.simgrid), (", spread", t.simgrid_spread)):
        if sg is not None and sg[1] is not None:
            out.append("**SimGrid thread factory%s: %s** (worst %s)." % (
                tag, met_at([r.n for r in sg[0]], [r.ok for r in sg[0]]), fmt_ratio(worst([r.ratio for r in sg[0]]))))
    for tag, f in t.flat.items():
        if f.ok is not None:
            pin = CONFIG_PIN[tag]
            fa, fb = R.floor(pin, 4096)[0], R.floor(pin, 8)[0]
            out.append("**Flat in N, %s: %s** (N=4096 / N=8 = %s; the faster %sring itself: %s, %s → %s)." % (
                tag, "met" if f.ok else "not met", fmt_ratio(f.ratio), "unpinned " if tag == "spread" else "",
                fmt_ratio(ratio(fa, fb)), fmt_ns(fb), fmt_ns(fa)))
    for tag, (rows, ok) in t.spawn.items():
        out.append("**Repeated spawn, %s: %s.** Per rank on one ctx: %s; cold (fresh ctx, threads created and "
                   "joined): %s; repeated / cold: %s." % (
                       tag, met_at([r.n for r in rows], [None if r.repeat is None else r.repeat <= limit("spawn_repeat")
                                                         for r in rows]),
                       ", ".join("N=%d %s" % (r.n, fmt_ns(r.repeat)) for r in rows if r.repeat is not None),
                       ", ".join("N=%d %s" % (r.n, fmt_ns(r.cold)) for r in rows if r.cold is not None),
                       ", ".join("N=%d %s" % (r.n, fmt_ratio(ratio(r.repeat, r.cold))) for r in rows
                                 if r.repeat is not None and r.cold)))
    return out + limit_lines(R, t)


def limit_lines(R: Results, t: Targets) -> List[str]:
    """The memory and spare-CPU verdicts, with the figures beside them."""
    out = []
    mem_n, mem_v, ok = t.memory
    if ok is not None and mem_v is not None:
        out.append("**Memory: %s.** %.1f KiB resident per idle rank at N=%d; kernel stack per thread, outside "
                   "the process's RSS: %s." % ("met" if ok else "not met", mem_v, mem_n,
                                                fmt_val(R.med("mem_kstack", "kbthreads", 0, mem_n) or 0, "KiB")))
    spare, rows, ok = t.spare
    if ok is not None:
        sw = R.get("switch", "swapcontext", 0, 1)
        out.append("**A spare CPU (N ≤ %d): %s.** %s; one `swapcontext`: %s; a wait (default, spread): %s." % (
            spare, "met" if ok else "not met",
            "; ".join("N=%d: libkbthreads %s, greenlet %s" % (r.n, fmt_ns(r.kb), fmt_ns(r.greenlet)) for r in rows),
            fmt_ns(sw["median"] if sw else None),
            "; ".join("N=%d %s, %s" % (r.n, fmt_ns(R.med("wait", "kbthreads", 0, r.n)),
                                       fmt_ns(R.med("wait", "kbthreads_spread", 0, r.n))) for r in rows)))
    return out


def section_discussion(ctx: ReportContext, t: Targets) -> None:
    """What the numbers say: one verdict line per target; why, in bench/report/report-notes.md."""
    ctx.w("#### What the numbers say")
    ctx.w("")
    for line in verdict_lines(ctx.results, t):
        ctx.w("- " + line)
    ctx.w("")
    ctx.w("Why each target is met or missed on this machine: \"Reading the targets\" in the notes below.")
    ctx.w("")
