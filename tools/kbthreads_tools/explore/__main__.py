# SPDX-License-Identifier: MIT
"""python3 -m kbthreads_tools.explore: kbthreads-explore."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python3 -m kbthreads_tools.explore"))
