# SPDX-License-Identifier: MIT
"""The explorer's package (kbthreads_tools.explore, in the folder named by
KB_TOOLS_DIR: the source tree's tools/), for the tests that call its
functions: load_explore() gives one namespace of the public names of its
parts (read_schedule, Section, Outcome, shrink, Coverage, ...), each
still defined by its own module."""
from __future__ import annotations

import importlib
import os
import sys
import types

PARTS = ("schedule_file", "delays", "runner", "strategies", "coverage", "runs", "shrink", "gdb_script", "results",
         "levels", "report", "exploration", "merge", "cli")


def load_explore() -> types.SimpleNamespace:
    tools = os.environ["KB_TOOLS_DIR"]
    if tools not in sys.path:
        sys.path.insert(0, tools)
    names: dict[str, object] = {}
    for part in PARTS:
        module = importlib.import_module(f"kbthreads_tools.explore.{part}")
        for name, value in vars(module).items():
            if name.startswith("_") or isinstance(value, types.ModuleType):
                continue
            if isinstance(value, (type, types.FunctionType)) and value.__module__ != module.__name__:
                continue  # imported from another part: taken from that one
            names.setdefault(name, value)  # constants: PARTS lists a part before those importing from it
    return types.SimpleNamespace(**names)
