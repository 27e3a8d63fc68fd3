#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Render a libkbthreads trace (trace_path / KB_TRACE / kbdemo --trace) to a PNG.

usage: render_trace.py TRACE.json OUT.png [TITLE]

One row per track (the driver on top, then rank 0, 1, ...): turns are boxes
on the rank rows, rounds and drains on the driver row (drains darker), engine
waits as ticks inside drains, and instants (waits, collectives, barriers,
cancellations, failures) as marks. Needs gnuplot (Debian: gnuplot-nox).
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    src, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else os.path.basename(src)
    with open(src) as f:
        doc = json.load(f)
    names = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
    rows = sorted(names)  # tid 0 = driver, then ranks
    y = {tid: len(rows) - 1 - i for i, tid in enumerate(rows)}
    boxes = {"turn": [], "round": [], "drain": [], "engine_wait": []}
    marks = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e["name"] in boxes:
            h = {"turn": 0.35, "round": 0.15, "drain": 0.35, "engine_wait": 0.2}[e["name"]]
            boxes[e["name"]].append((e["ts"], e["ts"] + e["dur"], y[e["tid"]], h))
        elif e.get("ph") == "i":
            marks.setdefault(e["name"], []).append((e["ts"], y[e["tid"]]))
    with tempfile.TemporaryDirectory() as d:
        plots = []
        colors = {"round": "#c8d7e8", "turn": "#4a7ab5", "drain": "#d08a2e", "engine_wait": "#7a3d00"}
        for name in ("round", "turn", "drain", "engine_wait"):
            if not boxes[name]:
                continue
            p = os.path.join(d, name)
            with open(p, "w") as f:
                for t0, t1, row, h in boxes[name]:
                    f.write(f"{(t0 + t1) / 2} {row} {t0} {t1} {row - h} {row + h}\n")
            plots.append(f"'{p}' using 1:2:3:4:5:6 with boxxyerrorbars fs solid 0.9 noborder "
                         f"lc rgb '{colors[name]}' title '{name}'")
        styles = {"wait": (7, "#2e8b57"), "wait_fast": (6, "#2e8b57"), "collective": (5, "#8b008b"),
                  "barrier": (9, "#000000"), "cancel": (2, "#b22222"), "fail": (3, "#ff0000"),
                  "drain_fail": (3, "#ff0000"), "stop": (1, "#b22222")}
        for name, pts in sorted(marks.items()):
            pt, color = styles.get(name, (1, "#000000"))
            p = os.path.join(d, "m_" + name)
            with open(p, "w") as f:
                for ts, row in pts:
                    f.write(f"{ts} {row + 0.45}\n")
            plots.append(f"'{p}' using 1:2 with points pt {pt} ps 0.8 lc rgb '{color}' title '{name}'")
        labels = ", ".join(f'"{names[tid]}" {y[tid]}' for tid in rows)
        script = f"""
set terminal pngcairo noenhanced size 1400,{160 + 40 * len(rows)} font 'sans,10'
set output '{out}'
set title "{title}"
set xlabel 'time since the spawn started (us)'
set ytics ({labels})
set yrange [-0.7:{len(rows) - 0.3}]
set grid xtics
set key outside right top
plot {", ".join(plots)}
"""
        sp = os.path.join(d, "plot.gp")
        with open(sp, "w") as f:
            f.write(script)
        subprocess.run(["gnuplot", sp], check=True)


if __name__ == "__main__":
    main()
