# SPDX-License-Identifier: MIT
"""Builds kbthreads._accel, the package's compiled part: the binding's hot
paths (kbthreads/_accel.c) and libkbthreads itself, compiled from its C
sources into the same extension module, with Concurrency Kit linked
statically (libck.a). The installed package needs no libkbthreads on the
system and no environment variable. Everything else is in pyproject.toml.

Where the library's sources come from: the repository around this folder
(../../src, ../../include, ../../gdb, ../../tools) or, in an sdist, the
copy of them this file put in _vendor/ (see SDist below). The list of C
files and the version are read from the library's own build files
(src/CMakeLists.txt's KB_SOURCES, include/kbthreads.h's KB_VERSION_*), so
they are written once.

Build requirements (Debian 12 names, for an offline build with
pip --no-build-isolation or python3 -m build --no-isolation): a C compiler
(gcc), python3-dev, libck-dev (libck.a), python3-setuptools, python3-wheel
and, for python3 -m build, python3-build.
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = "_vendor"
# What an sdist carries from the repository (folder: file name patterns).
VENDORED = {"src": r".*\.(c|h|map)$|^CMakeLists\.txt$", "include": r"^kbthreads\.h$",
            "gdb": r"^kbthreads_gdb\.py$", "tools": r"^kbthreads-dump$"}


def _root() -> str:
    """The folder holding src/, include/, gdb/ and tools/."""
    vendored = os.path.join(HERE, VENDOR)  # (first: an unpacked sdist may lie anywhere)
    if os.path.exists(os.path.join(vendored, "src", "kbthreads.map")):
        return vendored
    repo = os.path.normpath(os.path.join(HERE, "..", ".."))
    if os.path.exists(os.path.join(repo, "src", "kbthreads.map")):
        return repo
    sys.exit("kbthreads setup.py: the library's sources are neither in ../../src (a checkout) "
             "nor in _vendor/src (an sdist)")


ROOT = _root()


def _version() -> str:
    with open(os.path.join(ROOT, "include", "kbthreads.h")) as f:
        parts = dict(re.findall(r"^#define KB_VERSION_(MAJOR|MINOR|PATCH) +(\d+)", f.read(), re.M))
    return "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])


def _library_sources() -> list:
    """src/CMakeLists.txt's KB_SOURCES, plus the files the library's build
    picks by default: the baton (futex on Linux, condvar elsewhere) and the
    system calls of src/system.h (the Linux files on Linux, matching
    _feature_macros; the POSIX fallbacks elsewhere)."""
    with open(os.path.join(ROOT, "src", "CMakeLists.txt")) as f:
        m = re.search(r"set\(KB_SOURCES\s+([^)]*)\)", f.read())
    if not m:
        sys.exit("kbthreads setup.py: no set(KB_SOURCES ...) in src/CMakeLists.txt")
    names = m.group(1).split()
    if sys.platform.startswith("linux"):
        names += ["baton_futex.c", "system_linux.c", "system_backtrace_execinfo.c"]
    else:
        names += ["baton_condvar.c", "system_posix.c", "system_backtrace_none.c"]
    return [os.path.join(ROOT, "src", n) for n in names]


def _feature_macros() -> list:
    """src/CMakeLists.txt's KB_HAVE_* checks, answered for the platforms a
    wheel is built on (glibc Linux has them all); elsewhere the library's
    POSIX fallbacks and the condvar baton."""
    if not sys.platform.startswith("linux"):
        return [("KB_BATON_CONDVAR", None)]
    have = ["BACKTRACE", "STRERRORDESC_NP", "CONDATTR_SETCLOCK", "AFFINITY", "GDB_SECTION", "SETNAME", "GETTID"]
    return [("KB_HAVE_" + f, None) for f in have]


def _libck_archive() -> str:
    """libck.a (Debian: libck-dev), linked in whole so the package needs no libck.so."""
    dirs = []
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "ck"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            dirs.append(out.stdout.strip())
    except OSError:
        pass
    multiarch = getattr(sys.implementation, "_multiarch", "")
    dirs += ["/usr/lib/" + multiarch if multiarch else "/usr/lib", "/usr/local/lib", "/usr/lib"]
    for d in dirs:
        path = os.path.join(d, "libck.a")
        if os.path.exists(path):
            return path
    sys.exit("kbthreads setup.py: libck.a (Concurrency Kit's static library) not found in %s "
             "(Debian package: libck-dev)" % ", ".join(dirs))


def _extension() -> Extension:
    script = os.path.join(ROOT, "gdb", "kbthreads_gdb.py")
    return Extension(
        "kbthreads._accel",
        # the library's sources are added by BuildExt (absolute paths, so
        # that their objects stay in the build folder and the sdist does not
        # list them: it carries them in _vendor/)
        sources=["kbthreads/_accel.c", "kbthreads/_gdb_section.c"],
        include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "src")],
        define_macros=[("_GNU_SOURCE", None), ("KB_BUILDING_LIBRARY", None),
                       ("KB_GDB_SCRIPT", '"%s"' % script.replace("\\", "\\\\").replace('"', '\\"'))]
        + _feature_macros(),
        extra_compile_args=["-std=c11", "-fvisibility=hidden", "-funwind-tables", "-pthread"],
        # libck's symbols stay inside the module; -Bsymbolic binds the
        # library's own calls to this copy even when another libkbthreads
        # was loaded into the process first.
        extra_link_args=[_libck_archive(), "-Wl,--exclude-libs,ALL", "-Wl,-Bsymbolic", "-pthread"],
        depends=[script],
    )


class BuildExt(build_ext):
    def run(self):
        for ext in self.extensions:
            ext.sources = ext.sources + [s for s in _library_sources() if s not in ext.sources]
        super().run()


class BuildPy(build_py):
    """Also ships kbthreads-dump (tools/) and its layout code, the gdb
    extension (gdb/kbthreads_gdb.py), in the package: the console script
    kbthreads-dump runs kbthreads._dump."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "kbthreads")
        self.copy_file(os.path.join(ROOT, "gdb", "kbthreads_gdb.py"), os.path.join(pkg, "kbthreads_gdb.py"))
        self.copy_file(os.path.join(ROOT, "tools", "kbthreads-dump"), os.path.join(pkg, "_dump.py"))


class SDist(sdist):
    """Puts the library's sources in the sdist (_vendor/), so that it builds
    on its own, away from the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        for folder, pattern in VENDORED.items():
            out = os.path.join(base_dir, VENDOR, folder)
            os.makedirs(out, exist_ok=True)
            for name in sorted(os.listdir(os.path.join(ROOT, folder))):
                if re.search(pattern, name):
                    shutil.copy2(os.path.join(ROOT, folder, name), os.path.join(out, name))


setup(version=_version(), ext_modules=[_extension()], cmdclass={"build_ext": BuildExt, "build_py": BuildPy, "sdist": SDist})
