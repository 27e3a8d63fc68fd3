# SPDX-License-Identifier: MIT
"""The rank programs of scenarios.py, run by kbthreads, print the traces the
greenlet reference printed for them (expected_traces.py says how those were
recorded and lists every deliberate difference)."""
import pytest

import expected_traces as X
import kbfake
import scenarios


try:
    import greenlet  # noqa: F401  (only scenarios.NEEDS_GREENLET use it)

    NO_GREENLET = ""
except ImportError as e:
    NO_GREENLET = f"greenlet does not import on this interpreter ({e})"


def reference_scenarios():
    """scenarios.REFERENCE, those needing greenlet skipped where it does not import."""
    skip = pytest.mark.skip(reason=NO_GREENLET)
    return [pytest.param(n, marks=skip) if NO_GREENLET and n in scenarios.NEEDS_GREENLET else n
            for n in scenarios.REFERENCE]


def run(name):
    return kbfake.run(lambda ctx: getattr(scenarios, name)(ctx, kbfake))


def reference_with_differences(name):
    lines = X.REFERENCE_TRACES[name].splitlines()
    for ref_line, kb_line in X.DIFFERENCES.get(name, []):
        assert lines.count(ref_line) == 1, f"{name}: {ref_line!r} not in the reference trace once"
        lines[lines.index(ref_line)] = kb_line
    return lines


def test_every_scenario_has_an_expected_trace():
    assert sorted(scenarios.REFERENCE) == sorted(X.REFERENCE_TRACES)
    assert sorted(scenarios.BINDING_ONLY) == sorted(X.BINDING_TRACES)
    assert set(X.DIFFERENCES) <= set(X.REFERENCE_TRACES)
    assert set(X.JOIN_ROUNDS) == {n for n in scenarios.REFERENCE if n.startswith("s_sliced_")}


@pytest.mark.parametrize("name", reference_scenarios())
def test_reference_trace(name):
    got = run(name)
    rounds = [got[i - 1] for i, ln in enumerate(got) if ln == "join_round"]
    assert rounds == X.JOIN_ROUNDS.get(name, [])
    assert [ln for ln in got if ln != "join_round"] == reference_with_differences(name)


@pytest.mark.parametrize("name", scenarios.BINDING_ONLY)
def test_binding_trace(name):
    assert run(name) == X.BINDING_TRACES[name].splitlines()


@pytest.mark.parametrize("name", ["s09_rank2_raises_step2", "s06_allreduce4", "s_two_root_causes"])
def test_traces_are_deterministic(name):
    first = run(name)
    for _ in range(20):
        assert run(name) == first
