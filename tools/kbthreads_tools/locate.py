# SPDX-License-Identifier: MIT
"""Where the gdb extension (gdb/kbthreads_gdb.py) is, seen from this
package: the dump imports its layout code, the explorer's gdb script
sources it when gdb did not auto-load it."""

from __future__ import annotations

import os

# This package's folder (symlinks resolved) and the folder that holds it,
# the one to put on sys.path to import kbthreads_tools.
PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
IMPORT_DIR = os.path.dirname(PACKAGE_DIR)


def gdb_extension_paths() -> list[str]:
    """The candidates, first found wins: beside the package (the wheel
    carries it as kbthreads_tools/kbthreads_gdb.py), the source tree's gdb/
    (the package is tools/kbthreads_tools), then the installed copy (the
    package is <prefix>/share/kbthreads/kbthreads_tools, beside
    <prefix>/share/kbthreads/kbthreads_gdb.py)."""
    return [
        os.path.join(PACKAGE_DIR, "kbthreads_gdb.py"),
        os.path.normpath(os.path.join(IMPORT_DIR, "..", "gdb", "kbthreads_gdb.py")),
        os.path.join(IMPORT_DIR, "kbthreads_gdb.py"),
    ]
