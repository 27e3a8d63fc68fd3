# SPDX-License-Identifier: MIT
"""The gdb side: DIR/replay.gdb, which replays the shrunk schedule and stops
at its first turn out of rank order, and the gdb command that runs it."""

from __future__ import annotations

import os
import shutil

from ..locate import IMPORT_DIR, gdb_extension_paths
from .schedule_file import SCHEDULE_ENV, Section


def first_turn_off_order(recorded: list[Section]) -> tuple[int, int, int, int, int] | None:
    """(spawn, round, rank, turn, position), all from 1 but position, of the
    first turn of the shrunk replay that is not round-robin's: in the first
    round out of rank order, the first place where its order and rank order
    differ. Turns count from 1 over the spawn, one per rank per round."""
    for si, s in enumerate(recorded):
        turn = 0
        for ri, r in enumerate(s.rounds):
            for pos, (got, want) in enumerate(zip(r, sorted(r))):
                if got != want:
                    return si + 1, ri + 1, got, turn + pos + 1, pos
            turn += len(r)
    return None


# Python run by gdb (between "python" and "end" in replay.gdb). The
# library's embedded kb commands are read with this package's ELF reader
# (kbthreads_tools.elf), imported from KB_TOOLS, the folder that holds the
# package, rather than with a copy of it here.
GDB_STOP = r'''
import os, sys, tempfile
import gdb

KB_SPAWN, KB_ROUND, KB_RANK, KB_TURN = %(spawn)d, %(round)d, %(rank)d, %(turn)d
KB_SCRIPTS = %(scripts)r
KB_TOOLS = %(tools)r
kb_spawns, kb_turns = [0], [0]


def kb_embedded_script(path):
    """The gdb script the library carries in its .debug_gdb_scripts section."""
    if KB_TOOLS not in sys.path:
        sys.path.insert(0, KB_TOOLS)
    try:
        from kbthreads_tools import elf
    except ImportError:
        return None
    return elf.embedded_gdb_script(path)


def kb_load_commands():
    """`kb ranks` and friends: auto-loaded with the library when gdb's
    safe-path allows it; else from the library's embedded copy or a file."""
    try:
        gdb.execute("help kb", to_string=True)
        return True
    except gdb.error:
        pass
    for objfile in gdb.objfiles():
        if os.path.basename(objfile.filename).startswith("libkbthreads"):
            try:
                text = kb_embedded_script(objfile.filename)
            except (OSError, ValueError):
                text = None
            if text:
                with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
                    f.write(text)
                gdb.execute("source " + f.name)
                os.unlink(f.name)
                return True
    for path in KB_SCRIPTS:
        if os.path.exists(path):
            gdb.execute("source " + path)
            return True
    print("kbthreads-explore: the kb commands are not loaded: source gdb/kbthreads_gdb.py")
    return False


class KbSpawnCount(gdb.Breakpoint):
    """Counts the process's replayed spawns (kb__replay_open: one a spawn)."""

    def stop(self):
        kb_spawns[0] += 1
        kb_turns[0] = 0
        return False


class KbFirstTurnOffOrder(gdb.Breakpoint):
    """The start of turn KB_TURN of spawn KB_SPAWN: rank KB_RANK's turn in
    round KB_ROUND. kb__turn_begin runs once at the start of every turn, so
    counting its hits finds the turn without debug info; with debug info
    the rank and round are checked as well."""

    def stop(self):
        if kb_spawns[0] != KB_SPAWN:
            return False
        kb_turns[0] += 1
        try:
            here = (int(gdb.parse_and_eval("rk->index")), int(gdb.parse_and_eval("rk->run->counters.rounds")))
            if here != (KB_RANK, KB_ROUND):
                return False
        except gdb.error:
            if kb_turns[0] != KB_TURN:
                return False
        kb_load_commands()
        print("kbthreads-explore: stopped at the start of turn %%d (spawn %%d, round %%d: rank %%d), the first "
              "that differs from round-robin; `kb ranks` lists the ranks" %% (KB_TURN, KB_SPAWN, KB_ROUND, KB_RANK))
        self.enabled = False
        return True


KbSpawnCount("kb__replay_open")
KbFirstTurnOffOrder("kb__turn_begin")
'''


def write_gdb_script(path: str, shrunk: str, recorded: list[Section]) -> bool:
    """DIR/replay.gdb: replay the shrunk schedule and stop at its first turn
    out of rank order. False when no turn differs (nothing to stop at)."""
    where = first_turn_off_order(recorded)
    if where is None:
        return False
    spawn, rnd, rank, turn, _ = where
    with open(path, "w", encoding="utf-8") as f:
        f.write("# kbthreads-explore: replay the shrunk schedule, stopped at its first turn out of rank order.\n")
        f.write("set pagination off\nset confirm off\nset breakpoint pending on\nset print thread-events off\n")
        for name in SCHEDULE_ENV:
            f.write(f"unset environment {name}\n")
        f.write(f"set environment KB_REPLAY {shrunk}\n")
        f.write("python\n")
        f.write(
            GDB_STOP
            % {
                "spawn": spawn,
                "round": rnd,
                "rank": rank,
                "turn": turn,
                "scripts": gdb_extension_paths(),
                "tools": IMPORT_DIR,
            }
        )
        f.write("end\nrun\n")
    return True


def is_script(path: str) -> bool:
    """A file that starts with #! (a pyenv shim, a Python file): gdb cannot run it."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def gdb_command(script: str, command: list[str]) -> list[str]:
    """gdb on the command, which must name a program, not a script: a
    command found on PATH is given by its full path."""
    exe = shutil.which(command[0]) if os.sep not in command[0] else command[0]
    return ["gdb", "-q", "-x", script, "--args", exe or command[0]] + command[1:]
