# SPDX-License-Identifier: MIT
"""The greenlet reference on the greenlet this interpreter has (greenlet 3 in
the test venv) still prints the traces expected_traces.py holds, which were
recorded with Debian's greenlet 2.0.2.

The reference module and its oracle harness (fakectx.py) are not part of
this repository: they are read from $KB_ORACLE_DIR, else from
../shared/reference/oracle beside the checkout (as tests/oracle does). Where
they are not there, the trace tests are skipped, saying so; the model of the
reference in greenlet_ranks.py is checked against the same traces on every
machine (test_greenlet_model.py)."""
from __future__ import annotations

import importlib.util
import os
import re
import sys

import pytest

import expected_traces as X
import scenarios

greenlet = pytest.importorskip("greenlet")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
ORACLE = os.environ.get("KB_ORACLE_DIR") or os.path.normpath(
    os.path.join(ROOT, "..", "shared", "reference", "oracle"))
FAKECTX = os.path.join(ORACLE, "ref", "fakectx.py")
NO_ORACLE = f"the reference oracle is not beside this checkout ({FAKECTX} is missing; set KB_ORACLE_DIR)"


def in_test_venv() -> bool:
    return sys.prefix != sys.base_prefix


@pytest.mark.skipif(not in_test_venv(), reason="not the test venv: Debian's python3-greenlet is 2.0.2")
def test_the_test_venv_runs_the_reference_on_greenlet_3():
    assert int(greenlet.__version__.split(".")[0]) >= 3, greenlet.__version__


def load_fakectx():
    """The oracle's fakectx module (it imports the reference module beside it)."""
    if "fakectx" in sys.modules:
        return sys.modules["fakectx"]
    sys.path.insert(0, os.path.dirname(FAKECTX))
    spec = importlib.util.spec_from_file_location("fakectx", FAKECTX)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fakectx"] = mod
    spec.loader.exec_module(mod)
    return mod


class ReferenceT:
    """What scenarios.py calls T, over the oracle's fakectx: its own functions,
    and do_spawn_sliced as do_spawn (the reference ignores join)."""

    def __init__(self, fakectx):
        self.fakectx = fakectx
        for name in ("rec", "traced", "plan_body", "ar", "do_spawn", "post_state"):
            setattr(self, name, getattr(fakectx, name))

    def do_spawn_sliced(self, ctx, fn, args=(), nprocs=1):
        self.fakectx.do_spawn(ctx, fn, args, nprocs)


_SWITCHES = re.compile(r"^(wait_done \S+ \S+) switches=\d+$")


def normalise(lines: list[str]) -> list[str]:
    """The oracle's lines as expected_traces.py keeps them (its docstring):
    no switch counts, no fast path of the drain's phase (b) (a 'wait_fast
    main' inside a spawn), nothing between teardown and teardown_done."""
    out, in_spawn, in_teardown = [], False, False
    for ln in lines:
        if ln.startswith("spawn_begin"):
            in_spawn = True
        elif ln == "spawn_end":
            in_spawn = False
        if ln == "teardown":
            in_teardown = True
            out.append(ln)
            continue
        if ln.startswith("teardown_done"):
            in_teardown = False
        elif in_teardown:
            continue
        if in_spawn and ln.startswith("wait_fast main "):
            continue
        m = _SWITCHES.match(ln)
        out.append(m.group(1) if m else ln)
    return out


def reference_trace(name: str) -> list[str]:
    fakectx = load_fakectx()
    T = ReferenceT(fakectx)
    fakectx.TRACE.clear()
    ctx = fakectx.FakeRuntimeContext()
    getattr(scenarios, name)(ctx, T)
    fakectx.teardown(ctx)
    return normalise([fakectx.format_event(ev) for ev in fakectx.TRACE])


@pytest.mark.skipif(not os.path.exists(FAKECTX), reason=NO_ORACLE)
@pytest.mark.parametrize("name", scenarios.REFERENCE)
def test_the_reference_prints_the_recorded_trace_on_this_greenlet(name):
    assert reference_trace(name) == X.REFERENCE_TRACES[name].splitlines()
