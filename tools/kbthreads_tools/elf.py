# SPDX-License-Identifier: MIT
"""The little of ELF the tools read from a file on disk: its section and
program headers, a section's bytes, and the gdb script a library carries in
its .debug_gdb_scripts section.

The one copy of it: kbthreads-dump finds the debug descriptor (the
.kb_debug section) with it, and the gdb script kbthreads-explore writes
imports it to load the embedded kb commands (so gdb's own Python runs this
module too). Standard library only. ELF64 little-endian only (the files libkbthreads is built into);
anything else reads as "not an ELF file" (None).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# The ELF64 header, section header and program header, little-endian.
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
PT_LOAD, ET_DYN = 1, 3
# An entry of .debug_gdb_scripts that holds a script's text (not its file
# name): "gdb.inlined-script" (its first line), a newline, the text.
_INLINED_SCRIPT = b"\x04"


@dataclass(frozen=True)
class Section:
    name: bytes
    addr: int  # where it is loaded, relative to the load bias; 0 when not loaded
    offset: int  # in the file
    size: int


@dataclass(frozen=True)
class ElfFile:
    path: str
    position_independent: bool  # ET_DYN: a shared library or a PIE
    sections: tuple[Section, ...]
    loads: tuple[tuple[int, int], ...]  # (vaddr, file offset) of every PT_LOAD, lowest vaddr first

    def section(self, name: bytes) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def read(self, section: Section) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(section.offset)
            return f.read(section.size)


def _name(names: bytes, at: int) -> bytes:
    end = names.find(b"\0", at)
    return names[at:end] if end >= 0 else names[at:]


def read_elf(path: str) -> ElfFile | None:
    """The headers of the ELF64 little-endian file at path, or None when it
    is not one, cannot be read, or has no section headers."""
    try:
        with open(path, "rb") as f:
            ehdr = f.read(_EHDR.size)
            if len(ehdr) < _EHDR.size or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
                return None
            (_, e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx) = _EHDR.unpack(ehdr)
            if not shoff or shstrndx >= shnum:
                return None
            f.seek(shoff)
            shdrs = [_SHDR.unpack(f.read(shentsize)[: _SHDR.size]) for _ in range(shnum)]
            f.seek(shdrs[shstrndx][4])
            names = f.read(shdrs[shstrndx][5])
            f.seek(phoff)
            phdrs = [_PHDR.unpack(f.read(phentsize)[: _PHDR.size]) for _ in range(phnum)]
    except (OSError, struct.error):
        return None
    sections = tuple(Section(_name(names, sh[0]), sh[3], sh[4], sh[5]) for sh in shdrs)
    loads = tuple(sorted((p[3], p[2]) for p in phdrs if p[0] == PT_LOAD))
    return ElfFile(path, e_type == ET_DYN, sections, loads)


def embedded_gdb_script(path: str) -> str | None:
    """The text of the first inlined script in the file's .debug_gdb_scripts
    section (the kb commands, in libkbthreads), or None."""
    elf = read_elf(path)
    if elf is None:
        return None
    section = elf.section(b".debug_gdb_scripts")
    if section is None:
        return None
    try:
        data = elf.read(section)
    except OSError:
        return None
    for entry in data.split(b"\0"):
        if entry[:1] == _INLINED_SCRIPT and b"\n" in entry:
            return entry[1:].split(b"\n", 1)[1].decode()
    return None
