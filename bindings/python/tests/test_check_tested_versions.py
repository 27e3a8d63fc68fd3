# SPDX-License-Identifier: MIT
"""check_tested_versions.py (make test-pythons' last step): the declared
Python versions must be exactly the ones whose suite passed."""
from __future__ import annotations

from check_tested_versions import problems

DECLARED = [(3, 10), (3, 11), (3, 12), (3, 13)]
ALL_PASSED = {v: "pass 102 passed" for v in ("3.10", "3.11", "3.12", "3.13")}


def test_every_declared_version_passed_is_no_problem():
    assert problems((3, 10), DECLARED, ALL_PASSED) == []


def test_a_declared_version_no_run_tested_is_a_problem():
    ran = {v: s for v, s in ALL_PASSED.items() if v != "3.12"}
    assert problems((3, 10), DECLARED, ran) == ["3.12 is declared, but no test-python run tested it"]


def test_a_declared_version_whose_run_failed_is_a_problem():
    ran = dict(ALL_PASSED, **{"3.13": "fail 1 failed, 101 passed"})
    assert problems((3, 10), DECLARED, ran) == [
        "3.13 is declared, but its test-python run failed: fail 1 failed, 101 passed"]


def test_a_floor_below_the_oldest_tested_version_is_a_problem():
    ran = dict(ALL_PASSED, **{"3.9": "pass 1 passed"})
    found = problems((3, 9), DECLARED, ran)
    assert found and "floor 3.9" in found[0]


def test_a_gap_in_the_classifiers_is_a_problem():
    found = problems((3, 10), [(3, 10), (3, 11), (3, 13)], ALL_PASSED)
    assert found and "not every version" in found[0]


def test_a_version_tested_but_not_declared_is_no_problem():
    assert problems((3, 10), DECLARED, dict(ALL_PASSED, **{"3.14": "pass 1 passed"})) == []
