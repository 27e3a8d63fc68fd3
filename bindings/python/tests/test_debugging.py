# SPDX-License-Identifier: MIT
"""Debugging in Python: every rank's Python line in the stall report, the
crash report, kbthreads-dump and kbthreads.dump(). Each program is written
by the test, so every check reads names and line numbers it defines.

The programs that stall or crash run in a subprocess of the interpreter
under test, with the package and the library of this source tree."""
import io
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

import kbthreads
from cbuild import build_c_library
from kbthreads import _loader

# A KB_PORTABLE library records no kernel thread id (docs/debugging.md,
# "Thread names"): its dump table has no LWP or thread name to put a
# rank's Python stack under. The default build runs these tests.
needs_thread_ids = pytest.mark.skipif(
    not _loader.accel.features() & _loader.accel.KB_FEATURE_THREAD_IDS,
    reason="a KB_PORTABLE library records no kernel thread ids: the dump has no rank thread to show a stack under")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
# kbthreads-dump: the source tree's launcher, or the installed package's (the
# suite also runs against a pip-installed package, without the source tree)
_LAUNCHER = os.path.join(ROOT, "tools", "kbthreads-dump")
DUMP = [sys.executable, _LAUNCHER] if os.path.exists(_LAUNCHER) else \
    [sys.executable, "-c", "import sys; from kbthreads_tools.dump import main; sys.exit(main())"]

C_HELPERS = r"""
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <time.h>
/* Busy for ms milliseconds: called through ctypes.PyDLL it holds the GIL. */
void spin_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < ms);
}
void crash_here(void)
{
    *(volatile int *volatile)0 = 1;
}
"""


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    """A shared library with spin_ms and crash_here."""
    return build_c_library(tmp_path_factory.mktemp("helpers"), "helpers", C_HELPERS)


def line_of(source: str, marker: str) -> int:
    """The 1-based line of source holding marker."""
    for n, line in enumerate(source.splitlines(), 1):
        if marker in line:
            return n
    raise AssertionError(f"{marker!r} is not in the program")


def env_for_child(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "bindings", "python"), os.path.join(ROOT, "tools")]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("PYTHONFAULTHANDLER", None)
    env.update(extra)
    return env


def run_program(tmp_path, source: str, *args, **env) -> subprocess.CompletedProcess:
    prog = tmp_path / "sim.py"
    prog.write_text(source)
    return subprocess.run([sys.executable, str(prog), *args], env=env_for_child(**env), capture_output=True,
                          text=True, timeout=120)


def python_stack(report: str, header: str) -> list[str]:
    """The frame lines of the Python stack under the first line starting with header."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    assert lines[start + 1] == "  Python stack (most recent call last):", report
    frames = []
    for line in lines[start + 2:]:
        if not line.startswith("    File "):
            break
        frames.append(line.strip())
    return frames


STALL_SLEEP = textwrap.dedent("""\
    import time
    import kbthreads

    def load_checkpoint():
        time.sleep(0.6)  # the stall

    def rank_main(rank):
        if rank == 1:
            load_checkpoint()  # the call
        kbthreads.yield_()

    kbthreads.spawn(rank_main, nprocs=3)
    print("done")
    """)


def test_the_stall_report_shows_the_python_line_of_a_rank_sleeping_with_the_baton(tmp_path):
    p = run_program(tmp_path, STALL_SLEEP, KB_STALL_MS="200")
    assert p.returncode == 0 and p.stdout == "done\n", p.stderr
    frames = python_stack(p.stderr, "kbthreads: stall: rank 1 (kb-rank-1) has held the baton for")
    prog = str(tmp_path / "sim.py")
    assert frames[-2:] == [
        f'File "{prog}", line {line_of(STALL_SLEEP, "# the call")}, in rank_main',
        f'File "{prog}", line {line_of(STALL_SLEEP, "# the stall")}, in load_checkpoint',
    ], p.stderr
    assert "  C frames:" in p.stderr


STALL_C_LOOP = textwrap.dedent("""\
    import ctypes, sys
    import kbthreads

    lib = ctypes.PyDLL(sys.argv[1])  # PyDLL: the call keeps the GIL

    def crunch_numbers():
        lib.spin_ms(600)  # the stall

    def rank_main(rank):
        if rank == 1:
            crunch_numbers()  # the call
        kbthreads.yield_()

    kbthreads.spawn(rank_main, nprocs=3)
    print("done")
    """)


def test_the_stall_report_shows_the_python_line_of_a_rank_in_a_c_loop_holding_the_gil(tmp_path, helpers):
    p = run_program(tmp_path, STALL_C_LOOP, helpers, KB_STALL_MS="200")
    assert p.returncode == 0 and p.stdout == "done\n", p.stderr
    frames = python_stack(p.stderr, "kbthreads: stall: rank 1 (kb-rank-1) has held the baton for")
    prog = str(tmp_path / "sim.py")
    assert frames[-2:] == [
        f'File "{prog}", line {line_of(STALL_C_LOOP, "# the call")}, in rank_main',
        f'File "{prog}", line {line_of(STALL_C_LOOP, "# the stall")}, in crunch_numbers',
    ], p.stderr


CRASH = textwrap.dedent("""\
    import ctypes, sys
    import kbthreads

    lib = ctypes.CDLL(sys.argv[1])

    def write_checkpoint():
        lib.crash_here()  # the crash

    def rank_main(rank):
        kbthreads.yield_()
        if rank == 2:
            write_checkpoint()  # the call

    kbthreads.spawn(rank_main, nprocs=3)
    print("not reached")
    """)


def test_the_crash_report_shows_the_python_line_of_a_rank_crashing_in_c_called_through_ctypes(tmp_path, helpers):
    p = run_program(tmp_path, CRASH, helpers, KB_CRASH_REPORT="1")
    assert p.returncode == -signal.SIGSEGV, (p.returncode, p.stderr)
    assert "not reached" not in p.stdout
    frames = python_stack(p.stderr, "kbthreads: rank 2 (kb-rank-2) crashed: SIGSEGV")
    prog = str(tmp_path / "sim.py")
    assert frames[-2:] == [
        f'File "{prog}", line {line_of(CRASH, "# the call")}, in rank_main',
        f'File "{prog}", line {line_of(CRASH, "# the crash")}, in write_checkpoint',
    ], p.stderr


def test_without_the_frames_writer_the_reports_show_c_frames_only(tmp_path):
    p = run_program(tmp_path, STALL_SLEEP, KB_STALL_MS="200", KBTHREADS_PYTHON_FRAMES="0")
    assert p.returncode == 0, p.stderr
    assert "kbthreads: stall: rank 1 (kb-rank-1)" in p.stderr
    assert "Python stack" not in p.stderr and "C frames:" not in p.stderr


# Eight ranks, each suspended in ctx.wait at a line of its own, while the
# engine's wait (on the driver, in the drain) blocks until the test says go.
EIGHT = "import sys\nimport kbthreads\n\n"
for _r in range(8):
    EIGHT += f"def wait_at_{_r}(ctx):\n" + "    x = 1\n" * _r + f"    ctx.wait(('h', {_r}))  # rank {_r} waits\n\n"
EIGHT += textwrap.dedent("""\
    class Engine:
        def __init__(self):
            self.first = True

        def wait(self, h):
            if self.first:
                self.first = False
                print("ready", flush=True)
                sys.stdin.readline()

    ctx = kbthreads.Context(Engine())
    WAITS = [wait_at_0, wait_at_1, wait_at_2, wait_at_3, wait_at_4, wait_at_5, wait_at_6, wait_at_7]

    def rank_main(rank):
        WAITS[rank](ctx)

    ctx.multiprocessing.spawn(rank_main, nprocs=8)
    print("done", flush=True)
    """)


@pytest.fixture
def eight_waiting(tmp_path, request):
    """The EIGHT program, running, every rank suspended in its wait: (process,
    path). A test marked @pytest.mark.child_env(NAME="value") sets those in
    the program's environment."""
    prog = tmp_path / "sim.py"
    prog.write_text(EIGHT)
    marker = request.node.get_closest_marker("child_env")
    env = env_for_child(**(marker.kwargs if marker else {}))
    p = subprocess.Popen([sys.executable, str(prog)], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        yield p, str(prog)
    finally:
        if p.poll() is None:
            try:
                p.stdin.write("go\n")
                p.stdin.flush()
            except BrokenPipeError:
                pass
        out, err = p.communicate(timeout=60)


def rank_blocks(dump_text: str) -> dict[int, list[str]]:
    """rank -> the Python frame lines under its row in a dump."""
    blocks, current = {}, None
    for line in dump_text.splitlines():
        m = re.match(r"^\s+\*?\s*(\d+)\s+\S+\s+kb-rank-\d+", line)
        if m:
            current = int(m.group(1))
            blocks[current] = []
        elif current is not None and line.startswith("        File "):
            blocks[current].append(line.strip())
    return blocks


@needs_thread_ids
def test_kbthreads_dump_shows_each_of_eight_ranks_at_its_own_python_line(eight_waiting):
    p, prog = eight_waiting
    d = subprocess.run([*DUMP, str(p.pid)], capture_output=True, text=True, timeout=60)
    assert d.returncode == 0, d.stderr
    blocks = rank_blocks(d.stdout)
    assert sorted(blocks) == list(range(8)), d.stdout
    for r in range(8):
        assert blocks[r][-1] == f'File "{prog}", line {line_of(EIGHT, f"# rank {r} waits")}, in wait_at_{r}', d.stdout
        assert blocks[r][-2].endswith(", in rank_main"), d.stdout


@needs_thread_ids
def test_kbthreads_dump_python_frames_keeps_the_innermost_n(eight_waiting):
    p, prog = eight_waiting
    d = subprocess.run([*DUMP, "--python-frames", "1", str(p.pid)], capture_output=True, text=True,
                       timeout=60)
    assert d.returncode == 0, d.stderr
    blocks = rank_blocks(d.stdout)
    for r in range(8):
        assert blocks[r] == [f'File "{prog}", line {line_of(EIGHT, f"# rank {r} waits")}, in wait_at_{r}']
    assert d.stdout.count("... (older frames not shown)") == 8


@needs_thread_ids
def test_kbthreads_dump_python_frames_0_prints_the_table_only(eight_waiting):
    p, _ = eight_waiting
    d = subprocess.run([*DUMP, "--python-frames", "0", str(p.pid)], capture_output=True, text=True,
                       timeout=60)
    assert d.returncode == 0, d.stderr
    assert "kb-rank-7" in d.stdout and "Python stack" not in d.stdout


def test_kbthreads_dump_rejects_a_bad_python_frames():
    d = subprocess.run([*DUMP, "--python-frames", "-1", str(os.getpid())], capture_output=True,
                       text=True, timeout=60)
    assert d.returncode == 2 and "--python-frames must be 0 to" in d.stderr


@needs_thread_ids
def test_kbthreads_dump_of_a_stopped_process_says_the_stacks_cannot_be_read(eight_waiting):
    p, _ = eight_waiting
    os.kill(p.pid, signal.SIGSTOP)
    try:
        d = subprocess.run([*DUMP, str(p.pid)], capture_output=True, text=True, timeout=60)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    assert d.returncode == 0, d.stderr
    assert "Python stacks: not read (the process is stopped" in d.stdout
    assert "kb-rank-7" in d.stdout


@needs_thread_ids
@pytest.mark.child_env(KBTHREADS_PYTHON_FRAMES="0")
def test_kbthreads_dump_of_a_process_without_the_frames_writer_says_why_and_prints_the_table(eight_waiting):
    p, _ = eight_waiting
    d = subprocess.run([*DUMP, str(p.pid)], capture_output=True, text=True, timeout=60)
    assert d.returncode == 0, d.stderr
    assert "Python stacks: not read (it has not installed the frames writer" in d.stdout
    assert "kb-rank-7" in d.stdout and "Python stack (" not in d.stdout


TAKEN = textwrap.dedent("""\
    import signal, time
    import kbthreads

    signal.signal(signal.SIGRTMIN + 4, lambda *a: None)  # the program's own use of the signal

    def rank_main(rank):
        if rank == 1:
            time.sleep(0.5)
        kbthreads.yield_()

    kbthreads.spawn(rank_main, nprocs=2)
    print(kbthreads._frames.not_installed)
    """)


def test_a_program_that_took_sigrtmin_4_keeps_it_and_its_reports_show_c_frames(tmp_path):
    p = run_program(tmp_path, TAKEN, KB_STALL_MS="200")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("signal %d (SIGRTMIN+4) already has a handler" % (signal.SIGRTMIN + 4)), p.stdout
    assert "kbthreads: stall: rank 1 (kb-rank-1)" in p.stderr and "Python stack" not in p.stderr


@needs_thread_ids
def test_dump_from_the_driver_writes_every_ranks_python_line():
    out = io.StringIO()

    class Engine:
        def wait(self, h):
            if h == ("h", 0):
                kbthreads.dump(file=out)

    ctx = kbthreads.Context(Engine())

    def waits_here(r):
        ctx.wait(("h", r))  # dump-from-driver: the wait

    ctx.multiprocessing.spawn(waits_here, nprocs=3)
    ctx.close()
    blocks = rank_blocks(out.getvalue())
    assert sorted(blocks) == [0, 1, 2], out.getvalue()
    me = os.path.abspath(__file__)
    line = line_of(open(me).read(), "# dump-from-driver: the wait")
    for r in range(3):
        assert blocks[r][-1] == f'File "{me}", line {line}, in waits_here', out.getvalue()


@needs_thread_ids
def test_dump_from_a_rank_shows_its_own_line_and_the_suspended_ones():
    out = io.StringIO()
    ctx = kbthreads.Context()

    def rank_main(r):
        if r == 2:
            ctx.dump(file=out)  # dump-from-rank: the call
        else:
            kbthreads.yield_()  # dump-from-rank: suspended

    ctx.multiprocessing.spawn(rank_main, nprocs=3)
    ctx.close()
    text = out.getvalue()
    blocks = rank_blocks(text)
    me = os.path.abspath(__file__)
    src = open(me).read()
    assert blocks[2][-1] == f'File "{me}", line {line_of(src, "# dump-from-rank: the call")}, in rank_main', text
    for r in (0, 1):
        assert blocks[r][-1] == f'File "{me}", line {line_of(src, "# dump-from-rank: suspended")}, in rank_main', text
    assert "baton: rank 2" in text


def test_context_dump_shows_only_its_own_spawn():
    out = io.StringIO()
    other = kbthreads.Context()
    pc = other.multiprocessing.spawn(lambda r: kbthreads.yield_(), nprocs=2, join=False)
    ctx = kbthreads.Context()
    ctx.multiprocessing.spawn(lambda r: ctx.dump(file=out), nprocs=1)
    runs = [line for line in out.getvalue().splitlines() if line.startswith("run 0x")]
    assert len(runs) == 1 and ", 1 ranks," in runs[0], out.getvalue()
    pc.join()
    other.close()
    ctx.close()


def test_dump_rejects_a_bad_python_frames():
    with pytest.raises(ValueError, match="python_frames"):
        kbthreads.dump(file=io.StringIO(), python_frames=-1)
