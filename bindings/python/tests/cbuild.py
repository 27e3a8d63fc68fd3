# SPDX-License-Identifier: MIT
"""A small C library a test writes, built with the system's C compiler."""
import shutil
import subprocess


def build_c_library(folder, name: str, source: str) -> str:
    """Write source to folder/name.c, build folder/libname.so, return its path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (build-essential) is needed to build the test's helper library"
    src, lib = folder / f"{name}.c", folder / f"lib{name}.so"
    src.write_text(source)
    subprocess.run([cc, "-std=c11", "-shared", "-fPIC", "-O0", "-o", str(lib), str(src)], check=True)
    return str(lib)
