# SPDX-License-Identifier: MIT
"""Collectives of tensors that hold no values: fake tensors, each rank's
own FakeTensorMode's, and meta tensors. Every collective kind takes them
with the checks it makes of real tensors (shapes, dtypes, matching calls),
leaves its outputs in the rank's own mode or on meta without reading or
writing a value, moves version counters as gloo does, and reaches the
engine priced by the same sizes as the same call of real tensors. The bad
inputs: one call mixing kinds of tensors, members that disagree, and a
program reading a meta tensor's value. And FSDP2 on fake tensors at 8 ranks
makes the collectives, bytes and simulated time of its real run."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch_helpers import Recorder, tensors_of  # noqa: E402

import kbthreads  # noqa: E402
import kbthreads.torch as kbt  # noqa: E402
from kbthreads.torch._tensors import is_abstract  # noqa: E402

N = 4
DATA = ["real", "fake", "meta"]


def run(body: Callable[[int, Callable[..., Any]], Any], data: str, n: int = N) -> tuple[dict[int, Any], list[Any]]:
    """body(rank, make) on n ranks with tensors of kind data: what each rank
    returned and what the engine saw."""
    out: dict[int, Any] = {}
    rec = Recorder()

    def rank_main(rank: int) -> None:
        dist.init_process_group("gloo")
        try:
            with tensors_of(data) as make:
                out[rank] = body(rank, make)
        finally:
            dist.destroy_process_group()

    kbt.spawn(rank_main, nprocs=n, context=kbthreads.Context(engine=rec))
    return out, rec.seen


def failure(body: Callable[[int, Callable[..., Any]], Any], data: str) -> str:
    """Every rank's error, when body on tensors of kind data fails the spawn."""
    with pytest.raises(kbthreads.SpawnException) as e:
        run(body, data)
    return "\n".join(f"rank {r}: {err}" for r, err in sorted(e.value.errors.items()))


def described(t: Any) -> tuple[Any, ...]:
    """What a tensor is, besides its values: kind, shape, dtype."""
    kind = "meta" if t.is_meta else ("fake" if is_abstract(t) else "real")
    return (kind, tuple(t.shape), t.dtype)


def test_is_abstract_tells_meta_and_fake_tensors_from_real_ones() -> None:
    with FakeTensorMode():
        fake = torch.ones(2)
    assert (is_abstract(torch.ones(2)), is_abstract(torch.ones(2, device="meta")), is_abstract(fake)) == (
        False,
        True,
        True,
    )


def test_outside_kbthreads_the_functional_collectives_keep_pytorchs_shapes() -> None:
    """Once kbthreads registered its shape functions (at its first group),
    PyTorch's own fake group on one rank, in a process of its own, still
    gets PyTorch's output shapes from each functional collective."""
    import subprocess
    import sys

    from torch_helpers import child_env

    code = """
import torch, torch.distributed as dist
import kbthreads.torch as kbt
import torch.distributed._functional_collectives as funcol
import torch.testing._internal.distributed.fake_pg
from torch._subclasses.fake_tensor import FakeTensorMode

def body(rank):
    dist.init_process_group("gloo")
    dist.destroy_process_group()

kbt.spawn(body, nprocs=1)  # the first kbthreads group registers the shape functions
dist.init_process_group("fake", rank=0, world_size=4, store=dist.HashStore())
g = dist.group.WORLD
with FakeTensorMode():
    x = torch.ones(8, 3)
    outs = [funcol.all_reduce(x, "sum", g), funcol.all_gather_tensor(x, 0, g),
            funcol.reduce_scatter_tensor(x, "sum", 0, g), funcol.all_to_all_single(x, [1, 2, 3, 2], [2] * 4, g)]
    print([tuple(funcol.wait_tensor(t).shape) for t in outs])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[(8, 3), (32, 3), (2, 3), (8, 3)]"


# ---- one body per collective kind: it returns the outputs it made ----------------------------------
def _all_reduce(rank: int, make: Callable[..., Any]) -> list[Any]:
    t = make(3, 5)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [t]


def _reduce(rank: int, make: Callable[..., Any]) -> list[Any]:
    t = make(6, dtype=torch.int64)
    dist.reduce(t, dst=2)
    return [t]


def _broadcast(rank: int, make: Callable[..., Any]) -> list[Any]:
    t = make(2, 2, dtype=torch.float64)
    dist.broadcast(t, src=1)
    return [t]


def _all_gather(rank: int, make: Callable[..., Any]) -> list[Any]:
    outs = [make(3) for _ in range(N)]
    dist.all_gather(outs, make(3))
    return outs


def _all_gather_into_tensor(rank: int, make: Callable[..., Any]) -> list[Any]:
    out = make(N * 2, 3)
    dist.all_gather_into_tensor(out, make(2, 3))
    return [out]


def _gather(rank: int, make: Callable[..., Any]) -> list[Any]:
    outs = [make(4) for _ in range(N)] if rank == 0 else None
    dist.gather(make(4), outs, dst=0)
    return outs or []


def _scatter(rank: int, make: Callable[..., Any]) -> list[Any]:
    out = make(5)
    dist.scatter(out, [make(5) for _ in range(N)] if rank == 3 else None, src=3)
    return [out]


def _reduce_scatter(rank: int, make: Callable[..., Any]) -> list[Any]:
    out = make(2)
    dist.reduce_scatter(out, [make(2) for _ in range(N)])
    return [out]


def _reduce_scatter_tensor(rank: int, make: Callable[..., Any]) -> list[Any]:
    out = make(3, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, make(N * 3, dtype=torch.bfloat16), op=dist.ReduceOp.AVG)
    return [out]


def _all_to_all(rank: int, make: Callable[..., Any]) -> list[Any]:
    outs = [make(j + 1) for j in range(N)]
    dist.all_to_all(outs, [make(rank + 1) for _ in range(N)])
    return outs


def _all_to_all_single(rank: int, make: Callable[..., Any]) -> list[Any]:
    out = make(N * 2, 3)
    dist.all_to_all_single(out, make(N * 2, 3))
    return [out]


def _barrier(rank: int, make: Callable[..., Any]) -> list[Any]:
    dist.barrier()
    return []


KINDS = {
    "all_reduce": _all_reduce,
    "reduce": _reduce,
    "broadcast": _broadcast,
    "all_gather": _all_gather,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "gather": _gather,
    "scatter": _scatter,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "all_to_all": _all_to_all,
    "all_to_all_single": _all_to_all_single,
    "barrier": _barrier,
}


def _functional(rank: int, make: Callable[..., Any]) -> list[Any]:
    """PyTorch's functional collectives (what DTensor calls), each waited."""
    import torch.distributed._functional_collectives as funcol

    world = dist.group.WORLD
    assert world is not None
    issued = [
        funcol.all_reduce(make(4, 2), "sum", world),
        funcol.all_gather_tensor(make(2, 3), 0, world),
        funcol.reduce_scatter_tensor(make(N * 2), "avg", 0, world),
        funcol.all_to_all_single(make(N * 2, 3), None, None, world),
        funcol.broadcast(make(3), 1, world),
    ]
    return [funcol.wait_tensor(t) for t in issued]


@pytest.mark.parametrize("data", ["fake", "meta"])
def test_functional_collectives_on_abstract_tensors_reach_the_group_as_on_real_ones(data: str) -> None:
    real_out, real_seen = run(_functional, "real")
    out, seen = run(_functional, data)
    assert [c.kind for c in real_seen] == [
        "all_reduce",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "broadcast",
    ]
    assert seen == real_seen
    for r in range(N):
        assert [described(t) for t in out[r]] == [(data, *described(t)[1:]) for t in real_out[r]]


@pytest.mark.parametrize("data", ["fake", "meta"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_collective_takes_abstract_tensors_as_real_ones_priced_by_their_sizes(kind: str, data: str) -> None:
    real_out, real_seen = run(KINDS[kind], "real")
    out, seen = run(KINDS[kind], data)
    # the engine sees the same collectives, priced by the same sizes
    assert [c.kind for c in seen] == [kind]
    assert seen == real_seen
    # each output keeps its shape and dtype, and holds no values still
    for r in range(N):
        assert [described(t) for t in out[r]] == [(data, *described(t)[1:]) for t in real_out[r]]


def test_fake_outputs_stay_in_each_ranks_own_mode() -> None:
    def body(rank: int, make: Callable[..., Any]) -> bool:
        mode = FakeTensorMode()
        with mode:
            t = torch.ones(4)
            out = torch.empty(N * 4)
        dist.all_reduce(t)
        dist.all_gather_into_tensor(out, t)
        return bool(t.fake_mode is mode and out.fake_mode is mode)

    out, seen = run(body, "real")
    assert out == {r: True for r in range(N)}
    assert [c.kind for c in seen] == ["all_reduce", "all_gather_into_tensor"]


@pytest.mark.parametrize("data", DATA)
def test_version_counters_move_as_under_gloo_whatever_the_tensors_hold(data: str) -> None:
    def body(rank: int, make: Callable[..., Any]) -> tuple[int, int]:
        t, out = make(2), make(N * 2)
        dist.all_reduce(t)  # gloo moves nothing
        dist.all_gather_into_tensor(out, t)  # gloo moves the output's counter by 2
        return (t._version, out._version)

    out, _ = run(body, data)
    assert out == {r: (0, 2) for r in range(N)}


@pytest.mark.parametrize("data", ["fake", "meta"])
def test_a_shape_mismatch_of_abstract_tensors_is_reported_as_for_real_ones(data: str) -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        dist.all_reduce(make(3 if rank == 1 else 2))

    msg = failure(body, data)
    assert "the calls differ in shape" in msg
    assert f"all_reduce({data} float32, [3], op=SUM)" in msg


def test_a_dtype_mismatch_of_fake_tensors_is_reported() -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        dist.broadcast(make(2, dtype=torch.float64 if rank == 2 else torch.float32), src=0)

    msg = failure(body, "fake")
    assert "the calls differ in dtype" in msg


def test_an_abstract_split_mismatch_of_all_to_all_single_is_reported() -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        splits = [2, 0, 1, 1] if rank == 0 else [1, 1, 1, 1]
        dist.all_to_all_single(make(4), make(4), output_split_sizes=splits)

    msg = failure(body, "meta")
    assert "rank 0 sends 1 rows to rank 0, which expects 2" in msg


REAL_INPUT = torch.zeros(2)  # a tensor with values, made before any rank enters a FakeTensorMode


@pytest.mark.parametrize("data", ["fake", "meta"])
def test_a_call_mixing_real_and_abstract_tensors_is_refused(data: str) -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        dist.all_gather_into_tensor(make(N * 2), REAL_INPUT)

    msg = failure(body, data)
    assert f"all_gather_into_tensor mixes real and {data} tensors in one call" in msg


def test_members_that_disagree_on_fake_or_real_are_a_mismatch() -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        if rank == 1:
            with FakeTensorMode():
                t = torch.ones(2)
        else:
            t = torch.ones(2)
        dist.all_reduce(t)

    msg = failure(body, "real")
    assert "the calls differ in fake, meta or real tensors" in msg
    assert "rank 1: all_reduce(fake float32, [2], op=SUM)" in msg
    assert "rank 0: all_reduce(float32, [2], op=SUM)" in msg


def test_reading_a_meta_result_is_pytorchs_error_not_a_hang() -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        t = make(1)
        dist.all_reduce(t)
        t.item()

    msg = failure(body, "meta")
    assert "Tensor.item() cannot be called on meta tensors" in msg


# ---- whole programs: fake against real at 8 ranks ----------------------------------------------------
def _mlp() -> torch.nn.Sequential:
    """The programs' model: a two-layer MLP, the same weights on every rank."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))


def _two_sgd_steps(model: torch.nn.Module) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        model(torch.randn(8, 16)).sum().backward()
        opt.step()
        opt.zero_grad()


def _fsdp2_training(data: str) -> Callable[[int], None]:
    """Two steps of a two-layer MLP under FSDP2 (fully_shard per layer and
    the root), its tensors real or fake (the mesh made before the mode, as
    with PyTorch's own fake group: a mesh reads its ranks' values)."""

    def body(rank: int) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        dist.init_process_group("gloo")
        mesh = init_device_mesh("cpu", (8,))
        with FakeTensorMode() if data == "fake" else contextlib.nullcontext():
            model = _mlp()
            for layer in (model[0], model[2]):
                fully_shard(layer, mesh=mesh)
            fully_shard(model, mesh=mesh)
            _two_sgd_steps(model)
        dist.destroy_process_group()

    return body


def _tp_training(data: str) -> Callable[[int], None]:
    """Two steps of a two-layer MLP under tensor parallelism (DTensor:
    ColwiseParallel then RowwiseParallel), its tensors real or fake (the
    mesh made before the mode)."""

    def body(rank: int) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        dist.init_process_group("gloo")
        mesh = init_device_mesh("cpu", (8,))
        with FakeTensorMode() if data == "fake" else contextlib.nullcontext():
            model = _mlp()
            parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
            _two_sgd_steps(model)
        dist.destroy_process_group()

    return body


def _fsdp2_tp_training(data: str) -> Callable[[int], None]:
    """Two steps of the MLP on a 2 x 4 mesh: tensor parallel within 4 ranks,
    FSDP2 across 2. fully_shard runs outside the FakeTensorMode: on
    parameters that are DTensors it makes a mesh of the two (its ranks a
    tensor cut from the root mesh's), and a FakeTensorMode refuses that op
    on a real tensor (PyTorch's fake group fails the same way)."""

    def body(rank: int) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        dist.init_process_group("gloo")
        mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
        dp, tp = mesh["dp"], mesh["tp"]
        mode = FakeTensorMode() if data == "fake" else contextlib.nullcontext()
        with mode:
            model = _mlp()
            parallelize_module(model, tp, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        fully_shard(model, mesh=dp)
        with mode:
            _two_sgd_steps(model)
        dist.destroy_process_group()

    return body


def _fake_against_real(program: Callable[[str], Callable[[int], None]], device_flops: float | None) -> Any:
    """program's collectives (count and bytes per kind) and simulated time
    at 8 ranks, on fake tensors and on real ones."""
    runs = {}
    for data in ("real", "fake"):
        sim = kbt.spawn(program(data), nprocs=8, network=kbt.Network(5e-6, 1e9), device_flops=device_flops)
        assert isinstance(sim, kbt.SimRun)
        runs[data] = (sim.summary()["collectives"], sim.time)
    return runs


@pytest.mark.parametrize("device_flops", [None, 1e9])
def test_fsdp2_on_fake_tensors_at_8_ranks_makes_the_collectives_bytes_and_time_of_its_real_run(
    device_flops: float | None,
) -> None:
    runs = _fake_against_real(_fsdp2_training, device_flops)
    collectives, time = runs["real"]
    assert set(collectives) == {"all_gather_into_tensor", "reduce_scatter_tensor"}
    assert runs["fake"] == (collectives, time)


@pytest.mark.parametrize("device_flops", [None, 1e9])
def test_tensor_parallelism_on_fake_tensors_at_8_ranks_makes_the_collectives_bytes_and_time_of_its_real_run(
    device_flops: float | None,
) -> None:
    runs = _fake_against_real(_tp_training, device_flops)
    collectives, time = runs["real"]
    assert collectives["all_reduce"]["count"] == 2  # RowwiseParallel's output, one per step: functional
    assert runs["fake"] == (collectives, time)


def test_fsdp2_with_tensor_parallelism_on_fake_tensors_at_8_ranks_matches_its_real_run() -> None:
    runs = _fake_against_real(_fsdp2_tp_training, 1e9)
    collectives, time = runs["real"]
    assert {"all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"} <= set(collectives)
    assert runs["fake"] == (collectives, time)


@pytest.mark.parametrize("data", ["fake", "meta"])
def test_a_functional_collective_never_waited_is_let_go_when_its_rank_ends(data: str) -> None:
    """A rank that never waits its functional collective (or fails first)
    leaves nothing behind: its output is freed with the rank's groups."""
    import gc
    import weakref

    def body(rank: int, make: Callable[..., Any]) -> Any:
        world = dist.group.WORLD
        assert world is not None
        out = torch.ops._c10d_functional.all_reduce(make(4, 2), "sum", world.group_name)
        return weakref.ref(out)

    out, seen = run(body, data)
    assert [c.kind for c in seen] == ["all_reduce"]
    gc.collect()
    assert [ref() is None for ref in out.values()] == [True] * N
