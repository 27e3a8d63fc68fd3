# SPDX-License-Identifier: MIT
"""kbthreads-dump PID: what every live libkbthreads spawn of a running process
is doing, read from outside without stopping it (like `py-spy dump`).

For each live run (a kb_spawn in progress, or a kb_start()ed process context
not yet finished) it prints who holds the baton, the pending queue lengths,
and each rank's LWP, thread name and state (running, ready, waiting on
handle H, in barrier, ...), in the words of gdb's `kb ranks`.

It finds the library's debug descriptor (kb_debug_offsets, in the .kb_debug
section of libkbthreads.so or of a program linked with the static library)
through /proc/PID/maps, and reads the process's memory through
/proc/PID/mem, which takes ptrace permission (same user and, with Yama's
ptrace_scope 1, root or CAP_SYS_PTRACE). The layout code and the rank
table are the gdb extension's own (gdb/kbthreads_gdb.py, imported without
gdb; only its names without a leading underscore are used). The process
keeps running: when its runs change while they are read, the dump is read
again (--retries times) and, if they never hold still, it says so instead
of printing a mixture. See docs/debugging.md.

Exit status: 0 printed, 1 error (no such process, no libkbthreads in it,
permission refused, unreadable), 2 usage, 3 the runs kept changing.

tools/kbthreads-dump (and pip's console script) runs main(); the ELF
reading is the package's (elf.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import struct
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import elf, rank_frames
from .locate import gdb_extension_paths

EXIT_ERROR, EXIT_USAGE, EXIT_CHANGING = 1, 2, 3


class DumpError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        Exception.__init__(self, message)
        self.code = code


def load_layout_module() -> ModuleType:
    """gdb/kbthreads_gdb.py, imported without gdb, from where
    locate.gdb_extension_paths says it is."""
    for path in gdb_extension_paths():
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("kbthreads_gdb", path)
            assert spec is not None and spec.loader is not None  # a .py file's
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise DumpError(
        "kbthreads-dump: kbthreads_gdb.py not found beside %s (a broken install?)"
        % os.path.dirname(os.path.abspath(__file__))
    )


def proc_path(pid: int, *parts: str) -> str:
    return os.path.join("/proc", str(pid), *parts)


def permission_error(pid: int, what: str) -> DumpError:
    return DumpError(
        "kbthreads-dump: permission denied reading %s of process %d: run it as the process's "
        "user, or as root when ptrace is restricted (/proc/sys/kernel/yama/ptrace_scope)" % (what, pid)
    )


def read_maps(pid: int) -> list[tuple[int, int, str]]:
    """[(start, file offset, path)] of the file mappings of pid."""
    try:
        with open(proc_path(pid, "maps")) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise DumpError("kbthreads-dump: no process with PID %d" % pid) from None
    except PermissionError:
        raise permission_error(pid, "the memory map") from None
    out = []
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            start = int(fields[0].split("-")[0], 16)
            out.append((start, int(fields[2], 16), fields[5]))
    return out


def descriptor_in_file(path: str) -> tuple[int, tuple[int, int], bool] | None:
    """(address of the .kb_debug section relative to the load bias, lowest
    PT_LOAD (vaddr, file offset), whether it is position-independent), or
    None when the file is not an ELF64 file with a loaded .kb_debug section
    and a PT_LOAD."""
    f = elf.read_elf(path)
    section = f.section(b".kb_debug") if f else None
    if f is None or section is None or not section.addr or not f.loads:
        return None
    return section.addr, f.loads[0], f.position_independent


def find_descriptors(pid: int) -> list[tuple[int, str]]:
    """[(runtime address of kb_debug_offsets, path)] for each mapped file
    that carries a descriptor (the shared library, or the program when it is
    linked with the static library)."""
    maps = read_maps(pid)
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for _, _, path in maps:
        if path in seen:
            continue
        seen.add(path)
        # through /proc/PID/root, so a process in a container is read right
        found = descriptor_in_file(proc_path(pid, "root") + path) or descriptor_in_file(path)
        if found is None:
            continue
        addr, (vaddr, offset), pie = found
        bias = 0
        if pie:
            page = os.sysconf("SC_PAGE_SIZE")
            starts = [s for s, off, p in maps if p == path and off == offset & ~(page - 1)]
            if not starts:
                continue
            bias = min(starts) - (vaddr & ~(page - 1))
        out.append((bias + addr, path))
    return out


class Memory:
    """The process's memory, through /proc/PID/mem."""

    def __init__(self, pid: int, kb: ModuleType) -> None:
        self.pid, self.kb = pid, kb
        try:
            self.fd = os.open(proc_path(pid, "mem"), os.O_RDONLY)
        except FileNotFoundError:
            raise DumpError("kbthreads-dump: process %d exited" % pid) from None
        except PermissionError:
            raise permission_error(pid, "the memory") from None

    def read(self, addr: int, n: int) -> bytes:
        try:
            data = os.pread(self.fd, n, addr)
        except OSError as e:
            if not os.path.exists(proc_path(self.pid)):
                raise DumpError("kbthreads-dump: process %d exited while it was read" % self.pid) from None
            raise self.kb.KbError("kb: cannot read %d bytes at 0x%x: %s" % (n, addr, e.strerror)) from e
        if len(data) != n:
            raise self.kb.KbError("kb: cannot read %d bytes at 0x%x" % (n, addr))
        return data

    def u32(self, addr: int) -> int:
        value: int = struct.unpack("<I", self.read(addr, 4))[0]
        return value


def thread_name(pid: int, tid: int) -> str | None:
    """The thread's name, or None when pid has no such thread."""
    try:
        with open(proc_path(pid, "task", str(tid), "comm")) as f:
            return f.read().strip()
    except OSError:
        return None


def test_sync() -> None:
    """A seam for the tests (tests/debug/dump_test.py): with
    KBTHREADS_DUMP_TEST_SYNC=RFD,WFD, after reading the runs and before
    checking that they held still, write one byte to WFD and wait for one on
    RFD, so a test can change the runs at that exact moment."""
    spec = os.environ.get("KBTHREADS_DUMP_TEST_SYNC")
    if spec:
        rfd, wfd = (int(x) for x in spec.split(","))
        os.write(wfd, b"r")
        os.read(rfd, 1)


def snapshot(
    mem: Memory, kb: ModuleType, head: int, gen_addr: int, reader: Any, retries: int
) -> tuple[list[Any], list[Any]]:
    """The runs of one registry, read until the registry held still while
    they were read: (runs, [runs whose baton moved meanwhile])."""
    tries = 0
    while True:
        gen0 = mem.u32(gen_addr)  # a ck_sequence_t (src/registry.c)
        runs: list[Any] = []
        problem: Exception | None = None
        if gen0 % 2 == 0:
            try:
                runs = reader.runs(head)
            except kb.KbError as e:
                problem = e
        test_sync()
        gen1 = mem.u32(gen_addr)
        if gen0 == gen1 and gen0 % 2 == 0:
            if problem is not None:
                raise DumpError("kbthreads-dump: %s" % str(problem).replace("kb: ", "", 1))
            moved = [r for r in runs if moved_since(mem, kb, reader, r)]
            if not moved or tries >= retries:
                return runs, moved
        if tries >= retries:
            raise DumpError(
                "kbthreads-dump: the live runs of process %d changed while they were read, %d "
                "time%s; try again, or stop the process first (kill -STOP %d; kill -CONT %d after)"
                % (mem.pid, tries + 1, "" if tries == 0 else "s", mem.pid, mem.pid),
                EXIT_CHANGING,
            )
        tries += 1


def moved_since(mem: Memory, kb: ModuleType, reader: Any, r: Any) -> bool:
    """The baton changed hands since the run was read."""
    try:
        now = reader.struct("run", r.addr)
    except kb.KbError:
        return True
    return bool(now.get("holder") != r.run.get("holder") or now.get("handoffs") != r.run.get("handoffs"))


def rank_lines(pid: int, kb: ModuleType, r: Any) -> list[str]:
    """The rank table, in the gdb extension's words (kb_rank_table), without
    its gdb thread column: a rank's thread is found by its LWP in /proc."""

    def find_thread(tid: int, _handle: Any) -> Any:
        name = thread_name(pid, tid) if tid else None
        return None if name is None else kb.KbRankThread(tid, name, None, False)

    table: list[str] = kb.kb_rank_table(r, find_thread, False)
    return table


def baton_text(pid: int, kb: ModuleType, r: Any) -> str:
    if r.holder == kb.KB_DRIVER:
        tid = r.run.get("driver_tid")
        if kb.kb_driver_idle(r):
            return "driver side, idle (no thread is in kb_join; last driver: LWP %d)" % tid
        return "driver (LWP %d)" % tid
    if 0 <= r.holder < r.nprocs:
        return "rank %d (LWP %d)" % (r.holder, r.thread_ids(r.holder)[0])
    return "? (holder %d)" % r.holder


Ask = Callable[[list[int], int], dict[int, list[str]]]  # (tids, max_frames) -> each tid's stack lines


def python_stacks(
    pid: int, kb: ModuleType, runs: list[Any], max_frames: int, ask: Ask | None = None
) -> tuple[dict[tuple[int, int], list[str]], str | None]:
    """({(run address, rank): the lines of its Python stack}, a note or None)
    for every rank of runs whose thread lives, asked of the process
    (rank_frames.ask) or of ask(tids, max_frames) (kbthreads.dump() in the
    process itself); ({}, None) for a process without Python kbthreads."""
    if max_frames <= 0:
        return {}, None
    if ask is None:
        reason = rank_frames.why_not(pid)
        if reason == rank_frames.NO_PYTHON:
            return {}, None
        if reason is not None:
            return {}, "Python stacks: not read (%s)" % reason

        def ask(tids: list[int], n: int) -> dict[int, list[str]]:
            return rank_frames.ask(pid, tids, n)

    who: dict[tuple[int, int], int] = {}
    for r in runs:
        for i in range(r.nprocs):
            tid, _ = r.thread_ids(i)
            ended = kb.kb_rank_state(r, i).startswith(("finished", "failed", "cancelled"))
            if tid and not ended and thread_name(pid, tid) is not None:
                who[(r.addr, i)] = tid
    answers = ask(sorted(set(who.values())), max_frames)
    return {key: answers.get(tid, []) for key, tid in who.items()}, None


def dump(
    pid: int, retries: int, max_frames: int = 20, ask: Ask | None = None, ctx_address: int | None = None
) -> list[str]:
    """The lines kbthreads-dump prints for pid: every live run (of the ctx at
    ctx_address only, when given), each rank's Python stack under its row
    (python_stacks)."""
    kb = load_layout_module()
    descriptors = find_descriptors(pid)
    name = thread_name(pid, pid) or "?"
    if not descriptors:
        raise DumpError(
            "kbthreads-dump: process %d (%s) does not use libkbthreads (no debug descriptor in "
            "its mapped files)" % (pid, name)
        )
    mem = Memory(pid, kb)
    read: list[tuple[str, tuple[list[Any], list[Any]]]] = []
    for addr, path in descriptors:
        try:
            layout, head, gen_addr = kb.kb_parse_descriptor(mem.read, addr)
        except kb.KbError as e:
            raise DumpError("kbthreads-dump: %s: %s" % (path, str(e).replace("kb: ", "", 1))) from e
        runs, moved = snapshot(mem, kb, head, gen_addr, kb.KbReader(mem.read, layout), retries)
        if ctx_address is not None:
            runs = [r for r in runs if r.run.get("ctx") == ctx_address]
        read.append((path, (runs, moved)))
    stacks, note = python_stacks(pid, kb, [r for _, (runs, _) in read for r in runs], max_frames, ask)
    out: list[str] = []
    for path, (runs, moved) in read:
        out.append("process %d (%s): libkbthreads %s" % (pid, name, path))
        if note:
            out.append(note)
        if not runs:
            out.append("no live libkbthreads spawn")
        for r in runs:
            out.append(kb.kb_run_header(r))
            out.append("  baton: %s" % baton_text(pid, kb, r))
            if r in moved:
                out.append("  (the baton moved while this run was read: the states are from a few moments)")
            waits, colls = (r.ctx.sub(q, "queue").get("len") for q in ("waits", "colls"))
            out.append(
                "  pending: %d worker wait%s, %d collective%s"
                % (waits, "" if waits == 1 else "s", colls, "" if colls == 1 else "s")
            )
            if r.nprocs > 0:
                table = rank_lines(pid, kb, r)
                out.append(table[0])
                for i, row in enumerate(table[1:]):
                    out.append(row)
                    out += ["    " + line for line in stacks.get((r.addr, i), [])]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="kbthreads-dump",
        description="Print what every live libkbthreads spawn of a running process is doing, without stopping it.",
    )
    ap.add_argument("pid", help="the process to read")
    ap.add_argument(
        "--retries",
        type=int,
        default=20,
        help="how many times to read again when the runs change meanwhile (default 20)",
    )
    ap.add_argument(
        "--python-frames",
        type=int,
        default=20,
        metavar="N",
        help="in a Python process, the innermost N frames of each rank's Python stack under its "
        "row (default 20, at most %d; 0: none)" % rank_frames.MAX_FRAMES,
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        pid = int(args.pid)
        if pid <= 0:
            raise ValueError
    except ValueError:
        print("kbthreads-dump: %r is not a process ID" % args.pid, file=sys.stderr)
        return EXIT_USAGE
    if args.retries < 0:
        print("kbthreads-dump: --retries must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.python_frames <= rank_frames.MAX_FRAMES:
        print("kbthreads-dump: --python-frames must be 0 to %d" % rank_frames.MAX_FRAMES, file=sys.stderr)
        return EXIT_USAGE
    try:
        lines = dump(pid, args.retries, args.python_frames)
    except DumpError as e:
        print(str(e), file=sys.stderr)
        return e.code
    print("\n".join(lines))
    return 0
