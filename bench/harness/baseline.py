# SPDX-License-Identifier: MIT
"""The baseline side of a run with --baseline-bindir, as a results file of its own.

The jobs run on the baseline build name their figures with "_baseline" in
the impl (kbthreads_baseline, kbthreads_baseline_hog, kbthreads_py_baseline_pair,
...) so that the report can show both builds of one run side by side.
For bench/report/compare.py the same figures become a results file of their own,
<kind>-baseline-*.json, under the names the new build's figures have
(kbthreads, kbthreads_hog, kbthreads_py_pair, ...): comparing against a
baseline is then comparing two results files.
"""
from __future__ import annotations

import copy
from typing import Any, Dict

TAG = "_baseline"


def as_new_name(impl: str) -> str:
    """kbthreads_py_baseline_pair -> kbthreads_py_pair."""
    return impl.replace(TAG, "", 1)


def baseline_results(result: Dict[str, Any]) -> Dict[str, Any]:
    """The run's results restricted to the baseline build's figures, renamed as the new build's."""
    out = {k: copy.deepcopy(v) for k, v in result.items() if k not in ("samples", "summary", "jobs")}
    out["kind"] = result["kind"] + "-baseline"
    out["summary"] = [dict(r, impl=as_new_name(r["impl"])) for r in result["summary"] if TAG in r["impl"]]
    out["samples"] = [dict(s, impl=as_new_name(s["impl"])) for s in result["samples"] if TAG in s["impl"]]
    out["jobs"] = [j for j in result["jobs"] if "baseline" in j["label"]]
    out["built_from"] = result.get("baseline_bindir")
    return out
