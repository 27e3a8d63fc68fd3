# SPDX-License-Identifier: MIT
"""Check or rewrite the oracle-derived expected traces kept inline in C tests.

In tests/test_reference_*.c, tests/test_semantics_*.c and
tests/support/reference_traces.h (shared with the C++ tests), a comment line

    /* oracle: sem_drain.py::s_phase_a_fifo */

is followed by the expected trace as C string literal lines, exactly the
normalised output of that scenario (see oracle_lib.py). This script runs
each named scenario on the reference and compares:

    /usr/bin/python3 tests/oracle/refresh.py            # check, list differences
    /usr/bin/python3 tests/oracle/refresh.py --write    # rewrite the literals

Traces that were derived from an oracle scenario but edited for a documented
C difference say "derived from oracle:" instead and are not touched.
"""
import glob
import os
import re
import sys
import importlib.util

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import oracle_lib  # noqa: E402

MARK = re.compile(r"^\s*/\* oracle: (\S+\.py)::s_(\w+) \*/\s*$")
LIT = re.compile(r'^(\s*)"(.*)"(\s*\)?\s*;?)\s*$')
_mods = {}


def scenario(file, name):
    if file not in _mods:
        spec = importlib.util.spec_from_file_location(file[:-3], os.path.join(HERE, file))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _mods[file] = mod
    return oracle_lib.normalise(oracle_lib.run_one(getattr(_mods[file], "s_" + name)))


def main():
    write = "--write" in sys.argv
    bad = 0
    for path in sorted(glob.glob(os.path.join(TESTS, "test_reference_*.c")) +
                       glob.glob(os.path.join(TESTS, "test_semantics_*.c")) +
                       [os.path.join(TESTS, "support", "reference_traces.h")]):
        lines = open(path).read().split("\n")
        out = []
        i = 0
        changed = False
        while i < len(lines):
            out.append(lines[i])
            m = MARK.match(lines[i])
            i += 1
            if not m:
                continue
            j = i
            while j < len(lines) and LIT.match(lines[j]):
                j += 1
            old = lines[i:j]
            indent = LIT.match(old[0]).group(1) if old else "    "
            tail = LIT.match(old[-1]).group(3) if old else ";"
            want = scenario(m.group(1), m.group(2))
            new = []
            for k, ln in enumerate(want):
                esc = ln.replace("\\", "\\\\").replace('"', '\\"')
                new.append(f'{indent}"{esc}\\n"' + (tail if k == len(want) - 1 else ""))
            # Compare the text the literals spell, not their layout:
            # clang-format may split a long line into adjacent literals.
            def spelled(lits):
                return "".join(LIT.match(x).group(2) for x in lits)

            if spelled(new) != spelled(old):
                bad += 1
                print(f"{os.path.basename(path)}: {m.group(1)}::s_{m.group(2)} differs")
                changed = True
            out.extend(new if spelled(new) != spelled(old) else old)
            i = j
        if write and changed:
            open(path, "w").write("\n".join(out))
    print(f"{bad} difference(s)" + (" rewritten" if write and bad else ""))
    sys.exit(1 if bad and not write else 0)


if __name__ == "__main__":
    main()
