# SPDX-License-Identifier: MIT
"""The package's console scripts (pyproject.toml: [project.scripts])."""
from __future__ import annotations

import sys


def dump() -> int:
    """kbthreads-dump PID: tools/kbthreads-dump, shipped as kbthreads/_dump.py."""
    from . import _dump  # type: ignore[attr-defined]

    return _dump.main(sys.argv[1:])


def explore() -> int:
    """kbthreads-explore: kbthreads/explore.py."""
    from . import explore as _explore

    return _explore.main(prog="kbthreads-explore")
