# SPDX-License-Identifier: MIT
"""Builds kbthreads._accel, the package's compiled part, with the project's
own CMake build: configured with KB_PYTHON_WHEEL=ON for the interpreter
running this file, it links the extension (kbthreads/_accel.c) with the
static, position-independent libkbthreads and libck.a (Concurrency Kit),
so the installed package needs no libkbthreads on the system and no
environment variable. The list of C files and the feature checks are
CMake's alone (src/CMakeLists.txt, bindings/python/CMakeLists.txt).
Everything else is in pyproject.toml.

Where CMake's sources come from: the repository around this folder or, in
an sdist, the copy of them this file put in _vendor/ (SDist below).

Nothing is written into the source folder: the build (CMake's included)
and the egg-info live in a temporary folder, so a wheel built from a
checkout leaves nothing that the source tree's tests could take for an
installed package.

Build requirements (Debian 12 names, for an offline build with
pip --no-build-isolation or python3 -m build --no-isolation): cmake,
pkg-config, a C compiler (gcc), python3-dev, libck-dev (libck.a),
python3-setuptools, python3-wheel and, for python3 -m build, python3-build.
"""
from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = "_vendor"

# What the wheel carries besides kbthreads/ and its compiled part: (path in
# the repository, and so in _vendor/, -> path in the wheel). A folder's
# *.py files go, subfolders included, as a package.
PACKAGED = [
    ("tools/kbthreads_tools", "kbthreads_tools"),  # the dump and the explorer (tools/)
    ("gdb/kbthreads_gdb.py", "kbthreads_tools/kbthreads_gdb.py"),  # the dump's layout code
]
# What CMake's KB_PYTHON_WHEEL build reads (folder: file name pattern); the
# sdist carries these and PACKAGED's sources.
CMAKE_INPUTS = {".": r"^CMakeLists\.txt$", "cmake": r"", "src": r"", "include": r"", "gdb": r"",
                "bindings/python": r"^CMakeLists\.txt$", "bindings/python/kbthreads": r"\.[ch]$"}


def _root() -> str:
    """The folder holding the project's CMakeLists.txt, src/ and the rest."""
    for root in (os.path.join(HERE, VENDOR), os.path.join(HERE, "..", "..")):  # (an sdist may lie anywhere)
        if os.path.exists(os.path.join(root, "src", "kbthreads.map")):
            return os.path.normpath(root)
    sys.exit("kbthreads setup.py: the project's sources are neither in ../.. (a checkout) nor in _vendor (an sdist)")


ROOT = _root()
WORK = tempfile.mkdtemp(prefix="kbthreads-build-")  # build/, egg-info: out of the source tree
atexit.register(shutil.rmtree, WORK, True)


def _version() -> str:
    with open(os.path.join(ROOT, "include", "kbthreads.h")) as f:
        parts = dict(re.findall(r"^#define KB_VERSION_(MAJOR|MINOR|PATCH) +(\d+)", f.read(), re.M))
    return "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])


def _files(source: str, dest: str) -> list[tuple[str, str]]:
    """(file, its path in the wheel) for a PACKAGED entry: a file, or a folder of *.py."""
    path = os.path.join(ROOT, source)
    if not os.path.isdir(path):
        return [(path, dest)]
    found = glob.glob(os.path.join(path, "**", "*.py"), recursive=True)
    return [(f, os.path.join(dest, os.path.relpath(f, path))) for f in sorted(found) if "__pycache__" not in f]


class BuildExt(build_ext):
    """CMake configures and builds kbthreads._accel (that target only); the
    module is copied to where setuptools packs it."""

    def build_extension(self, ext: Extension) -> None:
        build = os.path.join(WORK, "cmake")
        jobs = str(self.parallel if type(self.parallel) is int and self.parallel > 0 else os.cpu_count() or 1)
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DKB_PYTHON_WHEEL=ON", "-DKB_PYTHON3=" + sys.executable],
                       check=True)
        subprocess.run(["cmake", "--build", build, "--target", "kbthreads_pyaccel", "-j", jobs], check=True)
        built = os.path.join(build, "bindings", "python", "kbthreads", "_accel" + sysconfig.get_config_var("EXT_SUFFIX"))
        out = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        self.copy_file(built, out)


class BuildPy(build_py):
    """Also puts PACKAGED's files in the wheel."""

    def run(self) -> None:
        super().run()
        for entry in PACKAGED:
            for path, dest in _files(*entry):
                self.mkpath(os.path.dirname(os.path.join(self.build_lib, dest)))
                self.copy_file(path, os.path.join(self.build_lib, dest))


class SDist(sdist):
    """Puts what CMake's build and PACKAGED need in the sdist (_vendor/), so
    that it builds on its own, away from the repository. (The licenses go
    at its top through pyproject.toml's license-files.)"""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        copies = []
        for folder, pattern in CMAKE_INPUTS.items():
            for name in sorted(os.listdir(os.path.join(ROOT, folder))):
                if os.path.isfile(os.path.join(ROOT, folder, name)) and re.search(pattern, name):
                    copies.append(os.path.join(folder, name))
        for entry in PACKAGED:
            copies += [os.path.relpath(path, ROOT) for path, _ in _files(*entry)]
        for rel in copies:
            self.mkpath(os.path.dirname(os.path.join(base_dir, VENDOR, rel)))
            shutil.copy2(os.path.join(ROOT, rel), os.path.join(base_dir, VENDOR, rel))


setup(
    version=_version(),
    ext_modules=[Extension("kbthreads._accel", sources=[])],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy, "sdist": SDist},
    options={"build": {"build_base": os.path.join(WORK, "build")}, "egg_info": {"egg_base": WORK}},
)
