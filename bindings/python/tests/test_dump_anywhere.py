# SPDX-License-Identifier: MIT
"""kbthreads.dump() works wherever kbthreads imports: from the source tree
(PYTHONPATH=bindings/python, as the examples say: the tools package is
found in tools/), and from a copy of the package alone (no kbthreads_tools
anywhere: the library's own table). Each case runs in a fresh interpreter
started with -S, so no installed kbthreads_tools can stand in."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import kbthreads
from kbthreads import _loader

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PACKAGE = os.path.dirname(os.path.abspath(kbthreads.__file__))
IN_SOURCE_TREE = PACKAGE == os.path.join(ROOT, "bindings", "python", "kbthreads") and \
    os.path.isdir(os.path.join(ROOT, "tools", "kbthreads_tools"))

PROGRAM = textwrap.dedent(r'''
    import sys
    import kbthreads

    def rank_main(r):
        if r == 1:
            kbthreads.dump(file=sys.stdout)  # dump-here
        else:
            kbthreads.yield_()

    try:
        import kbthreads_tools  # noqa: F401
        print("kbthreads_tools importable before dump()")
    except ImportError:
        pass
    kbthreads.spawn(rank_main, nprocs=2)
''')


def _run(tmp_path, pythonpath):
    prog = tmp_path / "dumps.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-S", str(prog)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "kbthreads_tools importable before dump()" not in p.stdout, "the test needs it not importable"
    return p.stdout, PROGRAM.splitlines().index(next(x for x in PROGRAM.splitlines() if "# dump-here" in x)) + 1


@pytest.mark.skipif(not IN_SOURCE_TREE, reason="runs the package of the source tree (this run tests an installed one)")
# (as test_debugging.py's needs_thread_ids: the default build runs it)
@pytest.mark.skipif(not _loader.accel.features() & _loader.accel.KB_FEATURE_THREAD_IDS,
                    reason="a KB_PORTABLE library records no kernel thread ids: the dump has no rank thread "
                           "to show a stack under")
def test_dump_from_the_source_tree_finds_the_tools_beside_it(tmp_path):
    out, line = _run(tmp_path, os.path.dirname(PACKAGE))
    assert "baton: rank 1" in out, out  # kbthreads-dump's table
    assert f'dumps.py", line {line}, in rank_main' in out, out


def test_dump_from_a_copy_of_the_package_alone_writes_the_librarys_table(tmp_path):
    copy = tmp_path / "alone"
    shutil.copytree(PACKAGE, copy / "kbthreads", ignore=shutil.ignore_patterns("__pycache__"))
    out, line = _run(tmp_path, str(copy))
    assert "the kbthreads_tools package is not found" in out, out
    assert "kbthreads: a spawn of 2 ranks; rank 1 holds the baton" in out, out
    assert "rank 0 (kb-rank-0" in out and "suspended in kb_yield" in out, out
    assert f'dumps.py", line {line}, in rank_main' in out, out
