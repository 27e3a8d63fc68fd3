# SPDX-License-Identifier: MIT
"""py-spy, the sampling profiler, sees every rank of a kbthreads simulation:
each rank is a thread, so ``py-spy dump --pid PID`` lists a thread named
kb-rank-N per rank at its own Python line, suspended ones (in ``ctx.wait``,
in a barrier, in a yield) and the running one alike. Against the greenlet
reference it sees one thread, and on it only the running greenlet: the
ranks suspended in their greenlets are not in any thread's stack.

The simulation runs in a subprocess of the interpreter under test; py-spy
(requirements-test.txt) attaches to it with ptrace, which the program
allows any process of its user (prctl PR_SET_PTRACER, for Yama's
ptrace_scope 1; root needs nothing)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def py_spy() -> str:
    """py-spy beside this interpreter (a venv's bin/) or on PATH. The test
    venv has it (requirements-test.txt): missing there is a failure."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    found = beside if os.access(beside, os.X_OK) else shutil.which("py-spy")
    if found is None:
        if sys.prefix != sys.base_prefix:
            pytest.fail("py-spy is missing from the test venv: pip install -r requirements-test.txt")
        pytest.skip("py-spy is not installed for this interpreter (the test venv has it: make venv)")
    return found


# Four ranks: after a first round of yields, rank 0 waits for a kernel (the
# engine completes it in the drain after the round), rank 1 enters a
# barrier, rank 2 yields, and rank 3 runs: it holds the baton, spinning
# until the test creates the file named by argv[2]. argv[1] names the
# scheduler: kbthreads, or greenlet (the reference, greenlet_ranks.py).
SIM = textwrap.dedent("""\
    import ctypes, os, sys

    # Yama's ptrace_scope 1 lets a process be traced by its ancestors only:
    # let py-spy, a sibling, attach (PR_SET_PTRACER, PR_SET_PTRACER_ANY).
    ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)

    class Engine:
        def wait(self, h):
            pass

    if sys.argv[1] == "kbthreads":
        import kbthreads
        ctx = kbthreads.Context(Engine())
    else:
        import greenlet_ranks
        ctx = greenlet_ranks.ReferenceContext(Engine())

    def waits_for_a_kernel(r):
        ctx.wait(("kernel", r))  # rank 0 waits

    def meets_the_others():
        ctx.barrier()  # rank 1 is in the barrier

    def hands_on():
        ctx.yield_()  # rank 2 yields

    def computes(flag):
        print("ready", flush=True)
        while not os.access(flag, os.F_OK):  # rank 3 runs
            pass

    def rank_main(r):
        ctx.yield_()
        if r == 0:
            waits_for_a_kernel(r)
        elif r == 1:
            meets_the_others()
        elif r == 2:
            hands_on()
        else:
            computes(sys.argv[2])

    ctx.spawn(rank_main, nprocs=4)  # the driver
    print("done", flush=True)
    """)

# rank -> (its innermost function, the marker on its line)
WHERE = {0: ("waits_for_a_kernel", "# rank 0 waits"), 1: ("meets_the_others", "# rank 1 is in the barrier"),
         2: ("hands_on", "# rank 2 yields"), 3: ("computes", "# rank 3 runs")}


def line_of(marker: str) -> int:
    return next(n for n, line in enumerate(SIM.splitlines(), 1) if marker in line)


def dump_of(tmp_path, scheduler: str) -> tuple[list[dict], str]:
    """py-spy dump --json of SIM on that scheduler, while rank 3 runs; the
    threads and the program's path."""
    spy = py_spy()
    prog, flag = tmp_path / "sim.py", tmp_path / "go"
    prog.write_text(SIM)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "bindings", "python"), HERE]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    p = subprocess.Popen([sys.executable, str(prog), scheduler, str(flag)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read() if p.poll() is not None else ""
        # Rank 3 prints "ready" a moment before it reaches its loop: dump
        # until it is there (the other ranks stay where they are).
        deadline = time.monotonic() + 60
        while True:
            d = subprocess.run([spy, "dump", "--json", "--pid", str(p.pid)], capture_output=True, text=True,
                               timeout=120)
            assert d.returncode == 0, f"py-spy dump failed (ptrace permission?): {d.stderr}"
            threads = json.loads(d.stdout)
            running = [f for t in threads for f in t["frames"] if f["name"] == "computes"]
            if running and running[0]["line"] == line_of("# rank 3 runs") or time.monotonic() > deadline:
                break
    finally:
        flag.touch()
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and out == "done\n", err
    return threads, str(prog)


def in_program(thread: dict, prog: str) -> list[tuple[str, int]]:
    """(function, line) of each of the thread's frames in the program, innermost first."""
    return [(f["name"], f["line"]) for f in thread["frames"] if f["filename"] == prog]


def test_py_spy_dump_shows_every_rank_as_a_named_thread_at_its_python_line(tmp_path):
    threads, prog = dump_of(tmp_path, "kbthreads")
    ranks = {t["thread_name"]: t for t in threads if t["thread_name"].startswith("kb-rank-")}
    assert sorted(ranks) == [f"kb-rank-{r}" for r in range(4)], [t["thread_name"] for t in threads]
    for r, (function, marker) in WHERE.items():
        frames = in_program(ranks[f"kb-rank-{r}"], prog)
        assert frames[0] == (function, line_of(marker))
        assert frames[1][0] == "rank_main"


def test_py_spy_dump_shows_the_running_rank_active(tmp_path):
    threads, _ = dump_of(tmp_path, "kbthreads")
    assert next(t for t in threads if t["thread_name"] == "kb-rank-3")["active"]


def test_py_spy_dump_shows_the_driver_in_spawn_on_the_main_thread(tmp_path):
    threads, prog = dump_of(tmp_path, "kbthreads")
    main = next(t for t in threads if t["thread_name"] == "MainThread")
    assert in_program(main, prog) == [("<module>", line_of("# the driver"))]
    assert main["os_thread_id"] not in {t["os_thread_id"] for t in threads if t is not main}


def test_py_spy_dump_of_the_greenlet_reference_shows_the_running_rank_only(tmp_path):
    pytest.importorskip("greenlet")
    threads, prog = dump_of(tmp_path, "greenlet")
    assert len(threads) == 1  # every rank runs on the thread that called spawn
    lines = in_program(threads[0], prog)
    assert lines[0] == ("computes", line_of("# rank 3 runs"))
    for r in range(3):  # the suspended ranks are nowhere
        assert (WHERE[r][0], line_of(WHERE[r][1])) not in lines
