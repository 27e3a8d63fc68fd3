# SPDX-License-Identifier: MIT
"""Sizes are checked before memory is spent: a spawn larger than the
machine can run fails at once, saying which limit it exceeds, with no Rank
object and no thread made; nprocs beyond the library's int, or a bool, is
refused before anything else."""
import os
import subprocess
import sys
import textwrap

import pytest

import kbthreads


def _pid_max():
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


needs_pid_max = pytest.mark.skipif(_pid_max() is None, reason="no /proc/sys/kernel/pid_max to exceed")


@pytest.mark.parametrize("nprocs", [2**31, 2**63, 10**20])
def test_nprocs_beyond_the_librarys_int_is_a_value_error(nprocs):
    with pytest.raises(ValueError, match=r"nprocs must be at most 2147483647 \(the library's int\)"):
        kbthreads.spawn(lambda r: None, nprocs=nprocs)


@pytest.mark.parametrize("nprocs", [True, False])
def test_a_bool_is_no_nprocs(nprocs):
    with pytest.raises(TypeError, match="nprocs must be an integer, not bool"):
        kbthreads.spawn(lambda r: None, nprocs=nprocs)


@needs_pid_max
def test_more_ranks_than_pid_max_allows_fail_at_once_naming_the_limit():
    ctx = kbthreads.Context()
    ran = []
    with pytest.raises(kbthreads.KbError, match="more ranks than this machine can run now: .* leaves room for") as e:
        ctx.multiprocessing.spawn(ran.append, nprocs=_pid_max() + 1)
    assert e.value.code == kbthreads._loader.accel.KB_EAGAIN
    assert ran == [] and ctx.last_stats is None  # no spawn started
    ctx.multiprocessing.spawn(ran.append, nprocs=2)  # the context works on
    assert ran == [0, 1]
    ctx.close()


@needs_pid_max
def test_huge_spawns_fail_fast_without_a_big_allocation(tmp_path):
    # In a fresh process, whose peak resident memory is this test's alone.
    prog = tmp_path / "huge.py"
    prog.write_text(textwrap.dedent('''
        import resource, sys, time
        import kbthreads
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.monotonic()
        for n in (2**31 - 1, 2**31, 2**63, 10**20):
            try:
                kbthreads.spawn(lambda r: None, nprocs=n)
            except (kbthreads.KbError, ValueError) as e:
                print(n, type(e).__name__, e)
            else:
                print(n, "spawned")
        print("took", time.monotonic() - t0)
        print("grew_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    '''))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(kbthreads.__path__[0]))
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("2147483647 KbError spawn: more ranks than this machine can run now: "
                               "2147483647 ranks need 2147483647 new threads"), p.stdout
    for line, n in zip(lines[1:4], ("2147483648", "9223372036854775808", "100000000000000000000")):
        assert line.startswith(f"{n} ValueError spawn: nprocs must be at most 2147483647"), p.stdout
    assert float(lines[4].split()[1]) < 10, p.stdout  # a spawn of 2**31 - 1 Rank objects took minutes
    assert int(lines[5].split()[1]) < 64 * 1024, p.stdout  # and gigabytes
