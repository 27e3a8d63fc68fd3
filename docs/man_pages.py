# SPDX-License-Identifier: MIT
"""The man pages `make install` installs, made from Doxygen's man output.

Doxygen writes a page for every documented entity and, with MAN_LINKS, a
link page (".so man3/<page>") for every member, named after the bare member:
abort.3, wait.3, yield.3, seed.3. A prefix such as /usr/local is searched
before /usr/share/man, so such names would shadow other packages' pages
(`man 3 abort`). This script keeps only pages named for the API:

- each header's page: kbthreads.h.3, kbthreads.hpp.3;
- each C struct's page (kb_spawn_opts.3), and a link for every other name
  the C header declares (functions, typedefs, enums and their values,
  macros: kb_spawn.3, KB_EINVAL.3) to the header's page; a typedef named
  like its struct leads to the struct's page;
- each C++ class's page under its qualified name (kb::context.3; Doxygen
  calls it kb_context.3, which would take the C names' place), its members
  documented there; namespace kb's page as kb::.3, with a link for each of
  its members (kb::yield.3).

Struct fields and class members get no page of their own: their struct's
or class's page documents them.

usage: man_pages.py OUT_MAN3 PASS...
Each PASS is one Doxygen pass's output folder (docs/Doxyfile-man.in), with
xml/index.xml and man/man3/. OUT_MAN3 is emptied and filled; the script
fails when two pages would take one name or a page is missing.
"""

from __future__ import annotations

import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HEADERS = ("kbthreads.h", "kbthreads.hpp")
NAMESPACE = "kb"
C_PREFIXES = ("kb_", "KB_")


def page_titles(man3: Path) -> dict[str, Path]:
    """Doxygen's pages (not its link pages) by their .TH title."""
    titles: dict[str, Path] = {}
    for page in sorted(man3.glob("*.3")):
        first = page.read_text(encoding="utf-8").split("\n", 1)[0]
        if first.startswith('.TH "'):
            titles[first.split('"')[1]] = page
    return titles


def text_lines_as_text(page: str) -> str:
    """The page with no text line taken for a troff request.

    Doxygen 1.9 turns a paragraph that opens with a double quote into a line
    that opens with "'", troff's other control character ("'MAJOR.MINOR..."
    is then an unknown request and the line vanishes); "\\&" in front keeps
    it text. Doxygen's own requests all start with ".".
    """
    return "".join("\\&" + line if line.startswith("'") else line for line in page.splitlines(keepends=True))


class Selection:
    """The pages to install: real pages (copied) and links (".so")."""

    def __init__(self) -> None:
        self.pages: dict[str, Path] = {}
        self.links: dict[str, str] = {}

    def add_page(self, name: str, source: Path) -> None:
        self._claim(name)
        self.pages[name] = source

    def add_link(self, name: str, target: str) -> None:
        self._claim(name)
        self.links[name] = target

    def _claim(self, name: str) -> None:
        if name in self.pages or name in self.links:
            raise SystemExit(f"man_pages.py: two pages would be named {name}.3")

    def write(self, out: Path) -> None:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name, source in self.pages.items():
            text = source.read_text(encoding="utf-8")
            (out / f"{name}.3").write_text(text_lines_as_text(text), encoding="utf-8")
        for name, target in self.links.items():
            if target not in self.pages:
                raise SystemExit(f"man_pages.py: {name}.3 would lead to the missing {target}.3")
            (out / f"{name}.3").write_text(f".so man3/{target}.3\n", encoding="utf-8")


def select_pass(folder: Path, selection: Selection) -> None:
    """Adds one Doxygen pass's pages named for the API to selection."""
    titles = page_titles(folder / "man" / "man3")
    index = ET.parse(folder / "xml" / "index.xml").getroot()

    def page(title: str) -> Path:
        if title not in titles:
            raise SystemExit(f"man_pages.py: Doxygen wrote no page titled {title} in {folder}")
        return titles[title]

    compounds = index.findall("compound")
    # Pages first, so that links can tell a struct's typedef from the rest.
    for compound in compounds:
        kind, name = compound.get("kind"), compound.findtext("name", "")
        if kind == "file" and name in HEADERS:
            selection.add_page(name, page(name))
        elif kind in ("struct", "class", "union") and (
            name.startswith(C_PREFIXES) or name.startswith(NAMESPACE + "::")
        ):
            selection.add_page(name, page(name))
        elif kind == "namespace" and name == NAMESPACE:
            selection.add_page(NAMESPACE + "::", page(name))
    for compound in compounds:
        kind, name = compound.get("kind"), compound.findtext("name", "")
        members = {m.findtext("name", "") for m in compound.findall("member")}
        if kind == "file" and name in HEADERS:
            for member in sorted(members):
                if member.startswith(C_PREFIXES) and member not in selection.pages:
                    selection.add_link(member, name)
        elif kind == "namespace" and name == NAMESPACE:
            for member in sorted(members):
                selection.add_link(f"{NAMESPACE}::{member}", NAMESPACE + "::")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: man_pages.py OUT_MAN3 PASS...", file=sys.stderr)
        return 2
    selection = Selection()
    for folder in argv[2:]:
        select_pass(Path(folder), selection)
    selection.write(Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
