# SPDX-License-Identifier: MIT
"""The report's section on the two batons (issue 15), for bench/report/report.py:
the condvar slot beside the futex slot, and the ratio condvar / futex of
their medians at every N.

Figures (bench/harness/runner.py: run_kb, --condvar-bindir): kb_bench's yield, wait
and spawn jobs, unpinned, with KB_AFFINITY_SPREAD and pinned
(KB_AFFINITY_ONE_CPU), of
  kbthreads[_spread]          the library with the futex baton (build-bench)
  kbthreads_condvar[_spread]  the same library built with KB_BATON=condvar
                              (build-bench-condvar)
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from bench_shared import fmt_ratio
from report_context import ReportContext, Results, md_table

# (bench, label); the spawn figures are a cold and a repeated spawn per rank.
BENCHES = [("yield", "per yield"), ("wait", "per wait (+ drain)"), ("spawn_cold", "cold spawn, per rank"),
           ("spawn_repeat", "repeated spawn, per rank")]
# (tag, futex impl, condvar impl, pin)
CONFIGS = [("unpinned", "kbthreads", "kbthreads_condvar", 0),
           ("spread", "kbthreads_spread", "kbthreads_condvar_spread", 0),
           ("pinned", "kbthreads", "kbthreads_condvar", 1)]


def ratios(R: Results) -> List[Tuple[str, str, str, Dict[int, float]]]:
    """[(bench, label, tag, {n: condvar / futex})] for every figure both batons have."""
    out = []
    for bench, label in BENCHES:
        for tag, futex, condvar, pin in CONFIGS:
            if not (R.has(bench, futex, pin) and R.has(bench, condvar, pin)):
                continue
            by_n: Dict[int, float] = {}
            for n in R.ns:
                a, b = R.med(bench, condvar, pin, n), R.med(bench, futex, pin, n)
                if a is not None and b:
                    by_n[n] = a / b
            out.append((bench, label, tag, by_n))
    return out


def write(ctx: ReportContext) -> None:
    """Append the section to the report (nothing when the run has no condvar figures)."""
    R, w = ctx.results, ctx.w
    rs = ratios(R)
    if not rs:
        return
    w("### The condvar baton beside the futex baton")
    w("")
    w("The same benchmarks against the library built with `KB_BATON=condvar` (a mutex and a condition "
      "variable per thread, `src/baton_condvar.c`) and with the futex baton (`src/baton_futex.c`, the "
      "Linux default). Per operation, median (min–max) of the runs:")
    w("")
    for bench, label in BENCHES:
        rows = []
        for tag, futex, condvar, pin in CONFIGS:
            for name, impl in (("futex", futex), ("condvar", condvar)):
                if R.has(bench, impl, pin):
                    rows.append(["%s, %s" % (name, tag)] + [R.cell(bench, impl, pin, n) for n in R.ns])
        if rows:
            w("%s:" % label[0].upper() + label[1:])
            w("")
            w(md_table(["N"] + [str(n) for n in R.ns], rows))
            w("")
    w("Ratio condvar / futex (medians of this run; above 1: the condvar baton is slower):")
    w("")
    rows = [["%s, %s" % (label, tag)] + [fmt_ratio(by_n.get(n)) for n in R.ns] for _, label, tag, by_n in rs]
    w(md_table(["N"] + [str(n) for n in R.ns], rows))
    w("")
