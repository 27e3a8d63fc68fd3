"""The ctypes layer: loading libkbthreads and declaring its C API.

Only this module knows the C declarations of include/kbthreads.h. The
library is loaded with ctypes.CDLL, which releases the GIL around every
foreign call: a rank blocked in kb_yield/kb_wait/kb_barrier waiting for the
baton (or the driver blocked in kb_join) holds no GIL, so the thread that
gets the baton can run Python.

Where the library comes from, first match wins:
  1. $KBTHREADS_LIBRARY (a path to libkbthreads.so*; no fallback when set),
  2. the path recorded by `cmake --install` next to this file (_libpath.py),
  3. "libkbthreads.so.0" through the dynamic loader (an installed library).

The hot paths (suspension points, a rank's ctx.wait, the engine's wait
hook) go through the C accelerator kbthreads._accel when it is there (see
_load_accel); everything else, and everything without it, goes through
ctypes.
"""
from __future__ import annotations

import ctypes
import errno
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
from typing import Any

SONAME = "libkbthreads.so.0"
ABI_MAJOR = 0  # the SONAME's major version this binding is written for


def _candidates() -> list[str]:
    env = os.environ.get("KBTHREADS_LIBRARY")
    if env:
        return [env]
    out = []
    try:
        from ._libpath import LIBRARY  # written by `cmake --install`
    except ImportError:
        LIBRARY = None
    if LIBRARY and os.path.exists(LIBRARY):
        out.append(LIBRARY)
    out.append(SONAME)
    return out


def _load() -> ctypes.CDLL:
    tried = []
    for name in _candidates():
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"{name}: {e}")
    hint = (
        "set KBTHREADS_LIBRARY to the path of a built libkbthreads.so "
        "(e.g. build/src/libkbthreads.so.0) or install libkbthreads"
    )
    raise ImportError("kbthreads: cannot load libkbthreads (" + "; ".join(tried) + "); " + hint)


lib = _load()

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
_proto("kb_wait_meta", c_int, c_void_p, kb_handle, c_void_p)
_proto("kb_enqueue_wait", c_int, c_void_p, kb_handle)
_proto("kb_complete", c_int, c_void_p, kb_handle)
_proto("kb_is_completed", c_int, c_void_p, kb_handle)
_proto("kb_collective_submit", c_int, c_void_p, kb_handle, c_int, c_void_p)
_proto("kb_pending_waits", c_size_t, c_void_p, POINTER(kb_handle), c_size_t)
_proto("kb_completed_handles", c_size_t, c_void_p, POINTER(kb_handle), c_size_t)
_proto("kb_pending_collectives", c_size_t, c_void_p, POINTER(Collective), c_size_t)
_proto("kb_rank", c_int)
_proto("kb_world_size", c_int)
_proto("kb_current_ctx", c_void_p)
_proto("kb_cancelled", c_int)
_proto("kb_yield", c_int)
_proto("kb_barrier", c_int)
_proto("kb_spawn_error_count", c_size_t, c_void_p)
_proto("kb_spawn_error_get", POINTER(RankError), c_void_p, c_size_t)
_proto("kb_spawn_error_message", c_char_p, c_void_p)
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


# ---- the optional C accelerator (_accel.c) ----------------------------------------
ACCEL_ENTRY_POINTS = ("kb_yield", "kb_barrier", "kb_wait", "kb_is_completed", "kb_rank", "kb_collective_submit")


def _accel_in_build_tree() -> str | None:
    """The accelerator built beside $KBTHREADS_LIBRARY in a build tree
    (build/src/libkbthreads.so.0 -> build/bindings/python/kbthreads/), or None."""
    library = os.environ.get("KBTHREADS_LIBRARY")
    if not library:
        return None
    import importlib.machinery

    folder = os.path.join(os.path.dirname(os.path.abspath(library)), "..", "bindings", "python", "kbthreads")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = os.path.normpath(os.path.join(folder, "_accel" + suffix))
        if os.path.exists(candidate):
            return candidate
    return None


def _load_accel() -> Any:
    """kbthreads._accel bound to the library loaded above, or None.

    Where it comes from, first match wins: $KBTHREADS_ACCEL (a path to the
    built extension; an error if it cannot be loaded), the _accel module
    installed in this package, or the one built in the same build tree as
    the library $KBTHREADS_LIBRARY names (<build>/bindings/python/kbthreads/).
    None of them, or KBTHREADS_NO_ACCEL=1: the pure-ctypes path."""
    if os.environ.get("KBTHREADS_NO_ACCEL"):
        return None
    path = os.environ.get("KBTHREADS_ACCEL") or None
    if path is None:
        try:
            from . import _accel as mod  # type: ignore[attr-defined, no-redef]
        except ImportError:
            path = _accel_in_build_tree()
            if path is None:
                return None
    if path:
        import importlib.util

        spec = importlib.util.spec_from_file_location("kbthreads._accel", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"kbthreads: the C accelerator {path} is not a Python extension module")
        try:
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except ImportError as e:
            raise ImportError(f"kbthreads: cannot load the C accelerator {path}: {e}") from e
    addresses = {name: ctypes.cast(getattr(lib, name), c_void_p).value for name in ACCEL_ENTRY_POINTS}
    mod.bind(addresses, KbError)
    return mod


accel = _load_accel()
