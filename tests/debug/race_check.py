#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run a program under a race detector and judge the reports.

Usage: race_check.py --tool {tsan,helgrind,drd} --expect {none,victim} -- COMMAND...

COMMAND is the program (tsan: built with -fsanitize=thread) or the valgrind
command line (helgrind, drd: with --error-exitcode=99). Its output is echoed.

  --expect none    pass iff the tool reports nothing and the program exits 0;
  --expect victim  pass iff the tool reports at least one data race, every
                   report it makes (of any kind) is a race on the address
                   the program printed as "victim at 0x...", and the program
                   itself finished ("spawn returned 0").

So the racy program proves both halves: the real race is seen, and nothing
else (no report from the library's own handoff) is.
"""

import argparse
import os
import re
import subprocess
import sys

TOOL_EXIT = {"tsan": 66, "helgrind": 99, "drd": 99}


def addr(text):
    return int(text, 16)


def tsan_reports(out):
    """[(kind, [addresses])] for every ThreadSanitizer warning."""
    reports = []
    for block in re.split(r"^=+\n(?=WARNING: ThreadSanitizer)", out, flags=re.M)[1:]:
        m = re.match(r"WARNING: ThreadSanitizer: ([^(\n]+)", block)
        kind = m.group(1).strip() if m else "?"
        body = block.split("SUMMARY: ThreadSanitizer", 1)[0]
        access = r"^\s+(?:Previous )?(?:[Aa]tomic )?(?:[Rr]ead|[Ww]rite) of size \d+ at (0x[0-9a-f]+)"
        addrs = [addr(a) for a in re.findall(access, body, re.M)]
        reports.append((kind, addrs))
    m = re.search(r"ThreadSanitizer: reported (\d+) warnings", out)
    total = int(m.group(1)) if m else len(reports)
    return reports, total


def valgrind_reports(out, tool):
    """([(kind, [addresses])] for every error context printed, number of contexts)."""
    m = re.search(r"ERROR SUMMARY: (\d+) errors from (\d+) contexts", out)
    contexts = int(m.group(2)) if m else None
    reports = []
    if tool == "helgrind":
        for a in re.findall(r"Possible data race during (?:read|write) of size \d+ at (0x[0-9A-Fa-f]+)", out):
            reports.append(("data race", [addr(a)]))
    else:
        for a in re.findall(r"Conflicting (?:load|store) by thread \d+ at (0x[0-9A-Fa-f]+)", out):
            reports.append(("data race", [addr(a)]))
    return reports, contexts


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__)
        return 2
    split = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", choices=sorted(TOOL_EXIT), required=True)
    ap.add_argument("--expect", choices=["none", "victim"], required=True)
    args = ap.parse_args(argv[:split])
    cmd = argv[split + 1:]

    env = dict(os.environ)
    if args.tool == "tsan":
        # Known exit code; every report printed (not only the first).
        env["TSAN_OPTIONS"] = (env.get("TSAN_OPTIONS", "") + " exitcode=66 halt_on_error=0").strip()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=1800)
    out = p.stdout.decode("utf-8", "replace")
    sys.stdout.write(out)
    print("--- race_check: %s exited with %d" % (os.path.basename(cmd[0]), p.returncode))

    if args.tool == "tsan":
        reports, count = tsan_reports(out)
    else:
        reports, count = valgrind_reports(out, args.tool)
        if count is None:
            print("FAIL: no ERROR SUMMARY line: did %s run?" % args.tool)
            return 1

    if args.expect == "none":
        if count != 0 or reports:
            print("FAIL: %s reported %d problem(s); expected none" % (args.tool, max(count, len(reports))))
            return 1
        if p.returncode != 0:
            print("FAIL: the program failed (exit %d)" % p.returncode)
            return 1
        print("PASS: %s reported nothing" % args.tool)
        return 0

    m = re.search(r"victim at (0x[0-9a-fA-F]+)", out)
    if not m:
        print("FAIL: the program did not print its victim's address")
        return 1
    victim = addr(m.group(1))
    if "spawn returned 0" not in out:
        print("FAIL: the program did not finish its spawn")
        return 1
    if p.returncode != TOOL_EXIT[args.tool]:
        print("FAIL: exit %d, expected %s's error exit %d" % (p.returncode, args.tool, TOOL_EXIT[args.tool]))
        return 1
    if not reports:
        print("FAIL: %s reported no data race on the victim at 0x%x" % (args.tool, victim))
        return 1
    bad = [r for r in reports if r[0] != "data race" or not r[1] or any(a != victim for a in r[1])]
    if bad or count != len(reports):
        print("FAIL: %s made %d report(s) that are not a race on the victim at 0x%x "
              "(%d report(s) parsed, %d counted by the tool)"
              % (args.tool, len(bad) + abs(count - len(reports)), victim, len(reports), count))
        return 1
    print("PASS: %s reported the race on the victim at 0x%x (%d report(s)), and nothing else"
          % (args.tool, victim, len(reports)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
