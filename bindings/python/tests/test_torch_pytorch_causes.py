# SPDX-License-Identifier: MIT
"""The causes found running PyTorch's own distributed tests on kbthreads
ranks (issue 53), one behaviour per test, each written from the PyTorch
test that showed it (FSDP2's training tests, DTensor's redistribution
tests, the module tracker's and CommDebugMode's, loss parallelism's, the
fake group's):

- collective outputs are written as gloo writes them: a leaf that requires
  grad can receive one, a view's base is not modified in place, and each
  output's version counter moves as ProcessGroupGloo's does;
- DeviceMeshes of different ranks never compare equal, so DTensor's
  process-wide plan caches stay per rank;
- a module tracker entered on one rank sees only that rank's modules;
- loss_parallel() on every rank at once;
- a rank makes PyTorch's fake group with the rank and world size it asks;
- no crash when a rank's thread state is deleted after torch work (nested
  fully_shard and a backward pass, in a child process; and the teardown
  under Valgrind's memcheck).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402
from torch_helpers import child_env, run  # noqa: E402

HERE = Path(__file__).resolve().parent
SUPPRESSIONS = HERE / "valgrind-python-torch.supp"


@pytest.fixture(autouse=True)
def one_intra_op_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class MLP(nn.Module):
    """Two linear layers, as the MLPs of PyTorch's FSDP and TP tests."""

    def __init__(self, dim: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.net1 = nn.Linear(dim, hidden)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net2(self.relu(self.net1(x)))


# ---- cause 1: outputs written below autograd ---------------------------------------------------
def test_broadcast_and_all_reduce_into_leaves_that_require_grad():
    """FSDP2's tests broadcast every parameter from rank 0 before training
    (they are leaves that require grad); with gloo that neither raises nor
    moves the parameter's version counter, and the parameter trains on."""

    def body(rank: int, n: int) -> Any:
        torch.manual_seed(rank)  # each rank its own initial weights, as unseeded processes would
        model = MLP()
        before = [p._version for p in model.parameters()]
        for p in model.parameters():
            dist.broadcast(p, src=0)
        bias = model.net2.bias
        dist.all_reduce(bias)
        moved = [p._version - v for p, v in zip(model.parameters(), before)]
        model(torch.ones(2, 8)).sum().backward()
        return moved, [p.detach().clone() for p in model.parameters()], bias.grad is not None, bias.requires_grad

    out = run(body, n=3)
    torch.manual_seed(0)
    ref = MLP()
    for rank, (moved, params, has_grad, requires_grad) in out.items():
        assert moved == [0, 0, 0, 0], rank
        assert has_grad and requires_grad
        for p, r in zip(params[:3], list(ref.parameters())[:3]):
            assert torch.equal(p, r.detach())
        assert torch.equal(params[3], ref.net2.bias.detach() * 3)


def test_recv_into_a_leaf_that_requires_grad():
    """Pipelining's stages receive activations into buffers that require
    grad (ScheduleGPipe's first step)."""

    def body(rank: int, n: int) -> Any:
        if rank == 0:
            dist.send(torch.arange(4.0), dst=1)
            return None
        buf = torch.zeros(4, requires_grad=True)
        dist.recv(buf, src=0)
        (buf * buf).sum().backward()
        return buf._version, buf.detach().clone(), buf.grad

    _, (version, values, grad) = run(body, n=2).values()
    assert version == 0
    assert torch.equal(values, torch.arange(4.0))
    assert torch.equal(grad, 2 * torch.arange(4.0))


def test_collective_into_a_split_view_leaves_its_base_unmodified():
    """DTensor's redistribution reduces into outputs of split(): an in-place
    write there under autograd fails ("Output 1 of SplitBackward0 is a view
    and its base ... has been modified inplace"); gloo's does not."""

    def body(rank: int, n: int) -> Any:
        x = torch.full((4, 3), float(rank + 1), requires_grad=True)
        parts = (x * 2).split(2)
        base_version = parts[0]._base._version
        dist.all_reduce(parts[1])
        y = torch.cat(parts).sum()
        y.backward()
        return parts[0]._base._version - base_version, parts[1].detach().clone(), x.grad

    out = run(body, n=2)
    for moved, reduced, grad in out.values():
        assert moved == 0
        assert torch.equal(reduced, torch.full((2, 3), 2.0 + 4.0))
        assert torch.equal(grad, torch.full((4, 3), 2.0))


# What ProcessGroupGloo itself moves each output's version counter by in PyTorch
# 2.13 (measured with gloo processes: the kinds that gather into a flat buffer
# copy out of it; the others write in place).
GLOO_BUMPS = {
    "all_reduce": 0,
    "broadcast": 0,
    "reduce": 0,
    "scatter": 0,
    "all_to_all_single": 0,
    "all_gather": 1,
    "gather": 1,
    "reduce_scatter": 1,
    "reduce_scatter_tensor": 1,
    "all_to_all": 1,
    "all_reduce_coalesced": 1,
    "all_gather_into_tensor": 2,
}


def test_output_version_counters_move_as_gloos_do():
    def body(rank: int, n: int) -> Any:
        moved: dict[str, int] = {}

        def check(kind: str, outs: list[torch.Tensor], call: Any) -> None:
            before = [t._version for t in outs]
            call()
            deltas = {t._version - v for t, v in zip(outs, before)}
            assert len(deltas) == 1, (kind, deltas)
            moved[kind] = deltas.pop()

        o = torch.ones(4)
        check("all_reduce", [o], lambda: dist.all_reduce(o))
        check("broadcast", [o], lambda: dist.broadcast(o, 0))
        check("reduce", [o], lambda: dist.reduce(o, 0))
        check("scatter", [o], lambda: dist.scatter(o, [torch.ones(4)] * n if rank == 0 else None, src=0))
        o2 = torch.zeros(2 * n)
        check("all_to_all_single", [o2], lambda: dist.all_to_all_single(o2, torch.ones(2 * n)))
        outs = [torch.zeros(4) for _ in range(n)]
        check("all_gather", outs, lambda: dist.all_gather(outs, torch.ones(4)))
        g = [torch.zeros(4) for _ in range(n)]
        if rank == 0:
            check("gather", g, lambda: dist.gather(torch.ones(4), g, dst=0))
        else:
            dist.gather(torch.ones(4), None, dst=0)
        check("reduce_scatter", [o], lambda: dist.reduce_scatter(o, [torch.ones(4)] * n))
        check("reduce_scatter_tensor", [o], lambda: dist.reduce_scatter_tensor(o, torch.ones(4 * n)))
        a2a = [torch.zeros(4) for _ in range(n)]
        check("all_to_all", a2a, lambda: dist.all_to_all(a2a, [torch.ones(4)] * n))
        ts = [torch.ones(4), torch.ones(2)]
        check("all_reduce_coalesced", ts, lambda: dist.all_reduce_coalesced(ts))
        flat = torch.zeros(4 * n)
        check("all_gather_into_tensor", [flat], lambda: dist.all_gather_into_tensor(flat, torch.ones(4)))
        return moved

    with pytest.warns(FutureWarning):  # reduce_scatter_tensor and all_reduce_coalesced are deprecated
        out = run(body, n=2)
    assert out[0] == GLOO_BUMPS
    assert out[1] == {k: v for k, v in GLOO_BUMPS.items() if k != "gather"}


# ---- cause 3: meshes and DTensor's plan caches per rank ------------------------------------------
def test_uneven_nested_shards_redistribute_with_each_ranks_own_plan():
    """DTensor's redistribution of uneven shards nested on a 2-D mesh, as in
    PyTorch's redistribution tests: the cached plan carries the rank's
    local shapes (rows 5 split 3 / 2, then again), so a plan cached for
    rank 0 fails on rank 2 unless their meshes differ."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    def body(rank: int, n: int) -> Any:
        mesh = init_device_mesh("cpu", (2, 2))
        results = []
        for rows in (5, 6, 7):
            full = torch.arange(rows * 8.0).reshape(rows, 8)
            dt = distribute_tensor(full, mesh, [Shard(0), Shard(0)])
            replicated = dt.redistribute(mesh, [Replicate(), Replicate()]).to_local()
            half = dt.redistribute(mesh, [Shard(0), Replicate()]).full_tensor()
            results.append((tuple(dt.to_local().shape), torch.equal(replicated, full), torch.equal(half, full)))
        return mesh, results

    out = run(body, n=4)
    meshes = [out[r][0] for r in range(4)]
    assert all(meshes[i] != meshes[j] for i in range(4) for j in range(4) if i != j)
    assert len({hash(m) for m in meshes}) == 4
    local_rows = {r: [s[0][0] for s in out[r][1]] for r in range(4)}
    assert local_rows == {0: [2, 2, 2], 1: [1, 1, 2], 2: [1, 2, 2], 3: [1, 1, 1]}
    assert all(ok_r and ok_h for r in range(4) for _, ok_r, ok_h in out[r][1])


# ---- cause 4: process-wide hook and handler tables ---------------------------------------------
def _tp_blocks(mesh: Any) -> nn.Module:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = nn.Sequential(MLP(), MLP())
    for block in model:
        parallelize_module(block, mesh, {"net1": ColwiseParallel(), "net2": RowwiseParallel()})
    return model


def test_module_tracker_sees_only_its_ranks_modules():
    """ModTracker (and CommDebugMode's tracker, FlopCounterMode's) hooks
    every module's forward through nn.Module's global hooks; here every
    rank is inside its tracker while the others run their forward (each
    block's all-reduce parks it). As PyTorch's module tracker tests do, the
    parents each module sees are compared with the hierarchy."""
    from torch.distributed._tools.mod_tracker import ModTracker
    from torch.distributed.device_mesh import init_device_mesh

    def body(rank: int, n: int) -> Any:
        model = _tp_blocks(init_device_mesh("cpu", (n,)))
        mine = {id(m) for m in model.modules()}
        seen: list[tuple[str, str, bool, list[str]]] = []
        mt = ModTracker()
        mt.register_user_hooks(
            pre_fw_hook=lambda m, i: seen.append(("pre", mt.get_known_fqn(m), id(m) in mine, sorted(mt.parents))),
            post_fw_hook=lambda m, i, o: seen.append(("post", mt.get_known_fqn(m), id(m) in mine, sorted(mt.parents))),
        )
        with mt:
            model(torch.randn(4, 8)).sum().backward()
        return seen

    out = run(body, n=2)
    expected = []
    for block in ("Sequential.0", "Sequential.1"):
        expected.append(("pre", block, True, sorted(["Global", "Sequential", block])))
        for leaf in ("net1", "relu", "net2"):
            inside = sorted(["Global", "Sequential", block, f"{block}.{leaf}"])
            expected.append(("pre", f"{block}.{leaf}", True, inside))
            expected.append(("post", f"{block}.{leaf}", True, inside))
        expected.append(("post", block, True, sorted(["Global", "Sequential", block])))
    expected = [("pre", "Sequential", True, ["Global", "Sequential"])] + expected
    expected.append(("post", "Sequential", True, ["Global", "Sequential"]))
    assert out[0] == expected
    assert out[1] == expected


GLOBAL_HOOK_HANDLES = textwrap.dedent(
    """
    import torch, torch.nn as nn
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook
    import kbthreads.torch as kbt

    calls = []
    outside = register_module_forward_pre_hook(lambda m, i: calls.append("outside"))

    def body(rank):
        mine = register_module_forward_pre_hook(lambda m, i: calls.append(rank))
        register_module_forward_pre_hook(lambda m, i: calls.append(f"left by {rank}"))
        steps = register_optimizer_step_post_hook(lambda o, a, k: calls.append(f"step {rank}"))
        lin = nn.Linear(2, 2)
        lin(torch.ones(2)).sum().backward()
        torch.optim.SGD(lin.parameters(), lr=0.1).step()
        mine.remove()
        steps.remove()

    kbt.spawn(body, nprocs=2)
    print(calls)
    outside.remove()
    calls.clear()
    nn.Linear(2, 2)(torch.ones(2))
    print(calls, len(nn.modules.module._global_forward_pre_hooks))
    """
)


def test_global_module_hooks_registered_in_ranks_and_outside():
    """A global hook (a module's, an optimizer's) registered in a rank runs
    for that rank only; one registered before the first spawn runs for
    every rank, and its handle, made before kbthreads kept the tables per
    rank, still removes it; one a rank leaves registered goes with the rank
    (a child: the tables are replaced once per process)."""
    r = subprocess.run(
        [sys.executable, "-c", GLOBAL_HOOK_HANDLES], capture_output=True, text=True, timeout=300, env=child_env()
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.split("\n")[:2]
    assert lines == ["['outside', 0, 'left by 0', 'step 0', 'outside', 1, 'left by 1', 'step 1']", "[] 0"]


def test_comm_debug_mode_counts_each_ranks_collectives_per_module():
    """CommDebugMode, as in PyTorch's tests of its module tracing: each
    rank's collectives go to its own modules: in forward each block's
    row-wise output all-reduce, in backward the column-wise input gradient
    of the second block (the first block's input needs none)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.debug import CommDebugMode

    funcol = torch.ops.c10d_functional

    def body(rank: int, n: int) -> Any:
        model = _tp_blocks(init_device_mesh("cpu", (n,)))
        comm = CommDebugMode()
        with comm:
            model(torch.randn(4, 8)).sum().backward()
        counts = comm.comm_module_counts
        per_module = {
            m: (counts[m]["forward"].get(funcol.all_reduce, 0), counts[m]["backward"].get(funcol.all_reduce, 0))
            for m in counts
        }
        parents = {m: sorted(p) for m, p in comm.advanced_module_tracker.module_parents_dict.items()}
        return comm.get_total_counts(), per_module, parents

    out = run(body, n=2)
    assert out[0] == out[1]
    total, per_module, parents = out[0]
    assert total == 3
    assert per_module == {
        "Global": (2, 1),
        "Sequential": (2, 1),
        "Sequential.0": (1, 0),
        "Sequential.0.net2": (1, 0),
        "Sequential.1": (1, 1),
        "Sequential.1.net1": (0, 1),
        "Sequential.1.net2": (1, 0),
    }
    assert parents["Sequential.1.net2"] == ["Global", "Sequential", "Sequential.1", "Sequential.1.net2"]
    assert len(parents) == 10  # Global, Sequential, two blocks and their three layers each


def test_loss_parallel_on_every_rank_at_once():
    """loss_parallel(), as PyTorch's tensor-parallel loss tests use it:
    entered by every rank, whose log-softmax all-reduces park it inside,
    and left by each rank in turn; the loss and the gradient equal the
    unsharded ones."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor.parallel import loss_parallel

    def body(rank: int, n: int) -> Any:
        mesh = init_device_mesh("cpu", (n,))
        g = torch.Generator().manual_seed(7)
        logits = torch.randn(4, 6 * n, generator=g, requires_grad=True)
        target = torch.randint(0, 6 * n, (4,), generator=g)
        ref = F.cross_entropy(logits, target)
        ref.backward()
        sharded = distribute_tensor(logits.detach(), mesh, [Shard(1)]).requires_grad_()
        with loss_parallel():
            loss = F.cross_entropy(sharded, target)
            loss.backward()
        return (
            torch.allclose(loss.full_tensor(), ref),
            torch.allclose(sharded.grad.full_tensor(), logits.grad),
        )

    out = run(body, n=3)
    assert out == {r: (True, True) for r in range(3)}


LOSS_PARALLEL_FIRST_IMPORT = textwrap.dedent(
    """
    import sys, torch, torch.distributed as dist
    import torch.nn.functional as F
    import kbthreads.torch as kbt

    assert "torch.distributed.tensor._api" not in sys.modules
    out = {}

    def body(rank):
        dist.init_process_group("gloo")
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        from torch.distributed.tensor.parallel import loss_parallel

        mesh = init_device_mesh("cpu", (2,))
        g = torch.Generator().manual_seed(7)
        logits = torch.randn(4, 12, generator=g, requires_grad=True)
        target = torch.randint(0, 12, (4,), generator=g)
        ref = F.cross_entropy(logits, target)
        ref.backward()
        sharded = distribute_tensor(logits.detach(), mesh, [Shard(1)]).requires_grad_()
        with loss_parallel():
            loss = F.cross_entropy(sharded, target)
            loss.backward()
        out[rank] = [torch.allclose(loss.full_tensor(), ref), torch.allclose(sharded.grad.full_tensor(), logits.grad)]

    kbt.spawn(body, nprocs=2)
    from torch.distributed.tensor import DTensor

    print(out, "_custom_op_handlers" in vars(DTensor._op_dispatcher))
    """
)


def test_loss_parallel_when_the_ranks_import_dtensor():
    """The same, with DTensor imported for the first time inside the ranks
    (a child: this process imported it already); after the spawn the
    dispatcher's table is the process's again."""
    r = subprocess.run(
        [sys.executable, "-c", LOSS_PARALLEL_FIRST_IMPORT], capture_output=True, text=True, timeout=300, env=child_env()
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "{0: [True, True], 1: [True, True]} True"


# ---- cause 5: PyTorch's fake group in a rank ----------------------------------------------------
def test_fake_group_in_a_rank_has_the_rank_and_size_it_asked_for():
    """PyTorch's fake-group tests make a group of their own: one rank of a
    larger world, whose collectives communicate nothing."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    out: dict[int, Any] = {}

    def rank_main(rank: int) -> None:
        dist.init_process_group("fake", rank=rank + 5, world_size=8, store=FakeStore())
        t = torch.full((3,), float(rank))
        dist.all_reduce(t)
        mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
        out[rank] = [dist.get_rank(), dist.get_world_size(), dist.get_backend(), t.tolist()]
        out[rank] += [list(mesh.get_coordinate() or ()), mesh["tp"].size()]
        dist.destroy_process_group()
        dist.init_process_group("gloo")  # then a real group, with a fake subgroup beside it
        sub = dist.new_group([0, 1], backend="fake")
        s = torch.ones(2)
        dist.all_reduce(s)
        out[rank] += [dist.get_backend(sub), sub.size(), dist.get_backend(), s.tolist()]
        dist.destroy_process_group()

    kbt.spawn(rank_main, nprocs=2)
    assert out[0] == [5, 8, "fake", [0.0] * 3, [1, 1], 4, "fake", 2, "kbthreads", [2.0, 2.0]]
    assert out[1] == [6, 8, "fake", [1.0] * 3, [1, 2], 4, "fake", 2, "kbthreads", [2.0, 2.0]]


# ---- cause 6: a rank's thread state deleted after torch work ----------------------------------
NESTED_FSDP = textwrap.dedent(
    """
    import torch, torch.nn as nn, torch.distributed as dist
    import kbthreads.torch as kbt
    from torch.distributed.fsdp import fully_shard

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(8, 8)
            self.out_proj = nn.Linear(8, 8)
            self.register_buffer("buffer", torch.randn(8))
        def forward(self, x):
            return torch.relu(self.out_proj(torch.relu(self.in_proj(x)))) + self.buffer

    def body(rank):
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        inp = torch.randn(2, 8)
        for reshard_after_forward in (True, False, 2):  # one group, the root only
            model = MLP()
            fully_shard(model, reshard_after_forward=reshard_after_forward)
            model(inp).sum().backward()
        for reshard_after_forward in (True, False, 2):  # nested groups
            model = MLP()
            fully_shard(model.in_proj, reshard_after_forward=reshard_after_forward)
            fully_shard(model.out_proj, reshard_after_forward=reshard_after_forward)
            fully_shard(model, reshard_after_forward=reshard_after_forward)
            model(inp).sum().backward()

    torch.set_num_threads(1)
    for _ in range(3):
        kbt.spawn(body, nprocs=4)
    print("ranks returned")
    """
)


def test_ranks_return_after_nested_fully_shard_and_backward():
    """FSDP2's registered-parameter tests (nested fully_shard, a backward
    pass, the rank returns with its models alive), run in a child so that
    a crash fails this test. It crashed in every run when PyGILState_Release
    deleted a rank's thread state a second time (see _accel_spawn.c)."""
    r = subprocess.run(
        [sys.executable, "-c", NESTED_FSDP],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(PYTHONFAULTHANDLER="1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ranks returned")
    assert "Fatal Python error" not in r.stderr


# The smallest program that reached the crash: a rank's thread-local value
# holds a view whose base only C++ still holds; freeing it takes the GIL
# through pybind11 while the rank's thread state is being deleted.
TEARDOWN = textwrap.dedent(
    """
    import threading, torch, kbthreads
    local = threading.local()

    def body(rank):
        base = torch.randn(8, requires_grad=True).clone()
        local.view = base[:4]
        del base

    kbthreads.spawn(body, nprocs=2)
    print("ranks returned")
    """
)


def test_rank_teardown_with_torch_state_under_faulthandler():
    r = subprocess.run(
        [sys.executable, "-c", TEARDOWN],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(PYTHONFAULTHANDLER="1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ranks returned"


# A Valgrind error whose stack passes through the binding's rank teardown or
# CPython's thread-state deletion.
_TEARDOWN_FRAMES = re.compile(r"rank_entry|rank_state_free|tstate_delete_common|PyThreadState_|PyGILState_")


def _valgrind_errors(log: str) -> list[str]:
    """Valgrind's error records (the text from an error's headline to the
    blank line after its stack)."""
    records, current = [], []
    for line in log.splitlines():
        body = re.sub(r"^==\d+== ?", "", line)
        if not body.strip():
            if current:
                records.append("\n".join(current))
            current = []
        elif current or re.match(r"(Invalid|Conditional|Use of|Syscall param|Mismatched|Source and)", body):
            current.append(body)
    if current:
        records.append("\n".join(current))
    return records


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_rank_teardown_under_valgrind_memcheck():
    """The teardown of rank threads that leave torch objects behind, under
    memcheck: no invalid read, write or free in the binding's rank entry or
    CPython's deletion of the rank's thread state. Python's allocator is
    the system's (PYTHONMALLOC=malloc), so memcheck sees every block of the
    thread states; what the dynamic loader does on its own is suppressed
    (valgrind-python-torch.supp says why, entry by entry). Slow: torch is
    imported under Valgrind (about a minute on a quiet 2-CPU machine)."""
    r = subprocess.run(
        [
            "valgrind",
            "--error-exitcode=99",
            "--leak-check=no",
            "--track-fds=no",
            "--fair-sched=yes",  # rank threads hand the baton over by futex: fair scheduling keeps it quick
            "--undef-value-errors=no",  # addressing errors only (what a double free gives): about 3x faster
            f"--suppressions={SUPPRESSIONS}",
            sys.executable,
            "-c",
            TEARDOWN,
        ],
        capture_output=True,
        text=True,
        timeout=3000,
        env=child_env(PYTHONMALLOC="malloc", PYTHONFAULTHANDLER="1"),
    )
    teardown = [e for e in _valgrind_errors(r.stderr) if _TEARDOWN_FRAMES.search(e)]
    assert teardown == [], "\n\n".join(teardown)[:6000]
    assert r.stdout.strip() == "ranks returned", r.stderr[-3000:]
    assert r.returncode in (0, 99), r.stderr[-3000:]  # 99: errors elsewhere (none in the teardown, above)


def test_valgrind_error_records_are_read_whole():
    """The reader of Valgrind's log the test above relies on."""
    log = "\n".join(
        [
            "==7== Invalid read of size 8",
            "==7==    at 0x1: tstate_delete_common (pystate.c:1082)",
            "==7==    by 0x2: rank_entry (_accel_spawn.c:84)",
            "==7== ",
            "==7== Conditional jump or move depends on uninitialised value(s)",
            "==7==    at 0x3: strncmp (strcmp-sse2.S:162)",
            "==7== ",
        ]
    )
    errors = _valgrind_errors(log)
    assert len(errors) == 2
    assert [bool(_TEARDOWN_FRAMES.search(e)) for e in errors] == [True, False]
