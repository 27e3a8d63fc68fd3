# SPDX-License-Identifier: MIT
"""The depth job of bench/harness/run.py (issue 30; bench/python/depth_model.py): the cost
of one yield against the depth of C frames at the suspension point, through
the Python binding (kbthreads_py) and on greenlet, N = 8 ranks, one figure
depth_<D> per depth. At each depth the two run back to back, so the figures
compared with each other are taken close in time.
"""
from __future__ import annotations

import os
from typing import List

from runner import Runner


def depth_argv(r: Runner, prog: str, depth: int) -> List[str]:
    """The common part of both programs' command line at one depth."""
    p = r.plan
    return [r.python, os.path.join(r.py_dir, prog), "depth", "--n", str(p.depth_n), "--depth", str(depth),
            "--m", str(p.m_for(p.depth_ops, p.depth_n)), "--reps", str(p.reps)]


def depth_family(r: Runner) -> None:
    """Every depth of the plan: the binding, then greenlet (each skipped when it cannot run)."""
    if not r.want("depth"):
        return
    binding = r.python_binding()
    for depth in r.plan.depths:
        if binding:
            r.run("python depth D=%d N=%d" % (depth, r.plan.depth_n),
                  depth_argv(r, "py_bench.py", depth) + ["--lib", binding[0], "--accel", binding[1]])
        if r.greenlet_ok:
            r.run("greenlet depth D=%d N=%d" % (depth, r.plan.depth_n), depth_argv(r, "peer_greenlet.py", depth))
