# SPDX-License-Identifier: MIT
"""python3 -m kbthreads.explore: kbthreads-explore, kept under the
binding's name. The explorer is the kbthreads_tools package's
(tools/kbthreads_tools/explore/, installed beside this package by pip);
in the source tree, where only bindings/python is on the path, it is
found in tools/ beside bindings/.

The schedule-file API stays importable from here: read_schedule(path)
and Section (kbthreads_tools.explore.schedule_file).
"""

from __future__ import annotations

import os
import sys

try:
    import kbthreads_tools.explore  # noqa: F401 (is it importable?)
except ImportError:
    _tools = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "tools")
    if not os.path.isdir(os.path.join(_tools, "kbthreads_tools")):
        raise
    sys.path.insert(0, os.path.normpath(_tools))

from kbthreads_tools.explore.cli import main  # noqa: E402
from kbthreads_tools.explore.schedule_file import (  # noqa: E402
    Section,
    differing_rounds,
    read_schedule,
    schedule_digest,
    write_partial,
)

__all__ = ["Section", "differing_rounds", "main", "read_schedule", "schedule_digest", "write_partial"]

if __name__ == "__main__":
    sys.exit(main(prog="python3 -m kbthreads.explore"))
