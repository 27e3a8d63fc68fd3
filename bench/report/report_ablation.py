#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The wait policy's ablation and its rewrite's check (issue 45), as markdown.

    report_ablation.py RESULTS.json              a `run.py --only policy --ablate` run: for each
                                                 mechanism, the cells of the policy matrix where the
                                                 default without it was slower, or faster, than the
                                                 whole default beyond the cell's noise
    report_ablation.py RESULTS.json --baseline   a `run.py --only policy --baseline-bindir` run: the
                                                 default against the baseline build's default and
                                                 against the best forced unpinned mode, every cell

A cell's figure is the median of its processes' medians; its noise is the
larger spread ((max - min) / median) of the two configurations' process
medians. "Slower beyond the noise": ratio > 1 + noise.
"""
from __future__ import annotations

import argparse
import json
import statistics
from typing import Dict, List, Optional, Tuple

Key = Tuple[str, str, int]


def spread(xs: List[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else 0.0


def cells(records: List[Dict[str, object]]) -> Dict[Key, Dict[str, List[float]]]:
    out: Dict[Key, Dict[str, List[float]]] = {}
    for rec in records:
        meds = rec["process_medians"]
        if meds:
            key = (str(rec["section"]), str(rec["bench"]), int(rec["n"]))  # type: ignore[call-overload]
            out.setdefault(key, {})[str(rec["config"])] = list(meds)  # type: ignore[call-overload]
    return out


def verdicts(C: Dict[Key, Dict[str, List[float]]], cfg: str) -> Tuple[List[str], List[str], int]:
    slower, faster, n = [], [], 0
    for key in sorted(C):
        full, abl = C[key].get("auto"), C[key].get(cfg)
        if not full or not abl:
            continue
        n += 1
        r = statistics.median(abl) / statistics.median(full)
        noise = max(spread(full), spread(abl))
        name = "%s %s N=%d %.2fx (noise %.0f%%)" % (key[0], key[1], key[2], r, 100 * noise)
        if r > 1 + noise:
            slower.append(name)
        elif r < 1 / (1 + noise):
            faster.append(name)
    return slower, faster, n


FORCED = ["look", "nudge", "sleep", "spin"]


def baseline_report(C: Dict[Key, Dict[str, List[float]]]) -> List[str]:
    """The default against the baseline's default, every cell, as markdown lines ([] without a baseline)."""
    if not any("baseline" in v for v in C.values()):
        return []
    out = ["| cell | default | baseline | default / baseline | noise | best forced | default / best forced |",
           "|---|---|---|---|---|---|---|"]
    slower, over = [], []
    for key in sorted(C):
        new, old = C[key].get("auto"), C[key].get("baseline")
        if not new or not old:
            continue
        r = statistics.median(new) / statistics.median(old)
        noise = max(spread(new), spread(old))
        forced = [(statistics.median(C[key][m]), m) for m in FORCED if C[key].get(m)]
        best, which = min(forced) if forced else (None, "")
        rb = statistics.median(new) / best if best else None
        name = "%s %s N=%d" % key
        if r > 1 + noise:
            slower.append("%s %.2fx (noise %.0f%%)" % (name, r, 100 * noise))
        if rb is not None and rb > 1.25:
            over.append("%s %.2fx %s" % (name, rb, which))
        out.append("| %s | %.0f ns | %.0f ns | %.2fx | %.0f%% | %s | %s |" % (
            name, statistics.median(new), statistics.median(old), r, 100 * noise,
            "%.0f ns %s" % (best, which) if best else "–", "%.2fx" % rb if rb else "–"))
    out += ["", "Slower than the baseline beyond the noise: %s." % ("; ".join(slower) or "none"),
            "Over 1.25x the best forced unpinned mode: %s." % ("; ".join(over) or "none")]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--baseline", action="store_true")
    args = ap.parse_args()
    with open(args.results) as f:
        res = json.load(f)
    C = cells(res["policy"])
    if args.baseline:
        print("load at the start %s, at the end %s; %s s" % (res.get("load_start"), res.get("load_end"),
                                                              res.get("duration_s")))
        print()
        print("\n".join(baseline_report(C)))
        return
    cfgs = sorted({c for v in C.values() for c in v if c.startswith("no_")})
    print("load at the start %s, at the end %s; %s s" % (res.get("load_start"), res.get("load_end"),
                                                          res.get("duration_s")))
    print()
    print("| without | cells | slower beyond the noise | faster beyond the noise |")
    print("|---|---|---|---|")
    for cfg in cfgs:
        slower, faster, n = verdicts(C, cfg)
        print("| %s | %d | %s | %s |" % (cfg[3:], n, "; ".join(slower) or "none", "; ".join(faster) or "none"))
    print()
    print("Every cell (median ns per operation of the whole default; each ablation's ratio to it):")
    print()
    print("| cell | default | noise | " + " | ".join(c[3:] for c in cfgs) + " |")
    print("|---" * (3 + len(cfgs)) + "|")
    for key in sorted(C):
        full = C[key].get("auto")
        if not full:
            continue
        row = ["%s %s N=%d" % key, "%.0f" % statistics.median(full), "%.0f%%" % (100 * spread(full))]
        for c in cfgs:
            abl: Optional[List[float]] = C[key].get(c)
            row.append("%.2f" % (statistics.median(abl) / statistics.median(full)) if abl else "–")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
