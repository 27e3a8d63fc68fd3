# SPDX-License-Identifier: MIT
"""The report's sections on issue 4's targets, for bench/report.py: the
targets table, the ratios of the yield figures to the floors and peers, and
what the numbers say. The targets are computed once (issue4_targets) and
handed to the three sections, which report.py calls at their places in the
report (the ratios follow the yield table).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench_shared import fmt_ns, fmt_ratio, fmt_val
from report_context import (CONFIG_IMPL, CONFIG_PIN, CONFIGS, LABELS, ReportContext, Results, busy_figures,
                            md_table, ratio, verdict)

# How the targets table and the discussion name the floor each configuration is held to.
FLOOR_TEXT = {"unpinned": "unpinned", "pinned": "pinned", "spread": "spread (against the unpinned ring)"}

# Rows of the targets (issue 4), one per N, each led by its N. The sections
# index them by position (r[4] is a floor row's ratio), as the targets were
# first written; the aliases name what each position holds.
# n, yield, faster ring's handoff, which ring, yield / ring, ok:
FloorRow = Tuple[int, Optional[float], Optional[float], Optional[str], Optional[float], Optional[bool]]
# n, yield, SimGrid thread factory's yield, yield / SimGrid, ok:
SimgridRow = Tuple[int, Optional[float], Optional[float], Optional[float], Optional[bool]]
SpawnRow = Tuple[int, Optional[float], Optional[float]]  # n, repeated spawn, cold spawn (per rank)
SpareRow = Tuple[int, Optional[float], Optional[float], Optional[bool]]  # n, yield, greenlet's yield, ok
FlatResult = Tuple[Optional[float], Optional[float], Optional[float], Optional[bool]]  # N=4096, N=8, ratio, ok


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

