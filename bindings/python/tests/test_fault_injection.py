# SPDX-License-Identifier: MIT
"""Faults through the binding: on the fault-injection variant of the compiled
part (the library built with KB_FAULT_INJECTION, fault_accel.cmake), every
allocation the library and the extension make during a Python spawn, every
thread creation and every mutex set-up, failing once, gives a Python
exception that names the failure (MemoryError, or a KbthreadsError saying
"out of memory", or for a thread EAGAIN), leaves no thread behind, keeps
every reference count, and the next spawn on the same context works; and
sweeping those failures again and again leaks nothing (tracemalloc, the C
heap, Python's allocated blocks and objects).

fault_sweep.py does the sweeps in a process of its own (the variant is a
second copy of the compiled part and the library) and reports in JSON; the
tests below read that report. ctest's python_binding finds the variant in
the build tree that $KBTHREADS_LIBRARY (or $KBTHREADS_ACCEL) names; a build
without the fault-injection library (KB_FAULT_INJECTION=OFF, an installed
package) has none, and the tests say so and skip."""
from __future__ import annotations

import errno
import glob
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def fault_variant() -> str | None:
    """The variant's _accel*.so: $KBTHREADS_FAULT_ACCEL, else beside the build
    tree's compiled part ($KBTHREADS_LIBRARY: <build>/src/libkbthreads.so.0;
    $KBTHREADS_ACCEL: <build>/bindings/python/kbthreads/_accel*.so)."""
    if os.environ.get("KBTHREADS_FAULT_ACCEL"):
        return os.environ["KBTHREADS_FAULT_ACCEL"]
    folders = []
    if os.environ.get("KBTHREADS_LIBRARY"):
        build = os.path.dirname(os.path.dirname(os.path.abspath(os.environ["KBTHREADS_LIBRARY"])))
        folders.append(os.path.join(build, "bindings", "python", "fault", "kbthreads"))
    if os.environ.get("KBTHREADS_ACCEL"):
        folders.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(os.environ["KBTHREADS_ACCEL"]))),
                                    "fault", "kbthreads"))
    for folder in folders:
        found = sorted(glob.glob(os.path.join(folder, "_accel*.so")))
        if found:
            return found[0]
    return None


@pytest.fixture(scope="module")
def report():
    variant = fault_variant()
    if variant is None:
        pytest.skip("no fault-injection build of the compiled part here (a CMake build with "
                    "KB_BUILD_TESTS and KB_FAULT_INJECTION makes it, as make test does)")
    env = dict(os.environ, KBTHREADS_ACCEL=variant)
    env.pop("KBTHREADS_LIBRARY", None)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "bindings", "python")]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    p = subprocess.run([sys.executable, os.path.join(HERE, "fault_sweep.py")], env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout)


MEMORY_SWEEPS = ["library warm", "library cold", "python warm", "python cold", "sync cold"]


def results(report, *sweeps):
    return [(s, r) for s in sweeps for r in report["sweeps"][s]]


def test_every_sweep_reaches_the_calls_it_is_about(report):
    # (the counts of one spawn of fault_sweep's program: if one drops to 0,
    # the sweep no longer tests that kind)
    for sweep in MEMORY_SWEEPS + ["thread cold"]:
        assert report["sweeps"][sweep], sweep
    assert len(report["sweeps"]["thread cold"]) == report["nprocs"]  # one thread per rank on a new context


def test_every_library_allocation_failing_raises_an_exception_that_says_memory_ran_out(report):
    for sweep, r in results(report, "library warm", "library cold", "sync cold"):
        assert r["raised"] and r["raised"]["names_memory"], (sweep, r)
        assert r["raised"]["kbthreads_error"], (sweep, r)


def test_every_extension_allocation_failing_raises_an_exception_that_says_so_or_changes_nothing(report):
    """One allocation is optional by design: the table of rank thread ids
    that Ctrl-C uses (_accel_spawn.c: without it Ctrl-C goes to the driver);
    the spawn then runs to its end as usual."""
    for sweep, r in results(report, "python warm", "python cold"):
        if r["raised"] is None:
            assert r["ranks_done"] == list(range(report["nprocs"])), (sweep, r)
            assert "accel_core_start" in str(r["site"]), (sweep, r)
        else:
            assert r["raised"]["names_memory"], (sweep, r)


def test_only_python_running_out_of_memory_in_an_engine_hook_is_reported_as_unraisable(report):
    """An engine hook whose Python cannot even start (out of memory) has no
    exception to pass on: the compiled part reports it as unraisable and
    the drain fails with KB_ENOMEM; nothing else is."""
    for sweep, r in results(report, *report["sweeps"]):
        assert set(r["unraisable"]) <= ({"MemoryError"} if sweep.startswith("python") else set()), (sweep, r)


def test_a_thread_that_cannot_be_created_raises_kberror_eagain(report):
    for sweep, r in results(report, "thread cold"):
        assert r["raised"]["type"] == "KbError", r
        assert f"({-errno.EAGAIN})" in r["raised"]["message"], r


def test_the_next_spawn_on_the_same_context_works_after_every_failure(report):
    for sweep, r in results(report, *report["sweeps"]):
        assert r["next_spawn"] is True, (sweep, r)
        assert "close" not in r, (sweep, r)  # and a new context closes


def test_a_failed_spawn_leaves_no_thread_behind(report):
    """The warm context keeps its parked rank threads (reused by its next
    spawn), no more; a cold one's are gone once it is closed; after the last
    close only the threads that are not ranks are left."""
    idle, n = report["threads_idle"], report["nprocs"]
    for sweep, r in results(report, *report["sweeps"]):
        assert r["threads_after"] <= idle + (n if sweep.endswith("cold") else 0), (sweep, r)
        if sweep.endswith("cold"):
            assert r["threads_after_close"] == idle, (sweep, r)
    assert report["threads_after_close"] == idle - n


def test_a_failed_spawn_keeps_every_reference_count(report):
    """Of the rank function, its args, a collective's meta, the engine, the
    distributed layer and the context, after the failing spawn and the next."""
    for sweep, r in results(report, *report["sweeps"]):
        assert r["refcounts_kept"] is True, (sweep, r)


# Bounds on what sweeping every failure above again leaves (fault_sweep.py
# measures it: the C heap, Python's allocated blocks and its objects over two
# passes of every sweep, tracemalloc over the second of two passes): each
# pass fails over 60 times, so one leaked 16-byte allocation per failure
# would exceed each bound. Steady, a pass leaves nothing; the blocks move
# with dict tables resized meanwhile.
TRACED_BYTES, BLOCKS, OBJECTS, C_HEAP_BYTES = 1024, 64, 16, 8192


def test_sweeping_the_failures_again_leaks_nothing_tracemalloc_sees(report):
    m = report["memory"]
    assert m["failures_per_pass"] * 16 > TRACED_BYTES
    assert m["traced"][-1]["growth"] <= TRACED_BYTES, "\n".join(m["traced"][-1]["at"])


def test_sweeping_the_failures_again_leaks_no_python_object_or_block(report):
    before, after = report["memory"]["before"], report["memory"]["after"]
    assert after["objects"] - before["objects"] <= OBJECTS
    assert after["blocks"] - before["blocks"] <= BLOCKS


def test_sweeping_the_failures_again_leaks_nothing_on_the_c_heap(report):
    before, after = report["memory"]["before"], report["memory"]["after"]
    assert after["malloc_in_use"] - before["malloc_in_use"] <= C_HEAP_BYTES
