# SPDX-License-Identifier: MIT
"""What bench/harness/run.py prints at the end of a run: every figure, the yield
headline by N, the largest N, the notes, failures and flagged jobs."""
from __future__ import annotations

from typing import Any, Dict, Tuple

from bench_shared import fmt_val


def print_figures(result: Dict[str, Any]) -> None:
    print()
    print("%-13s %-22s %3s %6s %12s %12s %12s %4s %7s" % ("bench", "impl", "pin", "N", "median", "min", "max",
                                                          "runs", "others"))
    print("-" * 100)
    for r in result["summary"]:
        med, lo, hi = (fmt_val(r[k], r["unit"], terminal=True) for k in ("median", "min", "max"))
        print("%-13s %-22s %3d %6d %12s %12s %12s %4d %6.0f%%" % (
            r["bench"], r["impl"], r["pin"], r["n"], med, lo, hi, r["count"], 100 * r.get("others_cpu", 0)))


def print_headline(result: Dict[str, Any]) -> None:
    """The headline: ns per yield / handoff against N."""
    ns = result["params"]["ns"]
    series: Dict[Tuple[str, str, int], Dict[int, float]] = {}
    for r in result["summary"]:
        if r["bench"] in ("yield", "handoff"):
            series.setdefault((r["bench"], r["impl"], r["pin"]), {})[r["n"]] = r["median"]
    if not series:
        return
    print()
    print("median ns per yield (kbthreads, greenlet, simgrid) or per handoff (floors), by N")
    print("%-34s" % "" + "".join("%10d" % n for n in ns))
    for (bench, impl, pin), by_n in sorted(series.items(), key=lambda kv: (kv[0][0] != "yield", kv[0])):
        label = "%s %s%s" % (impl, bench, " pinned" if pin else "")
        print("%-34s" % label + "".join("%10s" % ("%.0f" % by_n[n] if n in by_n else "-") for n in ns))


def print_maxn(result: Dict[str, Any]) -> None:
    for impl, r in (result.get("maxn") or {"by_stack": {}})["by_stack"].items():
        if r["capped"]:
            how = " (search capped at %d to leave pids for the machine)" % result["maxn"]["cap"]
        elif r["first_failed"]:
            failed = [t for t in r["tries"] if t["n"] == r["first_failed"]]
            how = ", N=%s failed: %s" % (r["first_failed"], failed[-1]["detail"] if failed else "")
        else:
            how = " (smoke: one try)"
        print("largest N that ran (%s): %d%s" % (impl, r["largest_ok"], how))


def print_conditions(result: Dict[str, Any]) -> None:
    """Notes, failures, the flagged jobs and how busy the machine was."""
    for note in result["notes"]:
        print("note: " + note)
    for f in result["failures"]:
        print("FAILED: " + f)
    flagged = [j for j in result["jobs"] if j.get("flag")]
    print("%d job(s) flagged (started on or shared a busy machine, after retries); the idle gate waited %.0f s"
          % (len(flagged), result["idle"]["waited_s"]))
    for j in flagged:
        print("  flagged: %s: %s" % (j["label"], j["flag"]))
    busy = [j for j in result["jobs"] if j["others_cpu"] > result["busy_share"] and not j.get("deliberate")]
    print("duration %.0f s, load average %s -> %s; %d of %d jobs ran while other processes used more than %d%% "
          "of the CPUs (column 'others')" % (result["duration_s"], result["load_start"], result["load_end"],
                                              len(busy), len(result["jobs"]), 100 * result["busy_share"]))


def print_table(result: Dict[str, Any]) -> None:
    print_figures(result)
    print_headline(result)
    print_maxn(result)
    print_conditions(result)
