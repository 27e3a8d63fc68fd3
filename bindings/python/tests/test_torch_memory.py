# SPDX-License-Identifier: MIT
"""Per-rank memory in a simulated-time spawn (memory=True): each rank's
current, peak and final bytes of the tensors it allocated, by MemTracker's
categories, for real, fake and meta tensors; checked against PyTorch's own
MemTracker run in the same rank on the same program, and against sizes
computed by hand; the timeline's memory track."""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402

NET = kbt.Network(5e-6, 25e9)
CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries")
# MemTracker's names for them
_MT = {"Parameter": "parameters", "Buffer": "buffers", "Gradient": "gradients", "Optstate": "optimizer_state",
       "Activation": "activations", "Temp": "temporaries", "Other": "other", "Total": "total"}


def _mem_tracker_snapshot(mt, kind):
    out = dict.fromkeys(_MT.values(), 0)
    for per_device in mt.get_tracker_snapshot(kind).values():
        for k, v in per_device.items():
            out[_MT[getattr(k, "value", k)]] += v
    return out


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def _train_under_mem_tracker(rank, mode, device, seen):
    """Two training steps (parameters, a buffer, gradients, AdamW's state,
    activations, backward temporaries) inside MemTracker; its snapshots and
    the rank's own memory read at the same point."""
    from torch.distributed._tools.mem_tracker import MemTracker

    with mode():
        mt = MemTracker()
        with mt:
            d = 32 * (rank + 1)
            model = torch.nn.Sequential(
                torch.nn.Linear(d, 4 * d, device=device), torch.nn.GELU(),
                torch.nn.BatchNorm1d(4 * d, device=device), torch.nn.Linear(4 * d, d, device=device))
            opt = torch.optim.AdamW(model.parameters(), foreach=False)
            for _ in range(2):
                model(torch.randn(64, d, device=device)).sum().backward()
                opt.step()
                opt.zero_grad()
                mt.reset_mod_stats()  # MemTracker's way to run a module again
            seen[rank] = {"mem_tracker": {k: _mem_tracker_snapshot(mt, k) for k in ("current", "peak")},
                          "kbthreads": kbt.sim_memory()}


@pytest.mark.parametrize("mode, device", [(contextlib.nullcontext, None), (_fake_mode, None),
                                          (contextlib.nullcontext, "meta")], ids=["real", "fake", "meta"])
def test_each_ranks_memory_by_category_is_what_mem_tracker_finds_in_that_rank(mode, device):
    seen = {}
    kbt.spawn(_train_under_mem_tracker, args=(mode, device, seen), nprocs=2, network=NET, memory=True)
    assert seen.keys() == {0, 1}
    for rank, s in seen.items():
        for point in ("current", "peak"):
            theirs, ours = s["mem_tracker"][point], s["kbthreads"][point]
            assert theirs["other"] == 0
            assert {k: theirs[k] for k in (*CATEGORIES, "total")} == ours, (rank, point)
        assert all(s["kbthreads"]["peak"][c] > 0 for c in CATEGORIES)  # every category was exercised
    assert seen[0]["kbthreads"]["peak"]["total"] < seen[1]["kbthreads"]["peak"]["total"]


def _sgd_step(rank, seen):
    """A Linear(8, 4) and SGD with momentum: every size below by hand."""
    dist.init_process_group("gloo")
    layer = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    seen["built"] = kbt.sim_memory()["current"]
    layer(torch.ones(2, 8)).sum().backward()
    dist.all_reduce(layer.weight.grad)
    seen["backward"] = kbt.sim_memory()["current"]
    opt.step()
    seen["stepped"] = kbt.sim_memory()["current"]


def test_parameters_gradients_and_optimizer_state_against_a_hand_computation():
    seen = {}
    run = kbt.spawn(_sgd_step, args=(seen,), nprocs=1, network=NET, memory=True)
    params = 4 * (8 * 4 + 4)  # float32 weight and bias
    assert seen["built"] == {**dict.fromkeys(CATEGORIES, 0), "parameters": params, "total": params}
    assert seen["backward"]["gradients"] == params
    assert seen["stepped"]["optimizer_state"] == params  # one momentum buffer per parameter
    final = run.summary()["ranks"][0]["memory"]["final"]
    assert final["total"] == 0  # the rank's tensors died with it


def _allocate(rank, keep):
    big = torch.empty(1024 * (rank + 1))  # 4 KiB per rank number plus one
    keep.append(torch.empty(256))  # 1 KiB outlives the rank
    view = big[:10].view(2, 5)  # a view: no new storage
    seen = kbt.sim_memory()
    assert seen["current"]["total"] == 4 * 1024 * (rank + 1) + 1024
    del big, view
    assert kbt.sim_memory()["current"]["total"] == 1024


def test_a_rank_counts_its_own_storages_once_and_a_freed_one_stays_only_in_the_peak():
    keep = []
    run = kbt.spawn(_allocate, args=(keep,), nprocs=3, network=NET, memory=True)
    for rank, s in run.summary()["ranks"].items():
        assert s["memory"]["peak"]["total"] == 4 * 1024 * (rank + 1) + 1024
        assert s["memory"]["final"] == {**dict.fromkeys(CATEGORIES, 0), "activations": 1024, "total": 1024}


def _reduce_and_receive(rank):
    dist.init_process_group("gloo")
    t = torch.ones(1024)  # 4 KiB, the rank's only storage
    dist.all_reduce(t)
    if rank == 0:
        dist.send(t, 1)
    else:
        dist.recv(t, 0)
    dist.destroy_process_group()


def test_the_backends_copies_and_reductions_are_no_ranks_memory():
    run = kbt.spawn(_reduce_and_receive, nprocs=2, network=NET, memory=True)
    assert {r: s["memory"]["peak"]["total"] for r, s in run.summary()["ranks"].items()} == {0: 4096, 1: 4096}


def _two_phases(rank, seen=None):
    dist.init_process_group("gloo")
    x = torch.empty(1024)  # 4 KiB
    if seen is not None:
        seen.setdefault(rank, []).append(kbt.sim_memory()["current"]["activations"])
    dist.barrier()
    del x
    y = torch.empty(256)  # 1 KiB
    if seen is not None:
        seen[rank].append(kbt.sim_memory()["current"]["activations"])
    dist.barrier()
    del y


def test_the_timeline_has_a_memory_track_per_rank_at_its_events():
    seen = {}
    run = kbt.spawn(_two_phases, args=(seen,), nprocs=2, network=NET, memory=True)
    ev = run.timeline()["traceEvents"]
    for rank in (0, 1):
        points = [e["args"]["activations"] for e in ev if e.get("ph") == "C" and e["name"] == "memory"
                  and e["pid"] == rank]
        highs = [e["args"]["bytes"] for e in ev if e.get("ph") == "C" and e["name"] == "memory high-water"
                 and e["pid"] == rank]
        # points at the start, each barrier's arrival and wait, the rank's end, the spawn's end
        assert len(points) == 7 and points[0] == 0
        assert points[1] == seen[rank][0] >= 4096 and points[3] == seen[rank][1] >= 1024
        assert seen[rank][0] - seen[rank][1] == 4096 - 1024  # x freed, y made
        assert points[-1] == run.summary()["ranks"][rank]["memory"]["final"]["activations"]
        assert max(highs) == run.summary()["ranks"][rank]["memory"]["peak"]["total"]


def _dtensor_matmul(rank, seen):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2,))
    a = distribute_tensor(torch.randn(64, 32), mesh, [Shard(0)])
    b = distribute_tensor(torch.randn(32, 16), mesh, [Replicate()])
    if seen is None:  # a run without memory=True
        a @ b
        return
    before = kbt.sim_memory()["current"]["total"]
    c = a @ b
    seen[rank] = (kbt.sim_memory()["current"]["total"] - before, c.to_local().numel() * 4)


def test_memory_counts_a_dtensor_ops_local_result_and_leaves_its_flop_count_as_it_was():
    seen = {}
    with_memory = kbt.spawn(_dtensor_matmul, args=(seen,), nprocs=2, network=NET, device_flops=1e12, memory=True)
    without = kbt.spawn(_dtensor_matmul, args=(None,), nprocs=2, network=NET, device_flops=1e12)
    for rank in (0, 1):
        assert seen[rank][0] == seen[rank][1] > 0  # the local (32, 16) result's bytes
        assert with_memory.summary()["ranks"][rank]["flops"] == without.summary()["ranks"][rank]["flops"] > 0


def test_without_memory_the_summary_has_none():
    run = kbt.spawn(_two_phases, nprocs=2, network=NET)
    assert all("memory" not in s for s in run.summary()["ranks"].values())
    assert not [e for e in run.timeline()["traceEvents"] if e.get("ph") == "C"]


def test_the_printed_summary_has_a_memory_table():
    run = kbt.spawn(_two_phases, nprocs=2, network=NET, memory=True)
    text = run.format_summary()
    assert "memory MiB" in text and text.count(" peak ") == 2 and text.count(" final ") == 2


def _read_memory(rank):
    kbt.sim_memory()


def test_memory_without_a_network_and_sim_memory_without_memory_are_errors():
    with pytest.raises(ValueError, match="memory need network"):
        kbt.spawn(_read_memory, nprocs=1, memory=True)
    with pytest.raises(TypeError, match="memory must be True or False"):
        kbt.spawn(_read_memory, nprocs=1, network=NET, memory="yes")
    with pytest.raises(Exception, match="sim_memory: only inside a rank of a spawn with network=... and memory=True"):
        kbt.spawn(_read_memory, nprocs=1, network=NET)
    with pytest.raises(RuntimeError, match="sim_memory: only inside a rank"):
        kbt.sim_memory()


def test_the_launchers_memory_option_needs_a_network(capsys):
    from kbthreads.torch._launch_args import parse
    from kbthreads.torch.run import main

    assert parse(["--network", "latency=1us,bandwidth=1GB/s", "--memory", "t.py"]).simulation()["memory"] is True
    with pytest.raises(SystemExit) as e:
        main(["--memory", "t.py"])
    assert e.value.code == 2 and "--memory needs --network" in capsys.readouterr().err


def _fsdp2_sgd_step(rank, keep):
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo")
    lin = torch.nn.Linear(1024, 1024, bias=False)  # 4 MiB of parameters: 2 MiB per rank once sharded
    fully_shard(lin)  # (puts its sharded parameters in the module's table, no registration hook runs)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    lin(torch.ones(2, 1024)).sum().backward()
    opt.step()
    keep.append((lin, opt))  # held past the rank's end, so that its final memory shows them
    dist.destroy_process_group()


def test_fsdp2s_sharded_parameters_and_gradients_are_counted_as_such():
    keep = []
    run = kbt.spawn(_fsdp2_sgd_step, args=(keep,), nprocs=2, network=NET, memory=True)
    for s in run.summary()["ranks"].values():
        assert s["memory"]["final"]["parameters"] == 2 * 2**20
        assert s["memory"]["final"]["gradients"] == 2 * 2**20


def _to_empty_forward(rank, keep):
    with torch.device("meta"):
        lin = torch.nn.Linear(256, 256, bias=False)
    lin.to_empty(device="cpu")  # new parameters, set without the registration hook
    lin(torch.ones(1, 256))
    keep.append(lin)


def test_parameters_made_by_to_empty_are_parameters_once_their_module_runs():
    keep = []
    run = kbt.spawn(_to_empty_forward, args=(keep,), nprocs=1, network=NET, memory=True)
    assert run.summary()["ranks"][0]["memory"]["final"]["parameters"] == 256 * 256 * 4
