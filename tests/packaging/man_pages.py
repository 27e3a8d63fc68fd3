# SPDX-License-Identifier: MIT
"""The man pages a fresh install puts in <prefix>/share/man/man3.

usage: man_pages.py CHECK PREFIX [ARG]
  named-for-the-api PREFIX        every page is kb_*, KB_*, kb::* or a header's page
  cover-the-headers PREFIX INCLUDE_DIR
                                  every public function and type of kbthreads.h, and
                                  every public class and function of kbthreads.hpp,
                                  has a page, titled with that name
  shadow-no-system-page PREFIX [SYSTEM_MAN_DIR]
                                  no page takes a name that a page of another package
                                  has (any section; /usr/share/man by default)
  render-without-warnings PREFIX  groff formats every page without a warning,
                                  and every link (".so") leads to an installed page

The public names are read from the headers themselves, not from Doxygen's
output, so a name that Doxygen leaves out (undocumented, renamed, written
over by another page) makes cover-the-headers fail. Exit 77 (skipped) when
the install has no man pages because the build found no Doxygen.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

HEADER_PAGES = {"kbthreads.h", "kbthreads.hpp"}
API_PREFIXES = ("kb_", "KB_", "kb::")
SKIP = 77


def installed_pages(prefix: Path) -> set[str]:
    """The installed section 3 page names (kb_spawn for kb_spawn.3)."""
    man3 = prefix / "share" / "man" / "man3"
    if not man3.is_dir():
        print(f"skipped: no {man3} (the build found no Doxygen: Debian package doxygen)")
        raise SystemExit(SKIP)
    names = set()
    for page in man3.iterdir():
        if not page.name.endswith(".3"):
            raise SystemExit(f"FAIL: {page.name} in man3 is not a section 3 page")
        names.add(page.name[: -len(".3")])
    if not names:
        raise SystemExit(f"FAIL: {man3} is empty")
    return names


def without_comments(source: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", " ", source, flags=re.S))


def c_public_names(header: Path) -> set[str]:
    """Functions (KB_API) and types (typedefs, struct and enum tags) of kbthreads.h."""
    text = without_comments(header.read_text(encoding="utf-8"))
    names = set(re.findall(r"\bKB_API\b[^;(]*?\b(kb_\w+)\s*\(", text))
    names |= set(re.findall(r"\btypedef\s+(?:struct|enum|union)\s+(kb_\w+)", text))
    names |= set(re.findall(r"\btypedef\b[^;{}()]*?\b(kb_\w+)\s*;", text))
    names |= set(re.findall(r"\btypedef\b[^;]*?\(\s*\*\s*(kb_\w+)\s*\)", text))
    names |= set(re.findall(r"\}\s*(kb_\w+)\s*;", text))
    return names


def cxx_public_names(header: Path) -> set[str]:
    """Classes and free functions of namespace kb outside kb::detail, qualified."""
    names = set()
    in_detail = False
    for line in header.read_text(encoding="utf-8").splitlines():
        if re.match(r"namespace detail\s*\{", line):
            in_detail = True
        elif re.match(r"\}\s*//\s*namespace detail\b", line):
            in_detail = False
        elif not in_detail:
            cls = re.match(r"(?:class|struct)\s+(\w+)\b(?!\s*;)", line)
            # inline functions; engine::~engine() and the like are members
            fn = re.match(r"inline\s+([^(=]*?)\b(\w+)\s*\(", line)
            if cls:
                names.add("kb::" + cls.group(1))
            elif fn and not fn.group(1).endswith(("::", "~")):
                names.add("kb::" + fn.group(2))
    return names


def named_for_the_api(prefix: Path) -> list[str]:
    return sorted(
        f"{name}.3 is named for no API name (kb_*, KB_*, kb::*, a header)"
        for name in installed_pages(prefix)
        if name not in HEADER_PAGES and not name.startswith(API_PREFIXES)
    )


def cover_the_headers(prefix: Path, include: Path) -> list[str]:
    pages = installed_pages(prefix)
    wanted = c_public_names(include / "kbthreads.h") | cxx_public_names(include / "kbthreads.hpp")
    # Guards against a header parse that finds nothing and so passes.
    for known in ("kb_spawn", "kb_ctx", "kb_spawn_opts", "kb_rank_fn", "kb::context", "kb::yield"):
        if known not in wanted:
            return [f"the test's header parse missed {known}: fix tests/packaging/man_pages.py"]
    failures = [f"no page for {name} ({name}.3)" for name in wanted - pages]
    # A page of its own must be about its name: Doxygen names kb::engine's
    # page kb_engine.3, which would take the C struct kb_engine's place.
    man3 = prefix / "share" / "man" / "man3"
    for name in wanted & pages:
        first = (man3 / f"{name}.3").read_text(encoding="utf-8").split("\n", 1)[0]
        title = first.split('"')[1] if first.startswith('.TH "') else name
        if title != name:
            failures.append(f"{name}.3 is the page of {title}, not of {name}")
    return sorted(failures)


def system_page_names(system: Path) -> set[str]:
    """Page names (no section, no compression suffix) under every man* folder."""
    names = set()
    for folder in system.glob("man*"):
        for page in folder.iterdir():
            match = re.match(r"(.+)\.\d\w*(?:\.(?:gz|bz2|xz|zst|Z))?$", page.name)
            if match:
                names.add(match.group(1))
    return names


def shadow_no_system_page(prefix: Path, system: Path) -> list[str]:
    pages = installed_pages(prefix)
    theirs = system_page_names(system)
    if not theirs:
        print(f"skipped: {system} holds no man pages to compare with")
        raise SystemExit(SKIP)
    print(f"{len(pages)} installed pages against {len(theirs)} names in {system}")
    return sorted(f"{name}.3 shadows a page of that name in {system}" for name in pages & theirs)


def render_without_warnings(prefix: Path) -> list[str]:
    pages = installed_pages(prefix)
    groff = shutil.which("groff")
    if groff is None:
        print("skipped: no groff to format the pages with (Debian package groff-base)")
        raise SystemExit(SKIP)
    failures = []
    man = prefix / "share" / "man"
    for name in sorted(pages):
        text = (man / "man3" / f"{name}.3").read_text(encoding="utf-8")
        if text.startswith(".so "):
            # A link: its page is formatted on its own; it must exist.
            target = text.split()[1]
            if not (man / target).is_file():
                failures.append(f"{name}.3 leads to {target}, which is not installed")
            continue
        run = subprocess.run(
            [groff, "-man", "-z", "-ww", "-Tutf8", f"man3/{name}.3"],
            cwd=man,
            capture_output=True,
            text=True,
        )
        failures += [f"{name}.3: {line}" for line in run.stderr.splitlines()]
        if run.returncode != 0 and not run.stderr:
            failures.append(f"{name}.3: groff exited with {run.returncode}")
    return failures


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    check, prefix = argv[1], Path(argv[2])
    if check == "named-for-the-api":
        failures = named_for_the_api(prefix)
    elif check == "cover-the-headers" and len(argv) == 4:
        failures = cover_the_headers(prefix, Path(argv[3]))
    elif check == "shadow-no-system-page":
        failures = shadow_no_system_page(prefix, Path(argv[3] if len(argv) > 3 else "/usr/share/man"))
    elif check == "render-without-warnings":
        failures = render_without_warnings(prefix)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {check}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
