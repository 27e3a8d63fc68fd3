# SPDX-License-Identifier: MIT
"""The ctypes layer: loading the package's compiled part and declaring the
library's C API.

Only this module knows the C declarations of include/kbthreads.h. The
library is reached with ctypes.CDLL, which releases the GIL around every
foreign call: a rank blocked in the library waiting for the baton (or the
driver blocked in kb_join) holds no GIL, so the thread that gets the baton
can run Python.

The library is the one the compiled part kbthreads._accel is linked with
(in a pip-built package, compiled into it): ctypes loads that module's
file, so the ctypes calls here and the hot paths in _accel.c reach the
same copy. Which _accel, first match wins:
  1. $KBTHREADS_ACCEL, a path to a built extension (developers, the bench);
  2. with $KBTHREADS_LIBRARY (a library in a CMake build tree), the
     extension built in that same tree (<build>/bindings/python/kbthreads/);
  3. the package's own (pip install, or make install).
"""
from __future__ import annotations

import ctypes
import errno
import importlib.machinery
import importlib.util
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_long,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from types import ModuleType

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
            from . import _accel  # type: ignore[attr-defined]
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


accel = _load_accel()
lib = ctypes.CDLL(accel.__file__)

# ---- constants (include/kbthreads.h) ---------------------------------------
KB_EINVAL = -errno.EINVAL
KB_ENOMEM = -errno.ENOMEM
KB_EAGAIN = -errno.EAGAIN
KB_EBUSY = -errno.EBUSY
KB_EPERM = -errno.EPERM
KB_ECANCELED = -errno.ECANCELED
KB_ESPAWN = -10000
KB_EEXITED = -10001

KB_WAIT_QUEUED = 0
KB_WAIT_COLLECTIVE = 1
KB_WAIT_DRIVER = 2

KB_CANCEL_UNWIND = 0
KB_CANCEL_RETURN = 1

HANDLE_RESERVED_LOW = 0
HANDLE_RESERVED_HIGH = 2**64 - 1

kb_handle = c_uint64

# ---- callback types -----------------------------------------------------------
RANK_FN = CFUNCTYPE(c_int, c_int, c_void_p)  # int (*)(int rank, void *arg)
WAIT_HOOK = CFUNCTYPE(c_int, c_void_p, kb_handle, c_void_p, c_int)
BIND_HOOK = CFUNCTYPE(None, c_void_p, c_void_p, c_int)
ABORT_HOOK = CFUNCTYPE(None, c_void_p, c_void_p)


# ---- structs --------------------------------------------------------------------
class Engine(Structure):
    """struct kb_engine (copied by kb_ctx_create)."""

    _fields_ = [
        ("self", c_void_p),
        ("wait", WAIT_HOOK),
        ("bind", BIND_HOOK),
        ("abort", ABORT_HOOK),
    ]


class Collective(Structure):
    """struct kb_collective."""

    _fields_ = [("handle", kb_handle), ("sip_id", c_int), ("meta", c_void_p)]


class RankError(Structure):
    """struct kb_rank_error."""

    _fields_ = [("rank", c_int), ("code", c_int), ("message", c_char_p)]


class SpawnOpts(Structure):
    """struct kb_spawn_opts: the two leading fields this binding sets, then a
    zeroed tail. The header says later versions add fields and that zero
    means "default" for each, so a zero tail longer than any field added so
    far keeps every later field at its default (the environment variables
    KB_STALL_MS, KB_CRASH_REPORT, ... still apply)."""

    _fields_ = [
        ("stack_size", c_size_t),
        ("cancel_mode", c_int),
        ("_zero_tail", c_uint32 * 31),
    ]


# ---- prototypes -----------------------------------------------------------------
def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_proto("kb_strerror", c_char_p, c_int)
_proto("kb_version", c_char_p)
_proto("kb_ctx_create", c_int, POINTER(Engine), POINTER(c_void_p))
_proto("kb_ctx_destroy", c_int, c_void_p)
_proto("kb_wait", c_int, c_void_p, kb_handle)
_proto("kb_enqueue_wait", c_int, c_void_p, kb_handle)
_proto("kb_complete", c_int, c_void_p, kb_handle)
_proto("kb_is_completed", c_int, c_void_p, kb_handle)
_proto("kb_collective_submit", c_int, c_void_p, kb_handle, c_int, c_void_p)
_proto("kb_pending_waits", c_size_t, c_void_p, POINTER(kb_handle), c_size_t)
_proto("kb_completed_handles", c_size_t, c_void_p, POINTER(kb_handle), c_size_t)
_proto("kb_pending_collectives", c_size_t, c_void_p, POINTER(Collective), c_size_t)
_proto("kb_rank", c_int)
_proto("kb_world_size", c_int)
_proto("kb_cancelled", c_int)
_proto("kb_spawn_error_count", c_size_t, c_void_p)
_proto("kb_spawn_error_get", POINTER(RankError), c_void_p, c_size_t)
_proto("kb_spawn_error_drain_code", c_int, c_void_p)
_proto("kb_spawn_error_drain_handle", kb_handle, c_void_p)
_proto("kb_spawn_error_free", None, c_void_p)
_proto("kb_start", c_int, c_void_p, RANK_FN, c_void_p, c_int, POINTER(SpawnOpts), POINTER(c_void_p))
_proto("kb_join", c_int, c_void_p, c_long, POINTER(c_void_p))
_proto("kb_process_context_free", None, c_void_p)


def strerror(code: int) -> str:
    return lib.kb_strerror(code).decode("utf-8", "replace")


def version() -> str:
    return lib.kb_version().decode()


class KbError(RuntimeError):
    """A libkbthreads call failed with a KB_E* code (a negative errno value)."""

    def __init__(self, code: int, what: str = ""):
        self.code = code
        text = strerror(code)
        super().__init__(f"{what}: {text} ({code})" if what else f"{text} ({code})")


if int(version().split(".")[0]) != ABI_MAJOR:  # pragma: no cover - a wrong library
    raise ImportError(f"kbthreads: libkbthreads {version()} loaded, this binding needs {ABI_MAJOR}.x")


accel.init(KbError)
