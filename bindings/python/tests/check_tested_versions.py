#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_tested_versions.py PYPROJECT STAMPS: the Python versions the
package declares are the ones its suite passed on.

pyproject.toml names versions twice: requires-python (">=3.X", the floor)
and the "Programming Language :: Python :: 3.Y" classifiers. The
classifiers must be exactly floor..newest, with no gap, and each of those
versions must have a stamp in STAMPS (left by python_version_test.sh,
make test-python) that says "pass". Exit 1, saying which, otherwise."""
from __future__ import annotations

import os
import re
import sys


def declared(pyproject: str) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """(the floor of requires-python, the 3.Y classifiers), read from the file's text."""
    with open(pyproject, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', text, re.M)
    if not m:
        sys.exit(f"{pyproject}: no requires-python = \">=3.X\"")
    found = re.findall(r'"Programming Language :: Python :: (\d+)\.(\d+)"', text)
    return (int(m.group(1)), int(m.group(2))), sorted((int(a), int(b)) for a, b in found)


def stamps(folder: str) -> dict[str, str]:
    """version -> the stamp's line ("pass 104 passed, ..." or "fail ...")."""
    if not os.path.isdir(folder):
        return {}
    out = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            out[name] = f.read().strip()
    return out


def problems(floor: tuple[int, int], classifiers: list[tuple[int, int]], ran: dict[str, str]) -> list[str]:
    if not classifiers:
        return ["no 'Programming Language :: Python :: 3.Y' classifier"]
    found = []
    if classifiers[0] != floor:
        found.append(f"requires-python's floor {floor[0]}.{floor[1]} is not the oldest classifier "
                     f"{classifiers[0][0]}.{classifiers[0][1]}")
    newest = classifiers[-1]
    want = [(floor[0], m) for m in range(floor[1], newest[1] + 1)]
    if sorted(set(classifiers)) != want and classifiers[0] == floor:
        found.append("the classifiers are not every version from the floor to the newest: "
                     + ", ".join(f"{a}.{b}" for a, b in classifiers))
    for major, minor in want:
        v = f"{major}.{minor}"
        stamp = ran.get(v)
        if stamp is None:
            found.append(f"{v} is declared, but no test-python run tested it")
        elif not stamp.startswith("pass "):
            found.append(f"{v} is declared, but its test-python run failed: {stamp}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    floor, classifiers, ran = *declared(argv[1]), stamps(argv[2])
    for v in sorted(ran, key=lambda s: tuple(int(p) for p in s.split("."))):
        print(f"  CPython {v}: {ran[v]}")
    found = problems(floor, classifiers, ran)
    for p in found:
        print(f"check_tested_versions: {p}")
    if not found:
        print(f"check_tested_versions: {floor[0]}.{floor[1]}..{classifiers[-1][0]}.{classifiers[-1][1]} "
              "declared, and every one of them tested")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
