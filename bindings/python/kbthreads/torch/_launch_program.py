# SPDX-License-Identifier: MIT
"""The program kbthreads-torchrun's ranks run: found and compiled once,
before any rank starts (a missing file or module, or code that does not
compile, stops the launch there, as one clear message), then run per rank
in a module of its own.

Each rank gets a fresh ``__main__`` module, so the script's globals are its
own, as in a worker process. The module's attributes are those python
gives ``__main__`` in a torchrun worker: ``python -u FILE`` (the default),
``python -u -m NAME`` (-m), or ``runpy.run_path(FILE)`` in the worker
(--run-path). runpy itself is not used in the ranks: it swaps
``sys.modules['__main__']`` and ``sys.argv[0]`` for the whole process
while a script runs and puts them back when it returns, which ranks that
take turns would do out of order."""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import traceback
import types
from dataclasses import dataclass, field
from typing import Any


class ProgramError(Exception):
    """The program cannot be run; ``status`` is the launcher's exit status
    (2: nothing found to run, 1: it does not compile or its package fails
    to import), and the message says why."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Program:
    code: types.CodeType
    title: str  # how the report names it: the script's path, or -m NAME
    argv0: str  # each rank's sys.argv[0]
    path_entry: str | None  # first on sys.path while the ranks run (python's rule), None: sys.path as it is
    attrs: dict[str, Any] = field(default_factory=dict)  # __file__, __spec__, __loader__, ...

    def new_module(self) -> types.ModuleType:
        """A fresh ``__main__`` for one rank."""
        module = types.ModuleType("__main__")
        module.__dict__.update(self.attrs)
        module.__dict__["__builtins__"] = builtins
        return module


def _compile_error(what: str, e: BaseException) -> ProgramError:
    detail = "".join(traceback.format_exception_only(type(e), e)).rstrip("\n")
    return ProgramError(f"{what} does not compile:\n{detail}", 1)


def _script(path: str, run_path: bool) -> Program:
    if not os.path.exists(path):
        raise ProgramError(f"can't open file {path!r}: no such file", 2)
    if os.path.isdir(path):
        raise ProgramError(f"{path} is a folder: give the script to run", 2)
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise ProgramError(f"can't open file {path!r}: {e.strerror}", 2) from None
    # python FILE names the file by its absolute path in __file__ and in
    # tracebacks (since 3.9) and puts its folder, links resolved, first on
    # sys.path; runpy.run_path keeps the path as given and leaves sys.path.
    filename = path if run_path else os.path.abspath(path)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # ValueError: a NUL byte in the source
        raise _compile_error(path, e) from None
    if run_path:
        attrs: dict[str, Any] = {"__file__": filename, "__loader__": None, "__package__": "", "__spec__": None}
        return Program(code, path, path, None, attrs)
    attrs = {
        "__file__": filename,
        "__loader__": importlib.machinery.SourceFileLoader("__main__", filename),
        "__package__": None,
        "__spec__": None,
        "__cached__": None,
    }
    return Program(code, path, path, os.path.dirname(os.path.realpath(path)), attrs)


def _module(name: str) -> Program:
    if not name or name.startswith("."):
        raise ProgramError(f"-m {name!r}: relative module names are not supported", 2)
    try:
        spec = importlib.util.find_spec(name)
    except ImportError as e:  # a parent package that is not there
        raise ProgramError(f"-m {name}: no module named {name!r} ({e})", 2) from None
    except Exception as e:  # a parent package's __init__ failed
        raise ProgramError(f"-m {name}: importing its package raised {type(e).__name__}: {e}", 1) from None
    if spec is None:
        raise ProgramError(f"-m {name}: no module named {name!r}", 2)
    if spec.submodule_search_locations is not None:  # a package: python -m runs its __main__
        if name.endswith(".__main__"):
            raise ProgramError(f"-m {name}: a package's __main__ cannot be a package", 2)
        try:
            return _module(name + ".__main__")
        except ProgramError as e:
            if e.status == 2:
                raise ProgramError(f"-m {name}: a package without a __main__ module: nothing to run", 2) from None
            raise
    get_code = getattr(spec.loader, "get_code", None)
    if get_code is None:
        raise ProgramError(f"-m {name}: its loader gives no code to run", 2)
    try:
        code = get_code(spec.name)
    except SyntaxError as e:
        raise _compile_error(f"-m {name}", e) from None
    except ImportError as e:
        raise ProgramError(f"-m {name}: {e}", 1) from None
    if code is None:
        raise ProgramError(f"-m {name}: no code to run", 2)
    attrs = {
        "__file__": spec.origin if spec.has_location else None,
        "__cached__": spec.cached,
        "__loader__": spec.loader,
        "__package__": spec.parent,
        "__spec__": spec,
    }
    if attrs["__file__"] is None:
        del attrs["__file__"], attrs["__cached__"]
    # python -m: sys.argv[0] is the module's file, the working folder first on sys.path
    return Program(code, f"-m {name}", spec.origin or name, os.getcwd(), attrs)


def load(mode: str, target: str) -> Program:
    """The program of a launch: mode "script", "run-path" or "module"."""
    if mode == "module":
        return _module(target)
    return _script(target, run_path=mode == "run-path")
