# SPDX-License-Identifier: MIT
"""From the programs' output lines to the results file of bench/harness/run.py.

Every program prints one `KBR,<figure>,<impl>,<pinned>,<N>,<run>,<value>,<unit>,<ops>`
line per measured repetition (bench_common.h) and `KBI,<key>,<value>`
facts. Each KBR line becomes one sample (a row of the results' "samples",
with the conditions it was measured under); the samples of one figure
(bench, impl, pin, N, unit) aggregate to one row of "summary": median, min
and max of its repetitions. bench/README.md documents the file.
"""
from __future__ import annotations

import csv
import datetime
import json
import os
import shutil
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from launch import Attempt

Sample = Dict[str, Any]
Row = Dict[str, Any]
SUMMARY_CSV_COLUMNS = ["bench", "impl", "pin", "n", "unit", "median", "min", "max", "runs"]


def parse_output(a: Attempt, flagged: bool, rename: Optional[Dict[str, str]]
                 ) -> Tuple[List[Sample], List[Tuple[str, str]]]:
    """(the samples of the KBR lines, the (key, value) of the KBI lines) of every copy's stdout.
    rename: impl names of its figures to change (e.g. kbthreads -> kbthreads_taskset)."""
    samples: List[Sample] = []
    kbi: List[Tuple[str, str]] = []
    for _, out, _ in a.outs:
        for line in out.splitlines():
            parts = line.strip().split(",")
            if parts[0] == "KBR" and len(parts) == 9:
                samples.append({
                    "bench": parts[1], "impl": (rename or {}).get(parts[2], parts[2]), "pin": int(parts[3]),
                    "n": int(parts[4]), "value": float(parts[6]), "unit": parts[7], "ops": int(parts[8]),
                    "others_cpu": round(a.share, 3), "load1": a.start["load1"], "flagged": flagged,
                })
            elif parts[0] == "KBI" and len(parts) >= 3:
                kbi.append((parts[1], ",".join(parts[2:])))
    return samples, kbi


def job_record(label: str, a: Attempt, attempts: int, copies: int, deliberate: Optional[str],
               flag: str) -> Dict[str, Any]:
    """One row of the results' "jobs": how and on what machine the kept attempt ran."""
    return {"label": label, "seconds": round(a.elapsed, 2), "others_cpu": round(a.share, 3),
            "attempts": attempts, "load1": a.start["load1"], "others_runnable": a.start["others_runnable"],
            "waited_s": a.start["waited_s"], "cpu_s": round(a.cpu_s, 3), "copies": copies,
            "deliberate": deliberate, "flag": flag}


def summarize(samples: Sequence[Sample]) -> List[Row]:
    """One row per figure (bench, impl, pin, N, unit), sorted by that key."""
    groups: Dict[Tuple[Any, ...], List[Sample]] = {}
    for s in samples:
        groups.setdefault((s["bench"], s["impl"], s["pin"], s["n"], s["unit"]), []).append(s)
    out = []
    for (bench, impl, pin, n, unit), ss in sorted(groups.items()):
        values = [s["value"] for s in ss]
        out.append({"bench": bench, "impl": impl, "pin": pin, "n": n, "unit": unit,
                    "median": statistics.median(values), "min": min(values), "max": max(values),
                    "count": len(values), "values": values,
                    "others_cpu": max(s.get("others_cpu", 0.0) for s in ss),
                    "load1": max(s.get("load1", 0.0) for s in ss),
                    "flagged": any(s.get("flagged") for s in ss)})
    return out


def write_summary_csv(path: str, summary: Sequence[Row]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_CSV_COLUMNS)
        for r in summary:
            w.writerow([r["bench"], r["impl"], r["pin"], r["n"], r["unit"], "%.3f" % r["median"],
                        "%.3f" % r["min"], "%.3f" % r["max"], r["count"]])


def write_results(result: Dict[str, Any], outdir: str, kind: Optional[str] = None) -> str:
    """<kind>-<UTC stamp>.json and .csv in outdir, copied to <kind>-latest.*; the .json's path."""
    kind = kind or result["kind"]
    os.makedirs(outdir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.join(outdir, "%s-%s" % (kind, stamp))
    result["file"] = os.path.basename(base) + ".json"
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    write_summary_csv(base + ".csv", result["summary"])
    for ext in (".json", ".csv"):
        shutil.copyfile(base + ext, os.path.join(outdir, "%s-latest%s" % (kind, ext)))
    print("results: %s.json, %s.csv (and %s-latest.*)" % (base, base, kind))
    return base + ".json"
