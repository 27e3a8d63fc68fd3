# SPDX-License-Identifier: MIT
"""The binding's own API: loading, the header's constants, handles, the queue and
completed-set containers, errors, join=False, threads, the GIL, Ctrl-C."""
import gc
import os
import re
import signal
import sys
import threading
import time

import pytest

import kbfake
import kbthreads
from kbthreads import _loader

accel = _loader.accel  # the compiled part, the binding's one way into the library

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "kbthreads.h")


def tids(workers):
    return [w.native_id for w in workers]


alive = kbfake.alive


# ---------------------------------------------------------------------------
# loading and the header's constants
# ---------------------------------------------------------------------------
def _mapped_libkbthreads() -> list:
    """The libkbthreads.so files mapped into this process."""
    with open("/proc/self/maps") as f:
        paths = {ln.split(None, 5)[5].strip() for ln in f if len(ln.split(None, 5)) == 6}
    return sorted(p for p in paths if os.path.basename(p).startswith("libkbthreads.so"))


def test_the_library_is_the_one_the_compiled_part_carries():
    """The library the compiled part is linked with (KBTHREADS_LIBRARY's, in
    a CMake build tree) or, in a pip-built package, compiled into it (no
    libkbthreads.so mapped)."""
    library = os.environ.get("KBTHREADS_LIBRARY")
    want = [os.path.realpath(library)] if library else []
    assert _mapped_libkbthreads() == want
    assert kbthreads.__version__ == kbthreads.version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", kbthreads.version())


def test_the_suspension_points_are_the_compiled_parts():
    assert kbthreads.yield_ is accel.yield_ and kbthreads.barrier is accel.barrier
    assert kbthreads.accelerated() is True


def _import_kbthreads(env) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    env = dict(env, PYTHONPATH=os.path.dirname(kbthreads.__path__[0]))
    return subprocess.run([sys.executable, "-c", "import kbthreads"], env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_compiled_part_that_cannot_be_loaded_is_an_import_error(tmp_path):
    bogus = tmp_path / "_accel.so"
    bogus.write_text("not an ELF file")
    out = _import_kbthreads(dict(os.environ, KBTHREADS_ACCEL=str(bogus)))
    assert out.returncode != 0 and "cannot load the compiled part " + str(bogus) in out.stderr, out.stderr


def test_a_library_outside_a_build_tree_is_an_import_error(tmp_path):
    env = dict(os.environ, KBTHREADS_LIBRARY=str(tmp_path / "libkbthreads.so.0"))
    env.pop("KBTHREADS_ACCEL", None)
    out = _import_kbthreads(env)
    assert out.returncode != 0 and "names no CMake build tree" in out.stderr, out.stderr


def _header_constants(text: str) -> dict:
    """#define KB_E... / KB_FEATURE_... values and enum KB_... = n entries
    of the header, as the C compiler sees them (errno names resolved)."""
    import errno

    out = {}
    for name, value in re.findall(r"#define (KB_E[A-Z]+)\s+\((-\w+)\)", text):
        out[name] = -getattr(errno, value[1:]) if value[1:].startswith("E") else int(value)
    for name, value in re.findall(r"#define (KB_FEATURE_[A-Z_]+) (0x[0-9a-f]+)u", text):
        out[name] = int(value, 16)
    for name, value in re.findall(r"\b(KB_(?:WAIT|CANCEL|AT)_[A-Z]+) = (\d+)", text):
        out[name] = int(value)
    return out


@pytest.mark.skipif(not os.path.exists(HEADER), reason="include/kbthreads.h not beside this package")
def test_the_extension_exports_the_headers_constants():
    want = _header_constants(open(HEADER).read())
    assert {"KB_ETIMEDOUT", "KB_EDIVERGED", "KB_ENOTSUP", "KB_WAIT_DRIVER", "KB_AT_BARRIER"} <= set(want)
    assert {name: getattr(accel, name, None) for name in want} == want
    codes = {name: v for name, v in want.items() if name.startswith("KB_E")}
    assert accel.errorcode == {v: name for name, v in codes.items()}


def test_the_package_imports_no_ctypes():
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.path.dirname(kbthreads.__path__[0]))
    code = ("import sys, kbthreads, kbthreads.multiprocessing; "
            "kbthreads.spawn(lambda r: kbthreads.yield_(), nprocs=2); print('ctypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# ---------------------------------------------------------------------------
# spawn basics, threads, where am I
# ---------------------------------------------------------------------------
def test_module_level_spawn_runs_every_rank_in_round_robin_order():
    out = []

    def fn(r, steps, tag):
        for i in range(steps):
            out.append((tag, r, i))
            kbthreads.yield_()

    assert kbthreads.spawn(fn, args=(2, "t"), nprocs=3) is None
    assert out == [("t", r, i) for i in range(2) for r in range(3)]
    assert kbthreads.spawn(fn, (1, "u")) is None  # nprocs defaults to 1
    assert out[-1] == ("u", 0, 0)


def library_names_threads() -> bool:
    """kb_features() has KB_FEATURE_THREAD_NAMES (0x2): not in a
    KB_PORTABLE=ON build, whose rank threads keep the name they inherit."""
    return bool(accel.features() & accel.KB_FEATURE_THREAD_NAMES)


def test_every_rank_is_its_own_thread_named_kb_rank_n():
    seen, names = {}, {}

    def fn(r):
        w = kbthreads.getcurrent()
        tid = threading.get_native_id()
        with open(f"/proc/self/task/{tid}/comm") as f:
            comm = f.read().strip()
        names[r] = threading.current_thread().name  # also logging's threadName
        seen[r] = (tid, comm, w.rank, w.name, bool(w), kbthreads.rank(), kbthreads.world_size())
        kbthreads.yield_()

    ctx = kbthreads.Context()
    ctx.multiprocessing.spawn(fn, nprocs=4)
    first = {r: v[0] for r, v in seen.items()}
    assert len(set(first.values()) | {threading.get_native_id()}) == 5
    assert [names[r] for r in range(4)] == [f"kb-rank-{r}" for r in range(4)]
    assert not [t for t in threading.enumerate() if t.name.startswith("kb-rank-")]
    named = library_names_threads()
    for r, (tid, comm, wr, name, running, kr, ws) in seen.items():
        # the kernel's name (comm) is the library's to give; the Python name the binding's
        assert comm == f"kb-rank-{r}" if named else not comm.startswith("kb-rank-"), comm
        assert (wr, name, running, kr, ws) == (r, f"kb-rank-{r}", True, r, 4)
    assert kbthreads.getcurrent() is None and kbthreads.rank() == -1 and kbthreads.world_size() == 0
    # the context keeps the finished ranks' threads parked for its next spawn
    # (rank i on the thread named kb-rank-i) and ends them when destroyed
    ctx.multiprocessing.spawn(fn, nprocs=4)
    assert {r: v[0] for r, v in seen.items()} == first
    ctx.close()
    assert alive(first.values()) == []


def test_workers_are_what_bind_rank_gets():
    class Dist:
        def __init__(self):
            self.bound = []

        def _bind_rank(self, g, r):
            assert kbthreads.getcurrent() is None  # the driver binds
            self.bound.append((g, r, g.started))

    ctx = kbthreads.Context(distributed=Dist())
    mine = {}
    ctx.multiprocessing.spawn(lambda r: mine.__setitem__(r, kbthreads.getcurrent()), nprocs=3)
    assert [(r, started) for _, r, started in ctx.distributed.bound] == [(0, False), (1, False), (2, False)]
    for g, r, _ in ctx.distributed.bound:
        assert mine[r] is g and g.dead and not g and g.native_id
    ctx.close()


def test_nprocs_zero_and_negative():
    assert kbthreads.spawn(lambda r: None, nprocs=0) is None
    with pytest.raises(ValueError):
        kbthreads.spawn(lambda r: None, nprocs=-1)
    with pytest.raises(TypeError):
        kbthreads.spawn(None, nprocs=1)


def test_calls_in_the_wrong_place():
    with pytest.raises(RuntimeError, match="outside a rank"):
        kbthreads.yield_()
    with pytest.raises(RuntimeError, match="outside a rank"):
        kbthreads.barrier()
    errors = []

    def fn(r):
        try:
            kbthreads.spawn(lambda r: None)
        except kbthreads.KbError as e:
            errors.append(e.code)

    kbthreads.spawn(fn)
    assert errors == [accel.KB_EPERM]

    class Engine:
        def wait(self, h):
            try:
                ctx.multiprocessing.spawn(lambda r: None)
            except kbthreads.KbError as e:
                errors.append(e.code)

    ctx = kbthreads.Context(Engine())
    ctx.wait("x")
    assert errors == [accel.KB_EPERM, accel.KB_EBUSY]
    ctx.close()


def test_in_hook_is_the_librarys_answer_in_each_engine_hook_and_nowhere_else():
    """accel.in_hook() is kb_in_hook(): True in the engine's wait (a drain and a
    driver-side wait), in _bind_rank and in the barrier reset of an abort; False
    on the driver outside them and in rank code."""
    seen = {}

    class Barrier:
        def reset(self):
            seen["abort"] = accel.in_hook()

    class Backend:
        _barrier = Barrier()

    class Dist:
        _backend = Backend()

        def _bind_rank(self, g, r):
            seen["bind"] = accel.in_hook()

    class Engine:
        def wait(self, h):
            seen.setdefault("wait", []).append((h, accel.in_hook()))

    ctx = kbthreads.Context(Engine(), distributed=Dist())
    in_rank = []

    def fn(r):
        in_rank.append(accel.in_hook())
        ctx.wait(("w", r))
        if r == 1:
            raise ValueError("rank 1 fails")

    with pytest.raises(kbthreads.SpawnException):
        ctx.multiprocessing.spawn(fn, nprocs=2)
    ctx.wait("driver")
    assert seen == {"bind": True, "abort": True, "wait": [(("w", 0), True), (("w", 1), True), ("driver", True)]}
    assert in_rank == [False, False] and accel.in_hook() is False
    ctx.close()


def test_stack_size():
    with pytest.raises(kbthreads.KbError) as ei:
        kbthreads.Context(stack_size=1024).multiprocessing.spawn(lambda r: None)
    assert ei.value.code == accel.KB_EINVAL

    def deep(n):
        return 0 if n == 0 else 1 + deep(n - 1)

    out = []
    ctx = kbthreads.Context(stack_size=1 << 20)
    ctx.multiprocessing.spawn(lambda r: out.append(deep(500)))
    assert out == [500]
    ctx.close()


# ---------------------------------------------------------------------------
# failure: the exception objects, the message, cleanup, no noise
# ---------------------------------------------------------------------------
def test_spawn_exception_holds_the_original_objects(capfd):
    raised = {}

    def fn(r):
        try:
            kbthreads.yield_()
            if r == 1:
                raised[1] = ValueError("x")
                raise raised[1]
            kbthreads.yield_()
        finally:
            if r == 3:
                raised[3] = RuntimeError("cleanup")
                raise raised[3]

    with pytest.raises(kbthreads.SpawnException) as ei:
        kbthreads.spawn(fn, nprocs=4)
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert str(e) == "spawn failed on ranks [1, 3]: rank 1 raised ValueError('x')"
    assert list(e.errors) == [1, 3]
    assert e.errors[1] is raised[1] and e.errors[3] is raised[3]
    assert e.__cause__ is raised[1]
    assert e.drain_error is None
    out, err = capfd.readouterr()
    assert err == ""  # nothing escaped into C ("Exception ignored in ...")


def test_spawn_exception_message_format():
    S = kbthreads.SpawnException
    assert str(S({})) == "spawn failed on ranks []"
    assert str(S({3: KeyError("k"), 1: ValueError("v")})) == "spawn failed on ranks [1, 3]: rank 3 raised KeyError('k')"
    from kbthreads.multiprocessing import SpawnException, _MultiprocessingNamespace

    assert SpawnException is S and _MultiprocessingNamespace is kbthreads.MultiprocessingNamespace


def test_drain_failure_names_handle_phase_and_exception():
    class Engine:
        def wait(self, h):
            if h == ("h", 2):
                raise self.exc

    eng = Engine()
    eng.exc = OSError(5, "io")
    ctx = kbthreads.Context(eng)
    with pytest.raises(kbthreads.SpawnException) as ei:
        ctx.multiprocessing.spawn(lambda r: ctx.wait(("h", r)), nprocs=3)
    e = ei.value
    assert e.errors == {} and e.drain_error is eng.exc and e.__cause__ is eng.exc
    assert e.drain_handle == ("h", 2) and e.drain_phase == "pending worker wait"
    assert str(e) == (
        "spawn failed on ranks []: drain failed: engine wait for handle ('h', 2) "
        "(pending worker wait) raised OSError(5, 'io')"
    )
    assert ("h", 0) in ctx._completed and ("h", 2) not in ctx._completed
    ctx.close()


def test_driver_side_wait_raises_the_engine_exception():
    boom = LookupError("nope")

    class Engine:
        calls = []

        def wait(self, h):
            self.calls.append(h)
            if h == "bad":
                raise boom

    ctx = kbthreads.Context(Engine())
    with pytest.raises(LookupError) as ei:
        ctx.wait("bad")
    assert ei.value is boom and "bad" not in ctx._completed
    ctx.wait("good")
    ctx.wait("good")  # the fast path: the engine is not called again
    assert Engine.calls == ["bad", "good"] and "good" in ctx._completed
    ctx.close()


def test_context_reusable_after_failure():
    ctx = kbthreads.Context()
    with pytest.raises(kbthreads.SpawnException):
        ctx.multiprocessing.spawn(lambda r: 1 / 0, nprocs=2)
    out = []
    ctx.multiprocessing.spawn(lambda r: out.append(r), nprocs=2)
    assert out == [0, 1]
    ctx.close()
    ctx.close()  # idempotent


# ---------------------------------------------------------------------------
# handles, the queues and the completed set
# ---------------------------------------------------------------------------
def test_handles_are_any_hashable_object():
    ctx = kbthreads.Context()
    hs = [("coll", "g01"), 7, "s", frozenset({1, 2}), None, (1, ("nested", 2.5))]
    for h in hs:
        ctx.wait(h)
    assert set(ctx._completed) == set(hs)
    assert 1.0 not in ctx._completed and 7.0 in ctx._completed  # set semantics: 7 == 7.0
    assert ["unhashable"] not in ctx._completed
    with pytest.raises(TypeError):
        ctx.wait(["unhashable"])
    ids = [ctx._id(h) for h in hs]
    assert len(set(ids)) == len(hs) and 0 not in ids and 2**64 - 1 not in ids and min(ids) >= 1
    assert ctx._id(7) == 7 and 7 not in ctx._h2id  # an int handle is its own id: no table entry
    assert len(ctx._h2id) == len(hs) - 1
    ctx.close()


class _Index:
    """An int-like handle (as numpy's integers are): __index__ and == with ints."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v

    def __eq__(self, other):
        return self.v == other

    def __hash__(self):
        return hash(self.v)


def test_handles_equal_to_an_int_are_that_handle():
    """Python's sets take 5, 5.0, True/1 and int-like objects equal to 5 for
    one element; so does the binding, whichever comes first, and the engine
    is given the first non-int object seen for it."""
    seen = []

    class Engine:
        def wait(self, h):
            seen.append(h)

    ctx = kbthreads.Context(Engine())
    big = 2**63 + 4096  # exactly a float too; beyond the ints that are their own ids: a table entry

    def fn(r):
        ctx.wait(_Index(5))
        ctx.wait(5)  # the same handle: completed, the fast path
        ctx.wait(5.0)
        ctx.wait(True)
        ctx.wait(1)
        ctx.wait(big)
        ctx.wait(float(big))  # equal to big in Python: the same handle

    ctx.multiprocessing.spawn(fn, nprocs=1)
    assert len(seen) == 3 and seen[0] == 5 and type(seen[0]) is _Index
    assert seen[1] is True and seen[2] == big
    assert 5 in ctx._completed and 5.0 in ctx._completed and 1 in ctx._completed and 2 not in ctx._completed
    assert _Index(5) in ctx._completed and big in ctx._completed
    assert len(ctx._completed) == 3
    ctx.close()


def test_pending_containers():
    ctx = kbthreads.Context()
    w = ctx._pending_worker_waits
    assert w == [] and not w and len(w) == 0
    w.append(("a", 1))
    w.extend([("b", 2), ("a", 1)])
    assert w == [("a", 1), ("b", 2), ("a", 1)] and w[1] == ("b", 2) and ("b", 2) in w
    assert repr(w) == "[('a', 1), ('b', 2), ('a', 1)]" and w.copy() == list(w)
    for refused in (w.clear, w.pop, lambda: w.remove(("a", 1))):
        with pytest.raises(TypeError, match="cannot be removed"):
            refused()
    c = ctx.pending_collectives
    meta = {"op": "sum"}
    c.append((("coll", "x"), 3, meta))
    c.append((("coll", "y"), 4, None))
    assert c == [(("coll", "x"), 3, meta), (("coll", "y"), 4, None)] and c[0][2] is meta
    done = ctx._completed
    assert done == set() and repr(done) == "set()"
    done.add("z")
    assert "z" in done and done == {"z"} and (done | {"q"}) == {"z", "q"}
    with pytest.raises(TypeError):
        done.discard("z")
    seen = []

    def fn(r):
        seen.append((list(ctx._pending_worker_waits), list(ctx.pending_collectives)))

    ctx.multiprocessing.spawn(fn)  # the ranks see the queues; the drain empties them
    assert seen == [([("a", 1), ("b", 2), ("a", 1)], [(("coll", "x"), 3, meta), (("coll", "y"), 4, None)])]
    assert w == [] and c == [] and set(done) == {"z", ("a", 1), ("b", 2), ("coll", "x"), ("coll", "y")}
    assert ctx._metas == {}  # metas are dropped once their entries left the queue
    ctx.close()


def test_backend_queue_is_adopted():
    class Backend:
        def __init__(self):
            self._pending_collective_handles = [(("coll", "early"), 0, "m")]

    class Dist:
        def __init__(self):
            self._backend = Backend()

    ctx = kbthreads.Context(distributed=Dist())
    be = ctx.distributed._backend
    assert be._pending_collective_handles is ctx.pending_collectives
    assert be._pending_collective_handles == [(("coll", "early"), 0, "m")]
    ctx.distributed._backend = Backend()  # replaced: adopted again at the next spawn
    ctx.multiprocessing.spawn(lambda r: None)
    assert ctx.distributed._backend._pending_collective_handles is ctx.pending_collectives
    assert ("coll", "early") in ctx._completed and ctx.pending_collectives == []
    ctx.close()


def test_meta_reaches_ctx_wait_in_drain_phase_b():
    got = []

    class Ctx(kbthreads.Context):
        def wait(self, h, _meta=None):
            if kbthreads.getcurrent() is None:
                got.append((h, _meta))
            super().wait(h, _meta)

    ctx = Ctx()
    meta = object()
    ctx.multiprocessing.spawn(lambda r: ctx.pending_collectives.append((("c", r), r, meta)), nprocs=2)
    assert got == [(("c", 0), meta), (("c", 1), meta)]
    ctx.close()


def test_a_process_context_joined_to_the_end_or_closed_gives_no_warning():
    import warnings

    ctx = kbthreads.Context()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        pc = ctx.multiprocessing.spawn(lambda r: ctx.yield_(), nprocs=2, join=False)
        assert pc.join() is True
        del pc
        pc = ctx.multiprocessing.spawn(lambda r: ctx.yield_(), nprocs=2, join=False)
        pc.close()
        del pc
        gc.collect()
    ctx.close()


def test_the_binding_never_imports_greenlet():
    import subprocess
    import sys

    code = ("import sys, kbthreads\n"
            "def fn(r):\n"
            "    kbthreads.yield_()\n"
            "    if r == 1:\n"
            "        raise SystemExit(0)\n"
            "try:\n"
            "    kbthreads.spawn(fn, nprocs=2)\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('greenlet' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "False\n", out.stderr


def test_an_exception_only_named_greenlet_exit_fails_the_spawn():
    class GreenletExit(BaseException):
        pass

    ctx = kbthreads.Context()
    log = []

    def fn(r):
        try:
            ctx.yield_()
            if r == 0:
                raise GreenletExit()
            ctx.yield_()
        finally:
            log.append(r)

    with pytest.raises(GreenletExit):
        ctx.multiprocessing.spawn(fn, nprocs=2)
    assert log == [0, 1]  # rank 1 was cancelled: not the reference's normal finish
    ctx.close()


# ---------------------------------------------------------------------------
# join=False
# ---------------------------------------------------------------------------
def test_join_false_returns_a_process_context():
    ctx = kbthreads.Context()
    out = []

    def fn(r):
        for i in range(3):
            out.append((r, i))
            ctx.yield_()

    pc = ctx.multiprocessing.spawn(fn, nprocs=2, join=False)
    assert isinstance(pc, kbthreads.ProcessContext) and out == []  # bound, not run
    assert [w.rank for w in pc.workers] == [0, 1]
    with pytest.raises(kbthreads.KbError) as ei:  # the ctx is busy while the spawn lives
        ctx.multiprocessing.spawn(fn)
    assert ei.value.code == accel.KB_EBUSY
    assert pc.join(timeout=0) is False and out == [(0, 0), (1, 0)]
    assert pc.join() is True and len(out) == 6
    assert pc.join() is True and pc.join(timeout=0) is True
    ctx.multiprocessing.spawn(fn, nprocs=1)  # free again
    ctx.close()
    assert alive(tids(pc.workers)) == []


def test_join_timeout_is_checked_after_a_round():
    def fn(r):
        for _ in range(50):
            time.sleep(0.002)
            kbthreads.yield_()

    pc = kbthreads.spawn(fn, nprocs=2, join=False)
    t = time.monotonic()
    assert pc.join(timeout=0.03) is False
    assert time.monotonic() - t < 5.0
    assert pc.join(timeout=None) is True


def test_join_false_failure_is_raised_by_join_every_time():
    def fn(r):
        kbthreads.yield_()
        if r == 0:
            raise ValueError("late")

    pc = kbthreads.spawn(fn, nprocs=2, join=False)
    with pytest.raises(kbthreads.SpawnException) as e1:
        pc.join()
    with pytest.raises(kbthreads.SpawnException) as e2:
        pc.join()
    assert e1.value is e2.value and list(e1.value.errors) == [0]


def test_dropping_a_live_process_context_cancels_its_ranks():
    ctx = kbthreads.Context()
    log = []

    def fn(r):
        try:
            while True:
                ctx.yield_()
        finally:
            log.append(r)

    pc = ctx.multiprocessing.spawn(fn, nprocs=3, join=False)
    pc.join(timeout=0)
    workers = pc.workers
    with pytest.warns(ResourceWarning, match="unclosed <kbthreads.ProcessContext nprocs=3 live>"):
        del pc
        gc.collect()
    # the rank running when Ctrl-C came raised it: its finally first, then
    # its siblings' (cancelled) in rank order (tests/test_ctrl_c.py has the rest)
    assert sorted(log) == [0, 1, 2] and log[1:] == sorted(log[1:]) and all(w.dead for w in workers)
    with ctx.multiprocessing.spawn(fn, nprocs=2, join=False) as pc:
        pc.join(timeout=0)
    assert log == [0, 1, 2, 0, 1]
    with pytest.raises(RuntimeError, match="closed before it finished"):
        pc.join()
    ctx.close()


def test_process_context_dropped_on_a_rank_thread_is_freed_afterwards():
    a = kbthreads.Context()
    log = []

    def fa(r):
        try:
            while True:
                a.yield_()
        finally:
            log.append(("a", r))

    holder = [a.multiprocessing.spawn(fa, nprocs=2, join=False)]
    holder[0].join(timeout=0)

    def fb(r):
        holder.clear()  # the last reference dies on this rank thread
        gc.collect()
        log.append(("b", r))

    b = kbthreads.Context()
    with pytest.warns(ResourceWarning, match="unclosed"):
        b.multiprocessing.spawn(fb)
    assert log == [("b", 0), ("a", 0), ("a", 1)]
    b.close()
    a.close()


def test_closing_a_context_cancels_its_live_spawn():
    ctx = kbthreads.Context()
    log = []

    def fn(r):
        try:
            ctx.yield_()
            ctx.yield_()
        finally:
            log.append(r)

    pc = ctx.multiprocessing.spawn(fn, nprocs=2, join=False)
    pc.join(timeout=0)
    ctx.close()
    assert log == [0, 1] and alive(tids(pc.workers)) == []
    with pytest.raises(RuntimeError):
        pc.join()


def test_a_spawning_context_is_busy_to_other_threads():
    ctx = kbthreads.Context()
    codes, stop = [], threading.Event()

    def other():
        while not stop.is_set():  # all through the spawn, also between join slices
            for call in (lambda: ctx.wait("x"), lambda: "x" in ctx._completed,
                         lambda: list(ctx._pending_worker_waits), lambda: ctx.multiprocessing.spawn(len)):
                try:
                    call()
                    codes.append("ran")
                except kbthreads.KbError as e:
                    codes.append(e.code)
            time.sleep(0.001)

    t = threading.Thread(target=other)

    def fn(r):
        if r == 0 and t.ident is None:
            t.start()
        for _ in range(100):
            time.sleep(0.001)
            ctx.yield_()

    ctx.multiprocessing.spawn(fn, nprocs=2)
    stop.set()
    t.join()
    assert codes and set(codes) == {accel.KB_EBUSY}
    # join=False: between two join() calls the context is idle, any thread may use it
    pc = ctx.multiprocessing.spawn(fn, nprocs=1, join=False)
    pc.join(timeout=0)
    done = []
    th = threading.Thread(target=lambda: done.append(ctx.wait("y")))
    th.start()
    th.join()
    assert done == [None] and "y" in ctx._completed
    assert pc.join() is True
    ctx.close()


# ---------------------------------------------------------------------------
# the GIL and Ctrl-C
# ---------------------------------------------------------------------------
def test_other_python_threads_run_while_ranks_wait_for_the_baton():
    stop = threading.Event()
    ticks = [0]

    def background():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0)

    def fn(r):
        for _ in range(300):
            kbthreads.yield_()

    bg = threading.Thread(target=background)
    bg.start()
    result = []
    runner = threading.Thread(target=lambda: result.append(kbthreads.Context().multiprocessing.spawn(fn, nprocs=4)))
    runner.start()  # a spawn driven from a thread other than the main thread
    runner.join(60)
    stop.set()
    bg.join()
    assert not runner.is_alive() and result == [None]
    assert ticks[0] > 0


def test_keyboard_interrupt_cancels_the_ranks():
    assert threading.current_thread() is threading.main_thread()
    log, workers = [], []

    def fn(r):
        workers.append(kbthreads.getcurrent())
        try:
            for i in range(2_000_000):
                if r == 2 and i == 1000:
                    # Ctrl-C while the spawn runs. Sent by a rank, not by a
                    # thread of the test's own: such a thread had to win
                    # the GIL from ranks that pass it on all the time, and
                    # in one slow sitting never did before the spawn ended.
                    os.kill(os.getpid(), signal.SIGINT)
                kbthreads.yield_()
        finally:
            log.append(r)

    ctx = kbthreads.Context()
    # Python's own Ctrl-C handler, whatever this suite inherited: a shell
    # starts a background job with SIGINT ignored, Python keeps it ignored,
    # and the spawn then ran to its end with nothing raised.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            ctx.multiprocessing.spawn(fn, nprocs=3)
    finally:
        signal.signal(signal.SIGINT, inherited)
    # the rank running when Ctrl-C came raised it: its finally first, then
    # its siblings' (cancelled) in rank order (tests/test_ctrl_c.py has the rest)
    assert sorted(log) == [0, 1, 2] and log[1:] == sorted(log[1:]) and all(w.dead for w in workers)
    ctx.multiprocessing.spawn(lambda r: None)  # the context is usable again
    ctx.close()
    assert alive(tids(workers)) == []


EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "gdb_ranks.py")
# gdb's py-bt for the interpreter running this suite: Debian's python3-dbg
# installs it for Debian's python3 only (other CPythons: the test skips).
PY_GDB = "/usr/share/gdb/auto-load" + os.path.realpath(sys.executable) + "-gdb.py"


def _example_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(kbthreads.__path__[0])  # the kbthreads this suite tests
    return env


def test_gdb_example_runs_without_a_debugger():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, EXAMPLE], env=_example_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "done\n", out.stderr


@pytest.mark.skipif(
    not (os.path.exists("/usr/bin/gdb") and os.path.exists("/usr/bin/python3") and os.path.exists(PY_GDB)),
    reason="gdb, or gdb's py-bt for this interpreter (Debian's python3-dbg, for Debian's python3), not installed",
)
def test_gdb_shows_python_ranks_as_threads():
    """The README's gdb session: every rank is a thread named kb-rank-N and
    py-bt shows its Python stack."""
    import subprocess
    import sys

    cmd = ["gdb", "-batch", "-ex", "run", "-ex", "info threads", "-ex", "thread apply all py-bt",
           "--args", sys.executable, EXAMPLE]
    out = subprocess.run(cmd, env=_example_env(), capture_output=True, text=True, timeout=120).stdout
    # (a KB_PORTABLE=ON library names no thread: then any name the thread inherited)
    name = "kb-rank-%d" if library_names_threads() else '[^"]+'
    assert re.search(r'Thread 4 "%s" received signal SIGTRAP' % name.replace("%d", "2"), out), out
    for r in range(4):
        assert re.search(r'Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP \d+\) "%s"\):\nTraceback'
                         % name.replace("%d", str(r)), out), out
    assert out.count('gdb_ranks.py", line') >= 5, out  # four ranks and the driver


# ---------------------------------------------------------------------------
# arguments: integers through operator.index (as the reference's range(nprocs))
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("nprocs", ["3", 2.5, 2.0, None, [2], True, False])
def test_nprocs_that_is_not_an_integer_is_a_type_error(nprocs):
    with pytest.raises(TypeError, match="nprocs must be an integer"):
        kbthreads.spawn(lambda r: None, nprocs=nprocs)


def test_a_negative_nprocs_is_a_value_error():
    with pytest.raises(ValueError, match="nprocs must be >= 0"):
        kbthreads.spawn(lambda r: None, nprocs=-1)


def test_nprocs_takes_any_object_with_index():
    ran = []
    kbthreads.spawn(ran.append, nprocs=_Index(3))
    assert ran == [0, 1, 2]


def test_fn_that_is_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="fn must be callable"):
        kbthreads.spawn("not a function", nprocs=1)


@pytest.mark.parametrize("args", [5, "ab", None])
def test_args_that_is_not_a_tuple_of_arguments_is_a_type_error(args):
    with pytest.raises(TypeError, match="args must be a tuple"):
        kbthreads.spawn(lambda r, *a: None, args=args, nprocs=1)


def test_args_takes_any_iterable_of_arguments():
    got = []
    kbthreads.spawn(lambda r, a, b: got.append((r, a, b)), args=["x", "y"], nprocs=1)
    assert got == [(0, "x", "y")]


@pytest.mark.parametrize("join", ["yes", 1.0, 2, [0]])
def test_a_truthy_join_joins_as_torch_multiprocessing_spawn_does(join):
    ran = []
    assert kbthreads.spawn(ran.append, nprocs=2, join=join) is None
    assert ran == [0, 1]


@pytest.mark.parametrize("join", [None, "", 0, 0.0, []])
def test_a_falsy_join_returns_a_process_context_as_torch_multiprocessing_spawn_does(join):
    ran = []
    with kbthreads.spawn(ran.append, nprocs=2, join=join) as pc:
        assert isinstance(pc, kbthreads.ProcessContext) and ran == []
        assert pc.join() is True
    assert ran == [0, 1]


@pytest.mark.parametrize("timeout", ["1", b"1", [1]])
def test_a_join_timeout_that_is_not_a_number_is_a_type_error(timeout):
    pc = kbthreads.spawn(lambda r: None, nprocs=1, join=False)
    with pytest.raises(TypeError, match="timeout must be a number"):
        pc.join(timeout)
    assert pc.join(0.5) is True  # still joinable


def test_a_nan_join_timeout_is_a_value_error():
    pc = kbthreads.spawn(lambda r: None, nprocs=1, join=False)
    with pytest.raises(ValueError, match="NaN"):
        pc.join(float("nan"))
    assert pc.join() is True


@pytest.mark.parametrize("size, error", [("64k", TypeError), (65536.0, TypeError), (None, TypeError),
                                         (-1, ValueError)])
def test_a_stack_size_that_is_not_a_size_is_refused(size, error):
    with pytest.raises(error, match="stack_size"):
        kbthreads.Context(stack_size=size)


@pytest.mark.parametrize("entry, error", [((1, "0", None), TypeError), ((1, 0.0, None), TypeError),
                                          ((1, None, None), TypeError), ((1, 2**40, None), ValueError),
                                          ((1, -(2**31) - 1, None), ValueError), ((1, 0), ValueError),
                                          (7, TypeError)])
def test_a_collective_entry_that_is_not_handle_sip_id_meta_is_refused(entry, error):
    ctx = kbthreads.Context()
    with pytest.raises(error):
        ctx.pending_collectives.append(entry)
    assert list(ctx.pending_collectives) == [] and ctx._metas == {}
    ctx.close()


def test_a_bad_sip_id_from_a_rank_is_refused_and_keeps_no_meta():
    ctx = kbthreads.Context()
    errors = []

    def fn(r):
        try:
            ctx.pending_collectives.append((1, 2.5, "meta"))
        except TypeError as e:
            errors.append(e)

    ctx.multiprocessing.spawn(fn, nprocs=1)
    assert len(errors) == 1 and ctx._metas == {} and list(ctx.pending_collectives) == []
    ctx.close()


def test_a_sip_id_takes_any_object_with_index():
    ctx = kbthreads.Context()
    ctx.pending_collectives.append((1, _Index(4), None))
    assert list(ctx.pending_collectives) == [(1, 4, None)]
    ctx.close()
