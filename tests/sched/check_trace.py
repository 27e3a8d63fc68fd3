#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Validate a libkbthreads Chrome trace-event file and print its events.

usage: check_trace.py TRACE.json

Parses the file with Python's json module (a real parser), checks the
trace-event fields every viewer needs (ph, name, pid, tid, ts; dur >= 0 on
slices; thread_name metadata for every track used; slices on one track never
overlap), then prints one line per event in file order:

    <track> <name> <args as k=v, sorted>

where <track> is the thread_name ("driver", "rank 0", ...). Exit 0 if valid,
1 with a message if not.
"""
import json
import sys


def fail(msg):
    print("invalid trace: " + msg)
    sys.exit(1)


def main():
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
    slices = {}
    out = []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            continue
        for k in ("name", "pid", "tid", "ts"):
            if k not in e:
                fail(f"event without {k}: {e}")
        if e["tid"] not in names:
            fail(f"track {e['tid']} has no thread_name")
        if ph == "X":
            if e.get("dur", -1) < 0:
                fail(f"slice without dur >= 0: {e}")
            if e["name"] in ("turn", "round", "drain"):
                slices.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph != "i":
            fail(f"unexpected phase {ph}")
        args = ",".join(f"{k}={v}" for k, v in sorted(e.get("args", {}).items()))
        out.append(f"{names[e['tid']]} {e['name']} {args}".rstrip())
    for tid, spans in slices.items():
        spans.sort()
        for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
            if b0 < a1 - 1e-3 and not (an == "round" and bn == "drain"):
                fail(f"overlapping {an}/{bn} slices on {names[tid]}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
