# SPDX-License-Identifier: MIT
"""kbthreads.dump() and Context.dump(): what kbthreads-dump prints for this
process (the runs, who holds the baton, each rank's state), with every
rank's Python stack under its row, written from inside the process: from
the driver (a timeout handler, a test's failure hook) or from a rank.

The run table is kbthreads-dump's own (kbthreads_tools.dump, reading this
process's memory through /proc/self/mem), so the two cannot drift apart.
The stacks are read here with sys._current_frames(): every other rank
thread is suspended (or, on a foreign thread's call, running without the
GIL this thread holds), so its frames hold still while they are read.

kbthreads_tools is installed beside this package (pip, make install); in
the source tree it is tools/kbthreads_tools, found there when it is not
importable (PYTHONPATH=bindings/python). Without it anywhere (this package
copied alone), dump() writes the library's own table instead
(kb_ctx_dump: each rank's state and Python stack), saying so.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from ._loader import accel as _accel

if TYPE_CHECKING:
    from ._context import Context

_THIS = os.path.abspath(__file__)
_PACKAGE = os.path.dirname(_THIS)
# The source tree's tools/kbthreads_tools, beside bindings/python/kbthreads.
_SOURCE_TOOLS = os.path.normpath(os.path.join(os.path.realpath(_PACKAGE), "..", "..", "..", "tools", "kbthreads_tools"))


def _stack_lines(frame: FrameType, max_frames: int, own: bool) -> list[str]:
    """A frame's stack in the words of the C frames writer (_accel_frames.c):
    innermost last, the innermost max_frames (0: all). own: the calling
    thread's, whose stack goes on into dump() (through Context.dump,
    maybe), which is not the rank's: cut there."""
    summary: list[traceback.FrameSummary] = traceback.extract_stack(frame)
    if own:
        for i, f in enumerate(summary):
            if os.path.abspath(f.filename) == _THIS:
                del summary[i:]
                break
        while summary and os.path.dirname(os.path.abspath(summary[-1].filename)) == _PACKAGE:
            summary.pop()
    if not summary:
        return ["  Python stack: no Python frame"]
    lines = ["  Python stack (most recent call last):"]
    if 0 < max_frames < len(summary):
        lines.append("    ... (older frames not shown)")
        summary = summary[-max_frames:]
    lines += ['    File "%s", line %s, in %s' % (f.filename, f.lineno, f.name) for f in summary]
    return lines


def _ask(tids: list[int], max_frames: int) -> dict[int, list[str]]:
    """What rank_frames.ask answers for another process, for this one."""
    ident_of = {t.native_id: t.ident for t in threading.enumerate() if t.native_id is not None and t.ident is not None}
    frames = sys._current_frames()
    me = threading.get_native_id()
    out: dict[int, list[str]] = {}
    for tid in tids:
        frame = frames.get(ident_of.get(tid, -1))
        out[tid] = (
            _stack_lines(frame, max_frames, tid == me)
            if frame is not None
            else ["  Python stack: none (this thread runs no Python code)"]
        )
    return out


def dump(file: TextIO | None = None, *, python_frames: int = 20, _ctx: Context | None = None) -> None:
    """Write every live spawn of this process (or of _ctx only), as
    kbthreads-dump PID does, with each live rank's Python stack (its
    innermost python_frames frames; 0: none) under its row, to file
    (default sys.stderr)."""
    if isinstance(python_frames, bool) or not isinstance(python_frames, int) or python_frames < 0:
        raise ValueError(f"dump: python_frames must be an int >= 0, not {python_frames!r}")
    out = sys.stderr if file is None else file
    tool, why = _tools_dump()
    if tool is None:
        out.write(_library_dump(why, _ctx))
        out.flush()
        return
    ctx_address = None if _ctx is None else _ctx._core.address()
    lines = tool(os.getpid(), 20, python_frames, ask=_ask, ctx_address=ctx_address)
    out.write("\n".join(lines) + "\n")
    out.flush()


def _tools_dump() -> tuple[Callable[..., list[str]] | None, str | None]:
    """kbthreads_tools.dump.dump: importable, or the source tree's (loaded as
    the package kbthreads_tools); else (None, why)."""
    try:
        from kbthreads_tools import dump as tool

        return tool.dump, None
    except ImportError as e:
        why = str(e)
    init = os.path.join(_SOURCE_TOOLS, "__init__.py")
    if not os.path.exists(init):
        return None, why
    spec = importlib.util.spec_from_file_location("kbthreads_tools", init, submodule_search_locations=[_SOURCE_TOOLS])
    if spec is None or spec.loader is None:  # pragma: no cover
        return None, why
    package = importlib.util.module_from_spec(spec)
    sys.modules["kbthreads_tools"] = package
    try:
        spec.loader.exec_module(package)
        from kbthreads_tools import dump as tool
    except Exception as e:  # pragma: no cover - a broken source tree
        sys.modules.pop("kbthreads_tools", None)
        return None, f"{_SOURCE_TOOLS}: {e}"
    return tool.dump, None


def _library_dump(why: str | None, ctx: Context | None) -> str:
    """The library's own table of every live spawn's ranks (kb_ctx_dump),
    with each rank's Python stack, when kbthreads_tools is nowhere."""
    from ._run import _live_runs

    cores = []
    for run in list(_live_runs):
        core = run.ctx._core
        if (ctx is None or run.ctx is ctx) and not run.done and core not in cores:
            cores.append(core)
    text = [
        f"kbthreads.dump: the kbthreads_tools package is not found ({why}): the library's own table "
        "follows (kbthreads-dump's needs kbthreads_tools)\n"
    ]
    if not cores:
        text.append("no live libkbthreads spawn\n")
    for core in cores:
        fd = os.memfd_create("kbthreads-dump", os.MFD_CLOEXEC)
        try:
            _accel.ctx_dump(core, fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
        # the calling thread's stack goes on into this module: cut there
        text += [
            line
            for line in b"".join(chunks).decode("utf-8", "replace").splitlines(keepends=True)
            if f'"{_THIS}"' not in line
        ]
    return "".join(text)
