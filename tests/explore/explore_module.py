# SPDX-License-Identifier: MIT
"""The build tree's kbthreads-explore (a script without .py, named by
KB_EXPLORE) loaded as a module, for the tests that call its functions."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types


def load_explore() -> types.ModuleType:
    """The module, loaded once per process."""
    loader = importlib.machinery.SourceFileLoader("kbthreads_explore", os.environ["KB_EXPLORE"])
    if loader.name in sys.modules:
        return sys.modules[loader.name]
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up
    loader.exec_module(module)
    return module
