# SPDX-License-Identifier: MIT
"""Every source, build and script file says its license in its first lines.

usage: spdx_lines.py SOURCE_DIR

The files are the tracked ones (`git ls-files`): *.c *.h *.cpp *.hpp *.py
*.sh *.cmake *.mk, CMakeLists.txt, Makefile, tools/*, .ci/run. Outside a
git checkout (an unpacked sdist or release tarball) the same kinds of file
on disk are checked instead, build folders left out, and the output says so.
Each must carry "SPDX-License-Identifier: MIT" within its first FIRST_LINES
lines (line 1, or line 2 after a shebang line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SPDX = "SPDX-License-Identifier: MIT"
FIRST_LINES = 3
SUFFIXES = (".c", ".h", ".cpp", ".hpp", ".py", ".sh", ".cmake", ".mk")
NAMES = ("CMakeLists.txt", "Makefile")
# Build outputs and caches, which an on-disk walk must not take for sources.
NOT_SOURCES = ("build", "dist", ".git", "__pycache__", ".venv", ".pytest_cache")


def wanted(path: str) -> bool:
    parts = path.split("/")
    return (
        path.endswith(SUFFIXES)
        or parts[-1] in NAMES
        or (len(parts) == 2 and parts[0] == "tools")
        or path == ".ci/run"
    )


def tracked_files(source: Path) -> list[str] | None:
    """The tracked files, or None when source is not in a git checkout."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(source), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    return [path for path in listed.split("\0") if path]


def files_on_disk(source: Path) -> list[str]:
    paths = []
    for folder, subfolders, files in os.walk(source):
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(NOT_SOURCES) and not name.endswith(".egg-info")
        ]
        paths += [(Path(folder) / name).relative_to(source).as_posix() for name in files]
    return paths


def has_spdx_line(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="replace") as source:
        return any(SPDX in line for _, line in zip(range(FIRST_LINES), source))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source = Path(argv[1])
    paths = tracked_files(source)
    if paths is None:
        print(f"{source} is not a git checkout: checking the files on disk instead of the tracked ones")
        paths = files_on_disk(source)
    checked = sorted(path for path in paths if wanted(path) and (source / path).is_file())
    missing = [path for path in checked if not has_spdx_line(source / path)]
    for path in missing:
        print(f"FAIL: {path} has no '{SPDX}' line in its first {FIRST_LINES} lines")
    if not checked:
        print("FAIL: no source files found")
        return 1
    if not missing:
        print(f"ok: {len(checked)} files carry '{SPDX}'")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
