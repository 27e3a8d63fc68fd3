# SPDX-License-Identifier: MIT
"""kbthreads.torch.spawn and init_process_group: every rank its own
torch.distributed, served by kbthreads whatever CPU backend name it asks
for, with no socket opened; the caller's torch.distributed untouched."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

# kbthreads.torch needs PyTorch 2.x: the test venv has it (make test); an interpreter
# without it (make test-pythons, Debian's 1.13) skips these
torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

import kbthreads  # noqa: E402
import kbthreads.torch as kbt  # noqa: E402
from torch_helpers import child_env, run  # noqa: E402


@pytest.mark.parametrize("backend", ["gloo", None, "cpu:gloo", "kbthreads", "cpu:gloo,cuda:nccl"])
def test_every_cpu_backend_name_gives_each_rank_a_kbthreads_group(backend):
    out = run(lambda r, n: (dist.get_rank(), dist.get_world_size(), dist.get_backend()), backend=backend)
    assert out == {r: (r, 4, "kbthreads") for r in range(4)}


def test_spawn_has_torch_multiprocessing_spawns_signature_and_passes_args():
    seen = []

    def f(rank, a, b):
        seen.append((rank, a, b, kbthreads.rank(), threading.current_thread().name))

    assert kbt.spawn(f, (1, "x"), 3, True, False, "spawn") is None
    assert seen == [(r, 1, "x", r, f"kb-rank-{r}") for r in range(3)]


def test_join_false_returns_a_process_context_that_restores_torch_distributed():
    world = c10d._world
    out = {}

    def f(rank):
        dist.init_process_group("gloo")
        t = torch.ones(1)
        dist.all_reduce(t)
        out[rank] = t.item()

    pc = kbt.spawn(f, nprocs=2, join=False)
    while not pc.join(timeout=1.0):
        pass
    assert out == {0: 2.0, 1: 2.0}
    assert c10d._world is world


def test_init_method_env_vars_and_a_store_are_accepted_and_no_socket_is_opened(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "192.0.2.1")  # unroutable: a real rendezvous would hang
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.setenv("RANK", "7")  # process-wide; a rank's place comes from the spawn
    monkeypatch.setenv("WORLD_SIZE", "99")

    def refuse(*a, **k):
        raise AssertionError("a TCPStore was made")

    monkeypatch.setattr(dist, "TCPStore", refuse)
    monkeypatch.setattr(c10d, "TCPStore", refuse, raising=False)

    def sockets():
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
            except OSError:
                pass
        return n

    before = sockets()
    seen = {}

    def f(rank, how):
        if how == "env":
            dist.init_process_group("gloo", init_method="env://")
        elif how == "tcp":
            dist.init_process_group("gloo", init_method="tcp://192.0.2.1:1", rank=rank, world_size=3)
        else:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=rank, world_size=3)
        t = torch.ones(1)
        dist.all_reduce(t)
        seen[(how, rank)] = (t.item(), sockets())
        dist.destroy_process_group()

    for how in ("env", "tcp", "store"):
        kbt.spawn(f, (how,), nprocs=3)
    assert seen == {(h, r): (3.0, before) for h in ("env", "tcp", "store") for r in range(3)}


def test_each_rank_sees_its_own_groups_and_subgroups():
    def body(r, n):
        evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
        mine = evens if r % 2 == 0 else odds
        other = odds if r % 2 == 0 else evens
        return (dist.is_initialized(), dist.get_rank(mine), dist.get_world_size(mine),
                other == dist.GroupMember.NON_GROUP_MEMBER, dist.get_process_group_ranks(mine))

    out = run(body)
    assert out == {0: (True, 0, 2, True, [0, 2]), 1: (True, 0, 2, True, [1, 3]),
                   2: (True, 1, 2, True, [0, 2]), 3: (True, 1, 2, True, [1, 3])}


def test_the_callers_torch_distributed_is_as_it_was_during_and_after_the_spawn():
    world = c10d._world
    rendezvous = c10d.rendezvous
    during = []

    def f(rank):
        dist.init_process_group("gloo")
        during.append(dist.is_initialized())

    def watcher():  # another thread of the process, while ranks hold groups
        during.append(("other thread", dist.is_initialized()))

    def f2(rank):
        f(rank)
        if rank == 1:
            t = threading.Thread(target=watcher)
            t.start()
            t.join()

    kbt.spawn(f2, nprocs=2)
    assert during == [True, True, ("other thread", False)]
    assert c10d._world is world and c10d.rendezvous is rendezvous
    assert not dist.is_initialized()


def test_destroy_and_initialise_again_inside_a_rank():
    def body(r, n):
        t = torch.ones(1)
        dist.all_reduce(t)
        dist.destroy_process_group()
        first = (t.item(), dist.is_initialized())
        dist.init_process_group("gloo")
        t = torch.full((1,), 2.0)
        dist.all_reduce(t)
        return first, t.item()

    assert run(body, n=3) == {r: ((3.0, False), 6.0) for r in range(3)}


def test_the_next_spawn_initialises_again_after_a_failed_one():
    def bad(rank):
        dist.init_process_group("gloo")
        if rank == 1:
            raise ValueError("boom")
        dist.all_reduce(torch.ones(1))

    with pytest.raises(kbthreads.SpawnException):
        kbt.spawn(bad, nprocs=3)
    assert run(lambda r, n: dist.get_world_size(), n=3) == {0: 3, 1: 3, 2: 3}


def test_kbthreads_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None; import kbthreads; kbthreads.spawn(lambda r: None, nprocs=2);"
            "\ntry:\n import kbthreads.torch\nexcept ImportError as e: print('ImportError', e)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60,
                       cwd="/")
    assert r.returncode == 0, r.stderr
    assert "ImportError kbthreads.torch needs PyTorch" in r.stdout


def test_a_context_with_an_engine_completes_every_collective_with_its_description():
    class Engine:
        def __init__(self):
            self.seen = []

        def wait(self, h, meta=None):
            self.seen.append(meta)

    eng = Engine()

    def f(rank):
        dist.init_process_group("gloo")
        dist.all_reduce(torch.ones(4, dtype=torch.float64), op=dist.ReduceOp.MAX)
        dist.broadcast(torch.ones(2), src=1)
        if rank == 0:
            dist.send(torch.ones(3), dst=2)
        if rank == 2:
            dist.recv(torch.empty(3), src=0)
        dist.destroy_process_group()

    kbt.spawn(f, nprocs=3, context=kbthreads.Context(engine=eng))
    ar, bc, p2p = eng.seen
    assert ar == kbt.Collective(kind="all_reduce", group="0", ranks=(0, 1, 2), seq=0, dtype="float64",
                                numel=(4, 4, 4), nbytes=(32, 32, 32), op="MAX")
    assert (bc.kind, bc.seq, bc.root, bc.nbytes) == ("broadcast", 1, 1, (0, 8, 0))
    assert (p2p.kind, p2p.root, p2p.peer, p2p.nbytes, p2p.dtype) == ("send", 0, 2, (12,), "float32")


def test_spawn_rejects_bad_arguments():
    with pytest.raises(TypeError):
        kbt.spawn(lambda r: None, nprocs=True)
    with pytest.raises(ValueError):
        kbt.spawn(lambda r: None, nprocs=0)
    with pytest.raises(TypeError):
        kbt.spawn(42, nprocs=1)
    with pytest.raises(TypeError):
        kbt.spawn(lambda r: None, args=[1], nprocs=1)
    with pytest.raises(TypeError):
        kbt.spawn(lambda r: None, nprocs=1, context=object())
