# SPDX-License-Identifier: MIT
"""PyTorch in ranks (issue 30): autograd, grad mode and intra-op threads on
kbthreads ranks. The training program is examples/torch_ddp.py's (one
implementation, documented there); these tests read what its ranks saw."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kbfake
import kbthreads

# Only the pyenv interpreters of make test-pythons lack torch; on Debian's
# python3 (python3-torch) these tests run.
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "torch_ddp.py"
if not EXAMPLE.is_file():  # package_test.sh runs a copy of tests/ away from the repository
    pytest.skip(f"{EXAMPLE} not found: not run from a source tree", allow_module_level=True)


def _load_example():
    spec = importlib.util.spec_from_file_location("torch_ddp", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


ddp = _load_example()


@pytest.fixture(autouse=True)
def one_intra_op_thread():
    """The example's setting (fixed reduction order); restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_hook_allreduce_inside_backward_gives_every_rank_the_sequential_weights():
    cfg = ddp.Config(ranks=4, steps=3)
    logs = ddp.run(cfg)
    expected = ddp.train_sequential(cfg)
    assert sorted(logs) == [0, 1, 2, 3]
    for r, log in logs.items():
        assert log.weights.keys() == expected.keys()
        for name, w in expected.items():
            assert torch.equal(log.weights[name], w), (r, name)
    # the weights moved: the check compares trained models, not the initial ones
    assert not torch.equal(expected["0.weight"], ddp.make_model(cfg)[0].weight.detach())
    assert ddp.check(cfg, logs) == []


def test_waiting_inside_no_grad_leaves_every_ranks_grad_mode_its_own():
    cfg = ddp.Config(ranks=4, steps=3)
    logs = ddp.run(cfg)
    for r, log in logs.items():
        # inside its no_grad block, after the wait (other ranks ran meanwhile)
        assert log.grad_mode_in_eval == [False] * cfg.steps, r
        assert log.grad_mode_after_eval == [True] * cfg.steps, r
        # every training forward, including those right after a sibling
        # suspended inside no_grad, built a graph
        assert log.forward_requires_grad == [True] * cfg.steps, r
        assert len(log.step_end) == cfg.steps and log.weights, r
    assert torch.is_grad_enabled()  # the driver's own mode was never touched


def test_two_runs_give_identical_weights_and_simulated_times():
    cfg = ddp.Config(ranks=4, steps=2)
    a, b = ddp.run(cfg), ddp.run(cfg)
    for r in range(cfg.ranks):
        assert a[r].step_end == b[r].step_end
        assert a[r].eval_loss == b[r].eval_loss
        for name, w in a[r].weights.items():
            assert torch.equal(w, b[r].weights[name]), (r, name)


def test_a_rank_whose_torch_op_raises_fails_the_spawn_and_its_siblings_are_cleaned_up():
    ctx = kbthreads.Context()
    finished: list[int] = []
    unwound: list[int] = []
    workers: list = []

    def fn(r: int) -> None:
        workers.append(kbthreads.getcurrent())
        try:
            x = torch.ones(2, 3, requires_grad=True)
            kbthreads.yield_()
            if r == 2:
                torch.matmul(x, torch.ones(2, 3))  # (2x3) @ (2x3): a shape mismatch
            for _ in range(3):
                (x * 2).sum().backward()
                kbthreads.yield_()
        except SystemExit:
            unwound.append(r)  # a sibling, cancelled at its yield_
            raise
        finally:
            finished.append(r)

    try:
        with pytest.raises(kbthreads.SpawnException) as ei:
            ctx.multiprocessing.spawn(fn, nprocs=4)
        e = ei.value
        assert list(e.errors) == [2]
        err = e.errors[2]
        assert type(err) is RuntimeError and "cannot be multiplied" in str(err)
        assert e.__cause__ is err
        assert str(e).startswith("spawn failed on ranks [2]: rank 2 raised RuntimeError(")
        # rank 2's finally first, then the siblings in rank order
        assert finished == [2, 0, 1, 3] and unwound == [0, 1, 3]
    finally:
        ctx.close()
    assert kbfake.alive([w.native_id for w in workers]) == []


def _threads() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


def test_torch_intra_op_threads_work_from_a_rank():
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(768, 768, generator=g), torch.randn(768, 768, generator=g)
    # on the driver, one thread; an elementwise product is split between
    # intra-op threads (590k elements, far above torch's grain size), and a
    # GEMM splits its output, not its sums: both give the same bits on 2 threads
    expected_mm, expected_mul = torch.matmul(a, b), a * b
    seen: dict[int, tuple] = {}

    def fn(r: int) -> None:
        kbthreads.yield_()
        if r == 1:
            before = _threads()
            torch.set_num_threads(2)  # process-wide; the rank's thread leads its own team
            try:
                threads = torch.get_num_threads()
                mm, mul = torch.matmul(a, b), a * b
                started = _threads() - before
            finally:
                torch.set_num_threads(1)
            seen[r] = (threads, started, mm, mul)
        kbthreads.yield_()

    ctx = kbthreads.Context()
    try:
        ctx.multiprocessing.spawn(fn, nprocs=3)
    finally:
        ctx.close()
    threads, started, mm, mul = seen[1]
    assert threads == 2
    assert started, "no intra-op thread was started from the rank"
    assert torch.equal(mm, expected_mm) and torch.equal(mul, expected_mul)
    assert torch.get_num_threads() == 1


def test_the_torch_ddp_example_exits_zero():
    env = dict(os.environ)
    binding = str(REPO / "bindings" / "python")
    env["PYTHONPATH"] = binding + os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else binding
    p = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert p.returncode == 0, p.stderr
    assert "same weights on every rank, equal to the sequential computation" in p.stdout
    assert p.stdout.count(" us simulated") == 3  # one line per step (default 3 steps)
