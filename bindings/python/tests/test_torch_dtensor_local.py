# SPDX-License-Identifier: MIT
"""An op on a DTensor is charged at each rank's local shards: the FLOPs,
the roofline's bytes and the memory of what the rank computes and holds,
not the DTensor's global shapes; the same under each rank's
FakeTensorMode; DTensor's sharding propagation (global shapes, on fake
tensors, cached per op) is never counted. Real threads, real DTensor on a
kbthreads mesh, tensor parallelism by parallelize_module."""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402

NET = kbt.Network(5e-6, 25e9)
B, D, H, O = 4, 16, 64, 8  # batch, input, hidden, output: a column- then a row-parallel Linear
FOUR = 4  # bytes of a float32


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(), torch.nn.Linear(H, O))


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def _mesh(tp):
    """The rank's mesh of tp ranks (made on real tensors: a mesh reads its
    ranks' values)."""
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    return init_device_mesh("cpu", (tp,))


def _tp_mlp(mesh):
    """The MLP with its first Linear column-parallel and its second
    row-parallel over the mesh."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    return parallelize_module(_mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


def _forward(rank, tp, mode, backward):
    mesh = _mesh(tp)
    with mode():
        model = _tp_mlp(mesh)
        y = model(torch.randn(B, D)).sum()
        if backward:
            y.backward()


def _tp_flops(tp, mode=contextlib.nullcontext, backward=False):
    run = kbt.spawn(_forward, args=(tp, mode, backward), nprocs=tp, network=NET, device_flops=1e12)
    return [s["flops"] for s in run.summary()["ranks"].values()]


def _unsplit_flops(backward):
    from torch.utils.flop_counter import FlopCounterMode

    model = _mlp()
    with FlopCounterMode(display=False) as m:
        y = model(torch.randn(B, D)).sum()
        if backward:
            y.backward()
    return m.get_total_flops()


@pytest.mark.parametrize("tp", [2, 4])
def test_each_tensor_parallel_ranks_flops_are_its_local_matmuls(tp):
    # the column-parallel Linear multiplies (B, D) by its (D, H/tp) shard,
    # the row-parallel one (B, H/tp) by its (H/tp, O) shard
    local = 2 * B * D * (H // tp) + 2 * B * (H // tp) * O
    got = _tp_flops(tp)
    assert got == [local] * tp
    assert sum(got) == _unsplit_flops(backward=False) == 2 * B * D * H + 2 * B * H * O


@pytest.mark.parametrize("tp", [2, 4])
def test_a_tensor_parallel_training_steps_flops_split_evenly_over_the_ranks(tp):
    got = _tp_flops(tp, backward=True)
    unsplit = _unsplit_flops(backward=True)
    assert got == [unsplit // tp] * tp and unsplit % tp == 0


@pytest.mark.parametrize("tp", [2, 4])
def test_under_each_ranks_fake_tensor_mode_the_flops_are_the_real_runs(tp):
    fake = _tp_flops(tp, _fake_mode, backward=True)
    assert fake == _tp_flops(tp, backward=True)
    assert fake[0] < _unsplit_flops(backward=True)


def _repeated_matmul(rank, tp, mode, seen):
    """A DTensor matmul three times: its sharding propagation runs the
    first time only (cached); the rank's clock at device_flops=1 grows by
    each one's FLOPs."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = _mesh(tp)
    with mode():
        a = distribute_tensor(torch.randn(8, 16), mesh, [Shard(0)])
        b = distribute_tensor(torch.randn(16, 32), mesh, [Replicate()])
        times = [kbt.sim_time()]
        for _ in range(3):
            a @ b
            times.append(kbt.sim_time())
        seen[rank] = [t1 - t0 for t0, t1 in zip(times, times[1:])]


@pytest.mark.parametrize("mode", [contextlib.nullcontext, _fake_mode], ids=["real", "fake"])
def test_a_repeated_dtensor_op_counts_the_same_each_time(mode):
    seen = {}
    kbt.spawn(_repeated_matmul, args=(2, mode, seen), nprocs=2, network=NET, device_flops=1.0)
    want = 2 * 4 * 16 * 32  # (4, 16) x (16, 32) on each rank
    assert seen == {r: [pytest.approx(want, rel=1e-12)] * 3 for r in range(2)}  # (the clock sums floats)


@pytest.mark.parametrize("mode", [contextlib.nullcontext, _fake_mode], ids=["real", "fake"])
def test_the_rooflines_bytes_of_a_dtensor_op_are_its_local_shards(mode):
    seen = {}
    kbt.spawn(_repeated_matmul, args=(2, mode, seen), nprocs=2, network=NET,
              compute="roofline", device_flops=1e30, device_bandwidth=1.0)
    # reads the (4, 16) and (16, 32) shards, writes the (4, 32) result; at 1 byte/s
    moved = FOUR * (4 * 16 + 16 * 32 + 4 * 32)
    assert seen == {r: [pytest.approx(moved, rel=1e-12)] * 3 for r in range(2)}


def _sharded_parameters(rank, tp, mode, seen):
    mesh = _mesh(tp)
    with mode():
        model = _tp_mlp(mesh)
        seen[rank] = (kbt.sim_memory()["current"]["parameters"],
                      sum(p.to_local().numel() * p.element_size() for p in model.parameters()))


@pytest.mark.parametrize("mode", [contextlib.nullcontext, _fake_mode], ids=["real", "fake"])
def test_a_sharded_parameters_memory_is_its_local_shard(mode):
    seen = {}
    kbt.spawn(_sharded_parameters, args=(2, mode, seen), nprocs=2, network=NET, memory=True)
    # column-parallel weight (H/2, D) and bias (H/2); row-parallel weight (O, H/2) and its whole bias (O)
    local = FOUR * (H // 2 * D + H // 2 + O * H // 2 + O)
    assert seen == {r: (local, local) for r in range(2)}


def _sharded_gradients(rank, tp, mode, seen):
    mesh = _mesh(tp)
    with mode():
        model = _tp_mlp(mesh)
        model(torch.randn(B, D)).sum().backward()
        seen[rank] = (kbt.sim_memory()["current"]["gradients"],
                      sum(p.grad.to_local().numel() * p.element_size() for p in model.parameters()))


@pytest.mark.parametrize("mode", [contextlib.nullcontext, _fake_mode], ids=["real", "fake"])
def test_a_sharded_parameters_gradient_memory_is_its_local_shard(mode):
    seen = {}
    kbt.spawn(_sharded_gradients, args=(2, mode, seen), nprocs=2, network=NET, memory=True)
    local = FOUR * (H // 2 * D + H // 2 + O * H // 2 + O)
    assert seen == {r: (local, local) for r in range(2)}


def _sharded_optimizer_state(rank, tp, mode, seen):
    mesh = _mesh(tp)
    with mode():
        model = _tp_mlp(mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model(torch.randn(B, D)).sum().backward()
        opt.step()
        seen[rank] = (kbt.sim_memory()["current"]["optimizer_state"],
                      sum(s["momentum_buffer"].to_local().numel() * FOUR for s in opt.state.values()))


@pytest.mark.parametrize("mode", [contextlib.nullcontext, _fake_mode], ids=["real", "fake"])
def test_a_sharded_parameters_optimizer_state_is_its_local_shard(mode):
    seen = {}
    kbt.spawn(_sharded_optimizer_state, args=(2, mode, seen), nprocs=2, network=NET, memory=True)
    local = FOUR * (H // 2 * D + H // 2 + O * H // 2 + O)  # one momentum per parameter
    assert seen == {r: (local, local) for r in range(2)}


def _first_matmul_memory(rank, tp, seen):
    """A DTensor matmul's first run (its sharding propagation then makes
    fake tensors of the global shapes) from local shards made in place."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = _mesh(tp)
    a = DTensor.from_local(torch.randn(32, 64), mesh, [Shard(0)], run_check=False)  # global (32 tp, 64)
    b = DTensor.from_local(torch.randn(64, 64), mesh, [Replicate()], run_check=False)
    before = kbt.sim_memory()
    c = a @ b
    seen[rank] = (before, kbt.sim_memory(), c.to_local().numel() * FOUR)


@pytest.mark.parametrize("device_flops", [None, 1e12], ids=["memory-only", "with-flops"])
def test_dtensors_sharding_propagation_is_no_ranks_memory(device_flops):
    seen = {}
    kbt.spawn(_first_matmul_memory, args=(4, seen), nprocs=4, network=NET, device_flops=device_flops, memory=True)
    for before, after, local_result in seen.values():
        assert before["peak"]["total"] <= before["current"]["total"] + local_result
        # the local (32, 64) result, not the global (128, 64) fakes of the propagation
        assert after["peak"]["total"] == after["current"]["total"] == before["current"]["total"] + local_result


def _matmul_inside_and_outside_uncounted(rank, seen):
    from kbthreads.torch._dtensor_ops import Uncounted

    x = torch.randn(32, 32)
    out = []
    for quiet in (True, False):
        t0, m0 = kbt.sim_time(), kbt.sim_memory()["current"]["total"]
        with Uncounted() if quiet else contextlib.nullcontext():
            y = x @ x
        out.append((kbt.sim_time() - t0, kbt.sim_memory()["current"]["total"] - m0))
        del y
    seen[rank] = out


def test_inside_uncounted_a_ranks_modes_count_neither_flops_nor_memory():
    # the context DTensor's sharding propagation runs in
    seen = {}
    kbt.spawn(_matmul_inside_and_outside_uncounted, args=(seen,), nprocs=2, network=NET, device_flops=1.0,
              memory=True)
    assert seen == {r: [(0.0, 0), (pytest.approx(2 * 32**3, rel=1e-12), 32 * 32 * FOUR)] for r in range(2)}


def test_dtensors_propagation_lock_is_left_as_found_when_the_spawn_ends():
    from kbthreads.torch import _compat

    import torch.distributed.tensor  # noqa: F401  (the lock's module)

    before = _compat.propagation_lock()
    first = _tp_flops(2)
    assert _compat.propagation_lock() is before
    assert _tp_flops(2) == first  # and guarded again in the next spawn
    assert _compat.propagation_lock() is before
