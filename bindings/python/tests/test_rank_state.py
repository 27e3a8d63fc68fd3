# SPDX-License-Identifier: MIT
"""What real threads give rank code: per-thread state and behaviour, the same
rank program run on the greenlet scheduler kbthreads replaces (the tests'
model of it, greenlet_ranks.py) and on kbthreads, asserting what differs and
what does not. docs/rank-state.md is the table these tests back.

The state rows share one shape: rank 0 sets the state, suspends inside it
(yield_ or wait), and rank 1 reads the state in its turn; then rank 0 reads
it again after resuming. On greenlet every rank runs on the one driver
thread, so whatever is kept per OS thread is seen by the next rank; on
kbthreads each rank is its own thread."""
from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import time
import warnings
from typing import Any, Callable

import pytest

from cbuild import build_c_library
from greenlet_ranks import GREENLET, KBTHREADS, SCHEDULERS
from kbthreads import _loader

NO_GREENLET = "greenlet does not import for this interpreter (Debian's python3-greenlet is for python3 3.11)"
NO_TORCH = "torch does not import for this interpreter (Debian: python3-torch, for python3 3.11)"
NO_NUMPY = "numpy does not import for this interpreter (Debian: python3-numpy, for python3 3.11)"
D = 200  # levels of C calls (map() calling back into Python) under the suspension point


@pytest.fixture(params=SCHEDULERS, ids=lambda s: s.name)
def sched(request):
    """Each scheduler in turn; greenlet only where it imports (Debian's 3.11)."""
    if request.param is GREENLET:
        pytest.importorskip("greenlet", reason=NO_GREENLET)
    return request.param


def leaks(sched) -> bool:
    """Thread-kept state is seen by the next rank on greenlet only."""
    return sched is GREENLET


class Engine:
    """Completes every handle at once, remembering which it was asked for."""

    def __init__(self) -> None:
        self.waited: list[Any] = []

    def wait(self, h: Any) -> None:
        self.waited.append(h)


def across_suspension(sched, enter: Callable[[], Any], read: Callable[[], Any], *, via_wait: bool = False):
    """Rank 0 enters `enter()`, suspends inside it, and reads `read()` after
    resuming; rank 1 reads `read()` while rank 0 is suspended. Returns
    (what rank 1 saw, what rank 0 saw after resuming)."""
    seen: dict[int, Any] = {}
    engine = Engine()

    def rank_main(rank: int) -> None:
        if rank == 0:
            with enter():
                if via_wait:
                    sched.wait(("kernel", 0))  # a simulated kernel, waited inside the block
                else:
                    sched.yield_()
                seen[0] = read()
        else:
            seen[1] = read()

    sched.spawn(rank_main, nprocs=2, engine=engine)
    assert engine.waited == ([("kernel", 0)] if via_wait else [])
    return seen[1], seen[0]


def test_both_schedulers_run_ranks_round_robin_and_re_raise_a_ranks_failure(sched):
    """The harness itself: the rows rely on rank 0 running before rank 1 in
    each round, and on a rank's failure failing the test."""
    order: list[tuple[int, int]] = []

    def rank_main(rank: int) -> None:
        for step in range(2):
            order.append((rank, step))
            sched.yield_()
        if rank == 1:
            raise ValueError("rank 1 failed")

    with pytest.raises(ValueError, match="rank 1 failed"):
        sched.spawn(rank_main, nprocs=2)
    assert order == [(0, 0), (1, 0), (0, 1), (1, 1)]


# ---------------------------------------------------------------------------
# torch: grad mode, inference mode, dispatch modes are kept per thread
# ---------------------------------------------------------------------------
def test_torch_no_grad_leaks_into_the_next_rank_only_under_greenlet(sched):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    rank1, rank0 = across_suspension(sched, torch.no_grad, torch.is_grad_enabled, via_wait=True)
    assert rank0 is False  # rank 0 still evaluates without grad after its wait
    assert rank1 is (not leaks(sched))  # greenlet: rank 1's forward would record no graph


def test_torch_no_grad_leak_makes_the_next_ranks_backward_fail_under_greenlet(sched):
    torch = pytest.importorskip("torch", reason=NO_TORCH)

    def train_step() -> str:
        w = torch.ones(3, requires_grad=True)
        loss = (w * 2).sum()
        try:
            loss.backward()
        except RuntimeError as e:
            return str(e)
        return f"grad {w.grad.tolist()}"

    rank1, _ = across_suspension(sched, torch.no_grad, train_step, via_wait=True)
    if leaks(sched):
        assert "does not require grad" in rank1
    else:
        assert rank1 == "grad [2.0, 2.0, 2.0]"


def test_torch_inference_mode_leaks_into_the_next_rank_only_under_greenlet(sched):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    rank1, rank0 = across_suspension(sched, torch.inference_mode, torch.is_inference_mode_enabled, via_wait=True)
    assert rank0 is True
    assert rank1 is leaks(sched)


def test_a_torch_dispatch_mode_sees_the_next_ranks_ops_only_under_greenlet(sched):
    pytest.importorskip("torch", reason=NO_TORCH)
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordOps(TorchDispatchMode):
        """Records every aten op dispatched while it is active."""

        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))

    mode = RecordOps()

    def rank1_op() -> list[str]:
        torch.ones(2).mul(3)  # rank 1's own op, outside any mode of its own
        return list(mode.ops)

    rank1, _ = across_suspension(sched, lambda: mode, rank1_op)
    assert ("mul" in rank1) is leaks(sched)


def test_fake_tensor_mode_makes_the_next_ranks_tensors_fake_only_under_greenlet(sched):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    def rank1_tensor_is_fake() -> bool:
        return isinstance(torch.ones(2) * 2, FakeTensor)

    rank1, rank0 = across_suspension(sched, FakeTensorMode, rank1_tensor_is_fake)
    assert rank0 is True
    assert rank1 is leaks(sched)


# ---------------------------------------------------------------------------
# the standard library's per-thread and per-context state
# ---------------------------------------------------------------------------
def test_threading_local_leaks_into_the_next_rank_only_under_greenlet(sched):
    tl = threading.local()

    @contextlib.contextmanager
    def set_attr():
        tl.device = "cuda:0"
        yield

    rank1, rank0 = across_suspension(sched, set_attr, lambda: getattr(tl, "device", None))
    assert rank0 == "cuda:0"
    assert rank1 == ("cuda:0" if leaks(sched) else None)


def test_contextvars_stay_per_rank_on_both(sched):
    """Same on both: greenlet gives each greenlet its own contextvars context."""
    import contextvars

    var = contextvars.ContextVar("rank_state_test_var", default="unset")

    @contextlib.contextmanager
    def set_var():
        token = var.set("rank 0's")
        yield
        var.reset(token)

    rank1, rank0 = across_suspension(sched, set_var, var.get)
    assert (rank1, rank0) == ("unset", "rank 0's")


def test_the_decimal_context_stays_per_rank_on_both(sched):
    """Same on both: decimal keeps its context in a contextvar (CPython >= 3.7),
    and greenlet switches contextvars contexts."""
    import decimal

    @contextlib.contextmanager
    def set_prec():
        with decimal.localcontext() as c:
            c.prec = 5
            yield

    def third() -> str:
        return str(decimal.Decimal(1) / decimal.Decimal(3))

    rank1, rank0 = across_suspension(sched, set_prec, third)
    assert rank0 == "0.33333"
    assert rank1 == "0." + "3" * decimal.DefaultContext.prec


def test_numpy_errstate_leaks_into_the_next_rank_only_under_greenlet(sched):
    np = pytest.importorskip("numpy", reason=NO_NUMPY)
    # numpy < 2 keeps the error state per thread; numpy 2 moved it into a contextvar.
    thread_kept = int(np.__version__.split(".")[0]) < 2

    def divide_by_zero() -> str:
        try:
            with warnings.catch_warnings():  # numpy's default for divide is "warn"
                warnings.simplefilter("ignore", RuntimeWarning)
                np.float64(1.0) / np.float64(0.0)
        except FloatingPointError:
            return "raised"
        return "inf"

    rank1, rank0 = across_suspension(sched, lambda: np.errstate(divide="raise"), divide_by_zero)
    assert rank0 == "raised"
    assert rank1 == ("raised" if leaks(sched) and thread_kept else "inf")


# ---------------------------------------------------------------------------
# C code: thread-local storage, blocking calls, deep C frames
# ---------------------------------------------------------------------------
C_HELPERS = r"""
#include <time.h>

/* A C extension's per-thread state, as a library keeps its "current device" or errno-like status. */
static _Thread_local int current_device;

void set_device(int d) { current_device = d; }
int get_device(void) { return current_device; }

/* A blocking call in C; ctypes releases the GIL around it. */
void block_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {
    }
}
"""


@pytest.fixture(scope="module")
def clib(tmp_path_factory):
    """The helpers above, built with the system's cc and loaded with ctypes."""
    h = ctypes.CDLL(build_c_library(tmp_path_factory.mktemp("rank_state"), "rank_state", C_HELPERS))
    h.set_device.argtypes, h.set_device.restype = [ctypes.c_int], None
    h.get_device.argtypes, h.get_device.restype = [], ctypes.c_int
    h.block_ms.argtypes, h.block_ms.restype = [ctypes.c_int], None
    return h


def test_c_thread_local_storage_leaks_into_the_next_rank_only_under_greenlet(sched, clib):
    @contextlib.contextmanager
    def set_device():
        clib.set_device(7)
        try:
            yield
        finally:
            clib.set_device(0)

    # On greenlet the driver thread's slot is set before and reset after: start from 0.
    assert clib.get_device() == 0
    rank1, rank0 = across_suspension(sched, set_device, clib.get_device)
    assert rank0 == 7
    assert rank1 == (7 if leaks(sched) else 0)


def test_c_state_a_rank_leaves_set_is_left_on_the_spawn_callers_thread_only_under_greenlet(sched, clib):
    def rank_main(rank: int) -> None:
        clib.set_device(5)  # and never reset

    try:
        sched.spawn(rank_main, nprocs=1)
        assert clib.get_device() == (5 if leaks(sched) else 0)
    finally:
        clib.set_device(0)


def test_a_kbthreads_context_reuses_a_ranks_thread_so_c_state_left_set_reaches_its_next_spawn(clib):
    """threading.local data is reset between spawns (README, "Threads, the
    GIL, Ctrl-C"); state kept in C is not: it belongs to the parked thread."""
    import kbthreads

    tl = threading.local()
    seen: list[tuple[int, int, Any]] = []

    def leave_state(rank: int) -> None:
        seen.append((threading.get_native_id(), 0, None))
        clib.set_device(5)
        tl.device = "cuda:5"

    def read_state(rank: int) -> None:
        seen.append((threading.get_native_id(), clib.get_device(), getattr(tl, "device", None)))

    ctx = kbthreads.Context()
    try:
        ctx.multiprocessing.spawn(leave_state, nprocs=1)
        ctx.multiprocessing.spawn(read_state, nprocs=1)
        with contextlib.closing(kbthreads.Context()) as fresh:  # a new context: a new thread
            fresh.multiprocessing.spawn(read_state, nprocs=1)
    finally:
        ctx.close()
    (first_tid, _, _), (reused_tid, reused_device, reused_tl), (fresh_tid, fresh_device, fresh_tl) = seen
    assert reused_tid == first_tid and (reused_device, reused_tl) == (5, None)
    assert (fresh_device, fresh_tl) == (0, None) and fresh_tid != reused_tid


def test_a_blocking_c_call_holds_the_turn_on_both_and_runs_on_the_ranks_own_thread_only_on_kbthreads(sched, clib):
    """Same on both: no other rank runs during a rank's blocking C call, and
    (ctypes releasing the GIL) a Python thread outside the ranks keeps running.
    The difference: on greenlet the call blocks the thread that called spawn."""
    events: list[str] = []
    ticks = [0]
    stop = threading.Event()

    def outside() -> None:  # a thread that is not a rank: a logger, a progress bar
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    blocked_on: dict[str, Any] = {}

    def rank_main(rank: int) -> None:
        events.append(f"rank {rank} starts")
        if rank == 0:
            before = ticks[0]
            clib.block_ms(150)
            blocked_on["ticks"] = ticks[0] - before
            blocked_on["main thread"] = threading.current_thread() is threading.main_thread()
            events.append("rank 0 back from C")
        sched.yield_()
        events.append(f"rank {rank} ends")

    t = threading.Thread(target=outside, daemon=True)
    t.start()
    try:
        assert threading.current_thread() is threading.main_thread()
        sched.spawn(rank_main, nprocs=2)
    finally:
        stop.set()
        t.join()
    assert events == ["rank 0 starts", "rank 0 back from C", "rank 1 starts", "rank 0 ends", "rank 1 ends"]
    assert blocked_on["ticks"] >= 5  # a 1 ms loop over 150 ms: the GIL was free (0 if it were held)
    assert blocked_on["main thread"] is (sched is GREENLET)


def descend(depth: int, at_bottom: Callable[[], Any]) -> Any:
    """depth levels of C calls (list() over map() calling back into Python), then at_bottom()."""
    if depth == 0:
        return at_bottom()
    return list(map(lambda _: descend(depth - 1, at_bottom), [0]))[0]


def deep_suspension_run(sched) -> tuple[list[str], dict[int, Any]]:
    """Three ranks, each suspending three times D levels deep in C calls."""
    events: list[str] = []
    results: dict[int, Any] = {}

    def rank_main(rank: int) -> None:
        def bottom() -> tuple[int, int]:
            frames, f = 0, sys._getframe()
            while f is not None:
                frames, f = frames + 1, f.f_back
            for step in range(3):
                events.append(f"rank {rank} step {step}")
                sched.yield_()
            return rank, frames

        results[rank] = descend(D, bottom)

    sched.spawn(rank_main, nprocs=3)
    return events, results


def test_suspending_deep_in_c_frames_resumes_each_rank_correctly_on_both(sched):
    events, results = deep_suspension_run(sched)
    assert events == [f"rank {r} step {s}" for s in range(3) for r in range(3)]
    # Each rank got its own result back up through D map() levels, after the others ran.
    assert [results[r][0] for r in range(3)] == [0, 1, 2]
    assert all(frames > 2 * D for _, frames in results.values())


def test_suspending_deep_in_c_frames_gives_the_same_results_on_both():
    pytest.importorskip("greenlet", reason=NO_GREENLET)
    greenlet_run = deep_suspension_run(GREENLET)
    kbthreads_run = deep_suspension_run(KBTHREADS)
    # The same interleaving, the same results, and the same Python stack depth
    # at the suspension point (each scheduler's entry is one frame below rank_main).
    assert greenlet_run == kbthreads_run


# ---------------------------------------------------------------------------
# what gdb and py-spy see
# ---------------------------------------------------------------------------
def who_runs_rank_code(sched, nprocs: int) -> dict[int, tuple[int, str]]:
    """Each rank's OS thread id and that thread's kernel name (the comm gdb and
    py-spy show), read in the rank's turns."""
    seen: dict[int, tuple[int, str]] = {}

    def rank_main(rank: int) -> None:
        for _ in range(2):
            tid = threading.get_native_id()
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            assert seen.setdefault(rank, (tid, comm)) == (tid, comm)  # a rank keeps its thread
            sched.yield_()

    sched.spawn(rank_main, nprocs=nprocs)
    return seen


def test_debuggers_see_one_thread_under_greenlet_and_a_named_thread_per_rank_under_kbthreads(sched):
    seen = who_runs_rank_code(sched, 4)
    tids = {tid for tid, _ in seen.values()}
    if sched is GREENLET:
        assert tids == {threading.get_native_id()}  # every rank on the thread that called spawn
    else:
        assert len(tids) == 4 and threading.get_native_id() not in tids
        if _loader.accel.features() & _loader.accel.KB_FEATURE_THREAD_NAMES:
            assert [seen[r][1] for r in range(4)] == [f"kb-rank-{r}" for r in range(4)]
        # (a KB_PORTABLE library names no thread: the rank threads keep the program's name)
