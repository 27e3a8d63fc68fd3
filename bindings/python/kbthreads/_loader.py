# SPDX-License-Identifier: MIT
"""Loading the package's compiled part, kbthreads._accel: the binding's
only way into libkbthreads (it is linked with the library, or, in a
pip-built package, has it compiled in). Which _accel, first match wins:
  1. $KBTHREADS_ACCEL, a path to a built extension (developers, the bench);
  2. with $KBTHREADS_LIBRARY (a library in a CMake build tree), the
     extension built in that same tree (<build>/bindings/python/kbthreads/);
  3. the package's own (pip install, or make install).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from types import ModuleType
from typing import TYPE_CHECKING

ABI_MAJOR = 0  # the SONAME's major version this binding is written for


def _accel_in_build_tree(library: str) -> str | None:
    """The extension built beside library in a CMake build tree
    (build/src/libkbthreads.so.0 -> build/bindings/python/kbthreads/), or None."""
    folder = os.path.join(os.path.dirname(os.path.abspath(library)), "..", "bindings", "python", "kbthreads")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = os.path.normpath(os.path.join(folder, "_accel" + suffix))
        if os.path.exists(candidate):
            return candidate
    return None


def _load_accel() -> ModuleType:
    path = os.environ.get("KBTHREADS_ACCEL") or None
    library = os.environ.get("KBTHREADS_LIBRARY")
    if path is None and library:
        path = _accel_in_build_tree(library)
        if path is None:
            raise ImportError(
                f"kbthreads: KBTHREADS_LIBRARY={library} names no CMake build tree with the binding's "
                "compiled part (<build>/bindings/python/kbthreads/_accel*.so; it needs python3-dev)"
            )
    if path is None:
        try:
            from . import _accel
        except ImportError as e:
            raise ImportError(
                "kbthreads: the package's compiled part kbthreads._accel is missing "
                f"({e}): install the package with pip (pip install ./bindings/python), "
                "or set KBTHREADS_LIBRARY to a library in a CMake build tree"
            ) from e
        return _accel
    spec = importlib.util.spec_from_file_location("kbthreads._accel", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"kbthreads: the compiled part {path} is not a Python extension module")
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except ImportError as e:
        raise ImportError(f"kbthreads: cannot load the compiled part {path}: {e}") from e
    return mod


if TYPE_CHECKING:
    from . import _accel  # mypy reads its stub, _accel.pyi

    accel = _accel
else:
    accel = _load_accel()


def version() -> str:
    """The loaded library's version, "major.minor.patch"."""
    return accel.version()


def accelerated() -> bool:
    """True: kept for programs written when the compiled part was optional.
    Every installation has kbthreads._accel, the binding's only way into
    the library, so this can only be true."""
    return True


if int(version().split(".")[0]) != ABI_MAJOR:  # pragma: no cover - a wrong library
    raise ImportError(f"kbthreads: libkbthreads {version()} loaded, this binding needs {ABI_MAJOR}.x")
