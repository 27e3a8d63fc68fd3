# SPDX-License-Identifier: MIT
"""Ctrl-C always works (kbthreads/_interrupt.py): a real SIGINT sent to a
real process running a spawn.

- The first Ctrl-C raises KeyboardInterrupt in the rank running Python code
  (or in the engine hook running on the driver); the rank fails with it, its
  siblings are cancelled in rank order with their ``finally`` blocks, and
  ``spawn`` raises it in the caller.
- A rank blocked where Python cannot interrupt it (``time.sleep``, a C call
  holding the GIL) does not stop: a second Ctrl-C, or the first one once the
  grace period has passed, writes every rank's state and Python stack and
  ends the process by SIGINT.

Each program is written by the test; it says "ready" on stdout once its
rank is where the test wants it, and the test sends SIGINT only then. The
only timing the tests assert is a bound that tells "ended promptly" from
"waited for the 30 s sleep" on any machine.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import kbthreads

# Far less than the 30 s a stuck rank sleeps, far more than any machine
# takes to start Python, deliver the interrupt and write the stacks.
PROMPT_S = 20

PROGRAM = r'''
import ctypes, os, signal, sys, time
import kbthreads

# Python's own Ctrl-C handler, whatever was inherited: a background job
# starts with SIGINT ignored, and then Ctrl-C is the program's to ignore.
signal.signal(signal.SIGINT, signal.default_int_handler)
MODE = sys.argv[1]
finally_order = []


def ready():
    print("ready", flush=True)


def rank_main(r):
    try:
        if MODE == "busy" and r == 1:
            ready()
            while True:  # a busy Python loop
                pass
        if MODE == "sleep" and r == 1:
            ready()
            time.sleep(30)  # stuck-here: time.sleep
        if MODE == "c_call" and r == 1:
            ready()
            ctypes.PyDLL(None).sleep(30)  # stuck-here: a C call holding the GIL
        if MODE == "yields":
            for i in range(10**9):
                if r == 0 and i == 100:
                    ready()
                kbthreads.yield_()  # between yields
        kbthreads.yield_()
    finally:
        finally_order.append(r)


class BusyEngine:
    def wait(self, h):
        ready()
        while True:  # the engine's hook runs on the driver, in Python
            pass


if MODE == "engine":
    ctx = kbthreads.Context(BusyEngine())
    spawn = ctx.multiprocessing.spawn

    def rank_main(r):
        try:
            ctx.wait(("h", r))  # the drain calls the engine
        finally:
            finally_order.append(r)
else:
    spawn = kbthreads.spawn
try:
    spawn(rank_main, nprocs=3)
except KeyboardInterrupt:
    print("KeyboardInterrupt; finally blocks:", finally_order, flush=True)
    sys.exit(3)
print("spawn returned", flush=True)
'''


def _start(tmp_path, mode, **env):
    prog = tmp_path / "ctrl_c.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    e = dict(os.environ, PYTHONPATH=os.path.dirname(kbthreads.__path__[0]), **env)
    p = subprocess.Popen([sys.executable, str(prog), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    line = p.stdout.readline()  # blocks until the rank is there (or the program died)
    if line != "ready\n":
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"the program did not get ready: {line + out!r} {err}")
    time.sleep(0.2)  # into the loop, the sleep or the call
    return p


def _wait_for_line(stream, text):
    """Read stream until a line holding text (True) or its end (False)."""
    for line in stream:
        if text in line:
            return True
    return False


def _finish(p):
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=PROMPT_S + 15)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"still running {PROMPT_S + 15} s after Ctrl-C: {out} {err}")
    return out, err, time.monotonic() - t0


def _finally_order(out):
    line = next(x for x in out.splitlines() if x.startswith("KeyboardInterrupt"))
    return eval(line.split(":", 1)[1])


def test_ctrl_c_in_a_busy_python_loop_raises_keyboard_interrupt_in_the_caller(tmp_path):
    p = _start(tmp_path, "busy")
    p.send_signal(signal.SIGINT)
    out, err, took = _finish(p)
    assert p.returncode == 3, out + err
    # rank 1's own finally, then rank 0 (cancelled); rank 2 never started
    assert _finally_order(out) == [1, 0], out
    assert took < PROMPT_S


def test_ctrl_c_between_yields_stops_the_running_rank_and_cancels_the_rest_in_rank_order(tmp_path):
    p = _start(tmp_path, "yields")
    p.send_signal(signal.SIGINT)
    out, err, took = _finish(p)
    assert p.returncode == 3, out + err
    order = _finally_order(out)
    assert sorted(order) == [0, 1, 2] and order[1:] == sorted(order[1:]), out
    assert took < PROMPT_S


def test_ctrl_c_in_an_engine_hook_raises_keyboard_interrupt_in_the_caller(tmp_path):
    p = _start(tmp_path, "engine")
    p.send_signal(signal.SIGINT)
    out, err, took = _finish(p)
    assert p.returncode == 3, out + err
    assert _finally_order(out) == [0, 1, 2], out  # every rank waited: all cancelled, in rank order
    assert took < PROMPT_S


def _assert_ended_with_stacks(p, err, stuck):
    assert p.returncode == -signal.SIGINT, err  # as an uncaught Ctrl-C ends Python: a shell's 130
    assert "rank 1 (kb-rank-1" in err and "holds the baton, running its own code" in err, err
    src = textwrap.dedent(PROGRAM).splitlines()
    line = next(i for i, x in enumerate(src, 1) if f"# stuck-here: {stuck}" in x)
    assert f'ctrl_c.py", line {line}, in rank_main' in err, err
    assert "rank 0 (kb-rank-0" in err and "suspended in kb_yield" in err, err
    assert "kbthreads: Ctrl-C: ending the process" in err, err


@pytest.mark.parametrize("mode, stuck", [("sleep", "time.sleep"), ("c_call", "a C call holding the GIL")])
def test_a_second_ctrl_c_ends_a_process_whose_rank_is_stuck_and_prints_every_ranks_stack(tmp_path, mode, stuck):
    p = _start(tmp_path, mode, KBTHREADS_INTERRUPT_GRACE="off")
    p.send_signal(signal.SIGINT)
    # the first one is not taken: the program says it waits
    assert _wait_for_line(p.stderr, "kbthreads: Ctrl-C: waiting for rank 1 (kb-rank-1)")
    p.send_signal(signal.SIGINT)
    out, err, took = _finish(p)
    _assert_ended_with_stacks(p, err, stuck)
    assert "pressed again" in err, err
    assert took < PROMPT_S


@pytest.mark.parametrize("mode, stuck", [("sleep", "time.sleep"), ("c_call", "a C call holding the GIL")])
def test_one_ctrl_c_ends_a_process_whose_rank_is_stuck_after_the_grace_period(tmp_path, mode, stuck):
    p = _start(tmp_path, mode, KBTHREADS_INTERRUPT_GRACE="1")
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err, took = _finish(p)
    _assert_ended_with_stacks(p, err, stuck)
    assert "did not stop within 1000 ms" in err, err
    assert 1.0 <= time.monotonic() - t0 < PROMPT_S
