# SPDX-License-Identifier: MIT
"""Simulated time for torch.distributed programs: the network model's
durations against their closed forms, a DDP step against a hand-computed
schedule of buckets, overlap of async collectives, the timeline and summary,
determinism, bad parameters, and per-rank FLOP counting (right on kbthreads
ranks, wrong on greenlets, where the counting mode leaks between ranks)."""
from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys

import pytest

# kbthreads.torch needs PyTorch 2.x: the test venv has it (make test); an interpreter
# without it (make test-pythons, Debian's 1.13) skips these
torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import kbthreads  # noqa: E402
import kbthreads.torch as kbt  # noqa: E402

A, B = 5e-6, 25e9  # latency (s), bandwidth (B/s)


def meta(kind, ranks, nbytes, **kw):
    p = len(ranks)
    nb = nbytes if isinstance(nbytes, tuple) else (nbytes,) * p
    return kbt.Collective(kind=kind, group="0", ranks=tuple(ranks), seq=0, dtype="float32",
                          numel=tuple(n // 4 for n in nb), nbytes=nb, **kw)


def near(a, b):
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-18)


@pytest.mark.parametrize("p", [2, 3, 8, 64])
@pytest.mark.parametrize("n", [4, 1 << 20, 3 * (1 << 24)])
def test_each_algorithm_against_its_closed_form(p, n):
    ring, tree = kbt.Network(A, B), kbt.Network(A, B, allreduce="tree")
    r = list(range(p))
    lg = math.ceil(math.log2(p))
    assert near(ring.duration(meta("all_reduce", r, n)), 2 * (p - 1) * (A + n / p / B))
    assert near(tree.duration(meta("all_reduce", r, n)), 2 * lg * (A + n / B))
    assert near(ring.duration(meta("all_gather", r, n)), (p - 1) * (A + n / B))
    assert near(ring.duration(meta("all_gather_into_tensor", r, n)), (p - 1) * (A + n / B))
    assert near(ring.duration(meta("reduce_scatter_tensor", r, n)), (p - 1) * (A + n / p / B))
    root = (n,) + (0,) * (p - 1)
    assert near(ring.duration(meta("broadcast", r, root, root=0)), lg * (A + n / B))
    assert near(ring.duration(meta("reduce", r, n, root=0)), lg * (A + n / B))
    assert near(ring.duration(meta("gather", r, n, root=0)), (p - 1) * (A + n / B))
    assert near(ring.duration(meta("scatter", r, root, root=0)), (p - 1) * (A + n / p / B))
    assert near(ring.duration(meta("all_to_all_single", r, n)), (p - 1) * (A + n / p / B))
    assert near(ring.duration(meta("barrier", r, 0)), lg * A)
    send = kbt.Collective(kind="send", group="0", ranks=tuple(r), seq=0, dtype="float32", numel=(n // 4,),
                          nbytes=(n,), root=0, peer=p - 1)
    assert near(ring.duration(send), A + n / B)


def test_a_two_level_topology_against_a_hand_computation():
    # 8 ranks, 4 per node: 0-3 on node 0, 4-7 on node 1
    net = kbt.Network(1e-6, 100e9, ranks_per_node=4, inter_latency=10e-6, inter_bandwidth=10e9)
    n = 8 << 20
    # all-reduce across nodes: reduce-scatter in each node (3 steps of n/4 on the
    # intra link), ring all-reduce of n/4 between the 2 nodes (2 steps of n/8 on
    # the inter link), all-gather in each node (3 steps of n/4 intra)
    intra = 1e-6 + (n / 4) / 100e9
    inter = 10e-6 + (n / 8) / 10e9
    assert near(net.duration(meta("all_reduce", range(8), n)), 3 * intra + 2 * inter + 3 * intra)
    # inside one node: the intra link only
    assert near(net.duration(meta("all_reduce", range(4), n)), 2 * 3 * (1e-6 + n / 4 / 100e9))
    # a flat algorithm across nodes runs at the inter link's cost
    assert near(net.duration(meta("all_gather", (2, 5), n)), 10e-6 + n / 10e9)
    send = kbt.Collective(kind="send", group="0", ranks=tuple(range(8)), seq=0, dtype="float32", numel=(1,),
                          nbytes=(4,), root=1, peer=2)
    assert near(net.duration(send), 1e-6 + 4 / 100e9)
    send2 = kbt.Collective(kind="send", group="0", ranks=tuple(range(8)), seq=0, dtype="float32", numel=(1,),
                           nbytes=(4,), root=1, peer=6)
    assert near(net.duration(send2), 10e-6 + 4 / 10e9)


@pytest.mark.parametrize(
    "kw, text",
    [
        ({"latency": 1e-6, "bandwidth": 0}, "bandwidth must be a positive"),
        ({"latency": 1e-6, "bandwidth": -5.0}, "bandwidth must be a positive"),
        ({"latency": -1.0, "bandwidth": 1e9}, "latency must be a finite number of seconds >= 0"),
        ({"latency": 1e-6, "bandwidth": float("inf")}, "bandwidth must be a positive"),
        ({"latency": 1e-6, "bandwidth": 1e9, "ranks_per_node": 0, "inter_latency": 1e-6, "inter_bandwidth": 1e9},
         "ranks_per_node must be an int >= 1"),
        ({"latency": 1e-6, "bandwidth": 1e9, "ranks_per_node": 4}, "needs inter_latency and inter_bandwidth"),
        ({"latency": 1e-6, "bandwidth": 1e9, "inter_bandwidth": 1e9}, "need ranks_per_node"),
        ({"latency": 1e-6, "bandwidth": 1e9, "allreduce": "butterfly"}, "allreduce must be one of"),
        ({"latency": 1e-6, "bandwidth": 1e9, "ranks_per_node": 2, "inter_latency": 1e-6, "inter_bandwidth": 0},
         "inter_bandwidth must be a positive"),
    ],
)
def test_bad_network_parameters_are_clear_errors(kw, text):
    with pytest.raises(ValueError, match=text):
        kbt.Network(**kw)


def _noop(rank):
    dist.init_process_group("gloo")


@pytest.mark.parametrize(
    "kw, error, text",
    [
        ({"device_flops": 0}, ValueError, "device_flops must be a positive"),
        ({"device_flops": -1e12}, ValueError, "device_flops must be a positive"),
        ({"compute": "wallclock"}, ValueError, "compute must be 'flops', 'roofline', 'cpu_time' or a function"),
        ({"compute": "cpu_time", "cpu_factor": -1}, ValueError, "cpu_factor must be a number >= 0"),
        ({"join": False}, ValueError, "needs join=True"),
        ({"network": "fast"}, TypeError, "network must be a kbthreads.torch.Network"),
        ({"context": kbthreads.Context(engine=object())}, ValueError, "context without an engine"),
    ],
)
def test_bad_spawn_parameters_are_clear_errors(kw, error, text):
    kw = {"network": kbt.Network(A, B), **kw}
    with pytest.raises(error, match=text):
        kbt.spawn(_noop, nprocs=2, **kw)


def test_device_flops_without_a_network_is_an_error():
    with pytest.raises(ValueError, match="need network"):
        kbt.spawn(_noop, nprocs=2, device_flops=1e12)


# ---- a DDP step against its hand-computed schedule ----------------------------------------------------
I = H = O = 512  # noqa: E741  (each weight 1 MiB of float32: one bucket each)
BATCH, P = 64, 4


def _ddp_step_times(net, rate):
    times = {}

    def train(rank):
        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(I, H, bias=False), torch.nn.ReLU(),
                                        torch.nn.Linear(H, O, bias=False)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(BATCH, I, generator=torch.Generator().manual_seed(rank))
        for step in range(3):
            opt.zero_grad()
            t0 = kbt.sim_time()
            model(x).sum().backward()
            opt.step()
            times.setdefault(rank, []).append(kbt.sim_time() - t0)

    run = kbt.spawn(train, nprocs=P, network=net, device_flops=rate)
    return times, run


def _hand_schedule(net, rate):
    """The step as a schedule of two buckets (W2's, then W1's), each launched
    when its gradient is ready and all-reduced while backward goes on."""
    fwd = (2 * BATCH * I * H + 2 * BATCH * H * O) / rate
    t1 = fwd + (2 * BATCH * O * H + 2 * BATCH * O * H) / rate  # layer 2's backward: grad input and grad W2
    t2 = t1 + 2 * BATCH * H * I / rate  # layer 1's backward: grad W1 only
    d1 = net.ring_allreduce(net.intra, P, O * H * 4)
    d2 = net.ring_allreduce(net.intra, P, H * I * 4)
    return max(t1 + d1, t2 + d2)


@pytest.mark.parametrize(
    "bandwidth, rate",
    [(25e9, 1e12), (12.5e9, 1e12), (25e9, 2e12), (1e15, 1e11), (1e15, 2e11)],
    ids=["base", "half-bandwidth", "double-rate", "compute-bound", "compute-bound-double-rate"],
)
def test_a_ddp_step_matches_the_hand_computed_schedule_of_buckets(bandwidth, rate):
    net = kbt.Network(A, bandwidth)
    times, run = _ddp_step_times(net, rate)
    want = _hand_schedule(net, rate)
    # step 0 all-reduces one bucket of both weights; DDP then rebuilds its
    # buckets from the order gradients came in (two broadcasts in step 1's
    # forward), so step 2 is the steady state the schedule describes
    for r in range(P):
        assert math.isclose(times[r][2], want, rel_tol=1e-9), (r, times[r], want)
    ar = run.summary()["collectives"]["all_reduce"]
    assert ar["count"] == 5 and ar["bytes"] == 3 * P * (O * H + H * I) * 4


def test_halving_bandwidth_slows_a_communication_bound_step_and_doubling_the_rate_a_compute_bound_one():
    # communication-bound (a fast device, short latency): the bandwidth term dominates
    base = _ddp_step_times(kbt.Network(1e-7, 25e9), 1e15)[0][0][2]
    half_bw = _ddp_step_times(kbt.Network(1e-7, 12.5e9), 1e15)[0][0][2]
    assert 1.95 < half_bw / base < 2.0
    slow = _ddp_step_times(kbt.Network(A, 1e15), 1e11)[0][0][2]
    fast = _ddp_step_times(kbt.Network(A, 1e15), 2e11)[0][0][2]
    assert 0.5 <= fast / slow < 0.52  # compute-bound: twice the rate, half the time


def test_an_async_all_reduce_overlaps_the_compute_before_its_wait():
    def train(rank):
        dist.init_process_group("gloo")
        t = torch.ones(1 << 20)  # 4 MiB
        w = dist.all_reduce(t, async_op=True)
        a = torch.randn(256, 256)
        for _ in range(rank + 1):  # rank r computes (r + 1) x 2 x 256^3 FLOPs
            a = a @ a / 256
        w.wait()

    net = kbt.Network(A, 25e9)
    run = kbt.spawn(train, nprocs=4, network=net, device_flops=1e11)
    s = run.summary()
    d = net.ring_allreduce(net.intra, 4, 4 << 20)
    mm = 2 * 256**3 / 1e11
    for r in range(4):
        v = s["ranks"][r]
        assert math.isclose(v["compute"], (r + 1) * mm, rel_tol=1e-12)
        assert math.isclose(v["communication"], d, rel_tol=1e-12)
        assert math.isclose(v["exposed_communication"], max(0.0, d - (r + 1) * mm), rel_tol=1e-9, abs_tol=1e-15)
        assert math.isclose(v["time"], max(d, (r + 1) * mm), rel_tol=1e-12)
        assert v["idle"] == 0.0
    assert s["collectives"]["all_reduce"] == {"count": 1, "bytes": 4 * (4 << 20), "time": d}


def test_a_rank_arriving_late_makes_the_others_idle():
    def train(rank):
        dist.init_process_group("gloo")
        if rank == 1:
            a = torch.randn(128, 128)
            a @ a  # 2 x 128^3 FLOPs before the all-reduce
        dist.all_reduce(torch.ones(4))

    run = kbt.spawn(train, nprocs=3, network=kbt.Network(A, B), device_flops=1e9)
    s = run.summary()["ranks"]
    late = 2 * 128**3 / 1e9
    assert math.isclose(s[0]["idle"], late) and math.isclose(s[2]["idle"], late) and s[1]["idle"] == 0.0


def test_compute_from_cpu_time_or_a_function():
    def train(rank):
        dist.init_process_group("gloo")
        a = torch.randn(64, 64)
        a @ a
        dist.barrier()

    seen = []

    def model(rank, flops, cpu):
        seen.append((rank, flops))
        return flops * 1e-9 * (rank + 1)

    run = kbt.spawn(train, nprocs=2, network=kbt.Network(A, B), compute=model)
    assert (0, 2 * 64**3) in seen and (1, 2 * 64**3) in seen
    assert math.isclose(run.summary()["ranks"][1]["compute"], 2 * 2 * 64**3 * 1e-9)
    run = kbt.spawn(train, nprocs=2, network=kbt.Network(A, B), compute="cpu_time", cpu_factor=0.0)
    assert run.summary()["ranks"][0]["compute"] == 0.0 and run.summary()["compute"] == "cpu_time"


def test_the_timeline_is_a_chrome_trace_with_a_track_per_rank_and_flow_arrows(tmp_path):
    def train(rank):
        dist.init_process_group("gloo")
        a = torch.randn(32, 32)
        a @ a
        dist.all_reduce(torch.ones(8))

    run = kbt.spawn(train, nprocs=3, network=kbt.Network(A, B), device_flops=1e9)
    path = tmp_path / "t.json"
    run.write_timeline(str(path))
    ev = json.loads(path.read_text())["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {(r, f"rank {r}") for r in range(3)}
    assert sorted(e["pid"] for e in ev if e["ph"] == "X" and e["name"] == "all_reduce") == [0, 1, 2]
    assert sorted(e["pid"] for e in ev if e["ph"] == "X" and e["name"] == "compute") == [0, 1, 2]
    flows = [(e["ph"], e["pid"]) for e in ev if e.get("cat") == "flow"]
    assert flows == [("s", 0), ("f", 1), ("s", 1), ("f", 2)]
    svg = tmp_path / "t.svg"
    run.write_plot(str(svg))
    assert svg.read_text().startswith("<svg") and "rank 2" in svg.read_text()


TIMELINE = """
import sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import kbthreads.torch as kbt

def train(rank):
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)),
                bucket_cap_mb=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(16, 64, generator=g)).pow(2).mean().backward()
        opt.step()

run = kbt.spawn(train, nprocs=4, network=kbt.Network(5e-6, 25e9), device_flops=1e12)
run.write_timeline(sys.argv[1])
"""


def test_timelines_are_byte_identical_across_runs_and_beside_a_cpu_hog(tmp_path):
    from torch_helpers import child_env

    script = tmp_path / "tl.py"
    script.write_text(TIMELINE)

    def once(name):
        out = tmp_path / name
        r = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300,
                           env=child_env())
        assert r.returncode == 0, r.stderr
        return out.read_bytes()

    a = once("a.json")
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        b = once("b.json")
    finally:
        hog.kill()
        hog.wait()
    assert a == b and b'"all_reduce"' in a


# ---- FLOP counting per rank: kbthreads against greenlets ------------------------------------------------
def _count_flops(spawn, yield_, n):
    """Each rank counts its own FLOPs with its own FlopCounterMode around
    matmuls of a rank-specific size, suspending in between."""
    from torch.utils.flop_counter import FlopCounterMode

    counts = {}

    def rank_main(rank):
        size = 16 * (rank + 1)
        a = torch.randn(size, size)
        with FlopCounterMode(display=False) as m:
            a @ a
            yield_()
            a @ a
        counts[rank] = m.get_total_flops()

    try:
        spawn(rank_main, n)
    except Exception as e:  # the greenlet scheduler may not even finish
        return counts, e
    return counts, None


def test_flop_counts_are_each_ranks_own_on_kbthreads():
    counts, err = _count_flops(lambda f, n: kbthreads.spawn(f, nprocs=n), kbthreads.yield_, 3)
    assert err is None
    assert counts == {r: 2 * 2 * (16 * (r + 1)) ** 3 for r in range(3)}


def test_flop_counts_leak_between_ranks_on_greenlets():
    pytest.importorskip("greenlet")  # the test venv has it (requirements-test.txt)
    import greenlet_ranks

    counts, err = _count_flops(lambda f, n: greenlet_ranks.spawn(f, nprocs=n), greenlet_ranks.yield_, 3)
    assert err is None
    right = {r: 2 * 2 * (16 * (r + 1)) ** 3 for r in range(3)}
    # one mode stack on one thread for every rank: while rank 0 is suspended
    # inside its counter, ranks 1 and 2 run with it still on the stack, and it
    # counts their matmuls too (seen: 303104 FLOPs against its own 16384)
    assert counts[0] > right[0]
    assert counts != right


def _assorted_ops(rank):
    """Ops whose FLOPs torch counts by different paths: flat arguments (mm,
    addmm with alpha and beta, bmm), lists of ints (convolution), an op that
    decomposes or runs a kernel of its own (attention: on the CPU its flash
    kernel, counted by _torchs_counter), and their backward passes; sizes per rank."""
    g = torch.Generator().manual_seed(rank)
    d = 8 * (rank + 1)
    x = torch.randn(d, 16, generator=g, requires_grad=True)
    w = torch.randn(16, 32, generator=g, requires_grad=True)
    y = torch.addmm(torch.zeros(32), x, w, beta=0.5, alpha=2.0)
    k = torch.randn(4, 3, 3, 3, generator=g, requires_grad=True)
    z = torch.nn.functional.conv2d(torch.randn(1, 3, d, d, generator=g), k, padding=1)
    q = torch.randn(1, 2, d, 8, generator=g, requires_grad=True)
    a = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    (y.sum() + z.sum() + torch.bmm(q[0], q[0].transpose(1, 2)).sum() + a.sum() + (x @ x.t()).sum()).backward()


def _torchs_counter():
    """torch's FlopCounterMode, counting also the CPU kernel of attention by
    torch's own formula for its CUDA kernels (torch's registry lists only
    those; kbthreads counts the CPU kernel, which the CPU and fake tensors
    on it run)."""
    from torch.utils import flop_counter as fc

    aten = torch.ops.aten
    return fc.FlopCounterMode(display=False, custom_mapping={
        aten._scaled_dot_product_flash_attention_for_cpu:
            lambda q, k, v, *a, out_shape=None, **kw: fc.sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward:
            lambda g, q, k, v, *a, out_shape=None, **kw: fc.sdpa_backward_flop_count(g, q, k, v),
    })


def _torchs_and_the_spawns_counts(ops):
    """ops(rank) counted by torch's counter, rank by rank on this thread, and
    by a 3-rank spawn's simulated time."""
    want = {}
    for r in range(3):
        with _torchs_counter() as m:
            ops(r)
        want[r] = m.get_total_flops()
    run = kbt.spawn(ops, nprocs=3, network=kbt.Network(A, B), device_flops=1e12)
    return want, {r: s["flops"] for r, s in run.summary()["ranks"].items()}


def test_each_ranks_flops_are_what_flop_counter_mode_counts_for_its_ops():
    want, got = _torchs_and_the_spawns_counts(_assorted_ops)
    assert got == want and len(set(want.values())) == 3


def _fake_ops(rank):
    """A forward and backward pass of a small model on fake tensors (made
    under FakeTensorMode, whose tensors dispatch TorchScript's prim::device
    for ``.device``), sizes per rank."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        d = 8 * (rank + 1)
        model = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.LayerNorm(2 * d), torch.nn.Linear(2 * d, d))
        x = torch.randn(4, d)
        q = torch.randn(1, 2, d, 8, requires_grad=True)
        a = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        (model(x).sum() + a.sum()).backward()


def _meta_ops(rank):
    """The same model on the meta device."""
    d = 8 * (rank + 1)
    model = torch.nn.Sequential(torch.nn.Linear(d, 2 * d, device="meta"), torch.nn.Linear(2 * d, d, device="meta"))
    x = torch.empty(4, d, device="meta")
    model(x).sum().backward()


@pytest.mark.parametrize("ops", [_fake_ops, _meta_ops], ids=["fake", "meta"])
def test_under_fake_and_meta_tensors_each_ranks_flops_are_what_flop_counter_mode_counts(ops):
    want, got = _torchs_and_the_spawns_counts(ops)
    assert got == want and len(set(want.values())) == 3 and min(want.values()) > 0


def test_a_compiled_function_in_a_rank_runs_eagerly_and_is_counted_without_compiling_the_counter():
    import torch._dynamo

    def f(a):
        b = torch.relu(a @ a)
        torch._dynamo.graph_break()
        return b + 1

    cf = torch.compile(f, backend="eager")
    seen = {}

    def rank_main(rank):
        a = torch.randn(16, 16)
        seen[rank] = torch.equal(cf(a), f(a))

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    run = kbt.spawn(rank_main, nprocs=2, network=kbt.Network(A, B), device_flops=1e12)
    assert seen == {0: True, 1: True}
    assert all(s["flops"] == 2 * 2 * 16**3 for s in run.summary()["ranks"].values())
    # torch.compile skips frames while a counting mode is on the rank's stack;
    # were the mode's own dispatch frame open to it, it would trace (and break in) that
    assert not torch._dynamo.utils.counters["graph_break"]


_WITHOUT_THE_MARK = """
import sys
import torch._dynamo  # binds its own names first
from torch._C._dynamo import eval_frame
if hasattr(eval_frame, "set_code_exec_strategy"):
    del eval_frame.set_code_exec_strategy  # a PyTorch without the mark
sys.path.insert(0, sys.argv[1])
import test_torch_simtime as t
import kbthreads.torch._simtime as simtime
assert not simtime._Counting._off_by_code
assert hasattr(simtime._Counting.__dict__["__torch_dispatch__"], "__wrapped__")  # torch's wrapper
t.test_each_ranks_flops_are_what_flop_counter_mode_counts_for_its_ops()
print("counted")
"""


def test_without_pytorchs_code_mark_the_counting_mode_keeps_torchs_wrapper_and_counts_the_same():
    from pathlib import Path

    from torch_helpers import child_env

    here = str(Path(__file__).resolve().parent)
    r = subprocess.run([sys.executable, "-c", _WITHOUT_THE_MARK, here], capture_output=True, text=True,
                       timeout=300, env=child_env())
    assert r.returncode == 0 and r.stdout.strip() == "counted", r.stderr
    from torch._C._dynamo import eval_frame

    import kbthreads.torch._simtime as simtime

    # here: marked where this PyTorch offers the mark (2.13 does), and then without torch's wrapper
    assert simtime._Counting._off_by_code == hasattr(eval_frame, "set_code_exec_strategy")
    wrapped = hasattr(simtime._Counting.__dict__["__torch_dispatch__"], "__wrapped__")
    assert wrapped != simtime._Counting._off_by_code


def test_the_prediction_example_prints_and_writes_the_same_twice(tmp_path):
    from pathlib import Path

    from torch_helpers import child_env

    example = Path(__file__).resolve().parents[3] / "examples" / "ddp_predict.py"

    def once(tag):
        tl, svg = tmp_path / f"{tag}.json", tmp_path / f"{tag}.svg"
        r = subprocess.run([sys.executable, str(example), "--ranks", "3", "--steps", "2", "--timeline", str(tl),
                            "--plot", str(svg)], capture_output=True, text=True, timeout=300, env=child_env())
        assert r.returncode == 0, r.stderr
        return r.stdout.replace(str(tmp_path / tag), "OUT"), tl.read_bytes(), svg.read_bytes()

    a, b = once("a"), once("b")
    assert a == b
    assert a[0].count("predicted step time") == 2 and "exposed" in a[0]
    times = [float(line.split("predicted step time ")[1].split(" ms")[0]) for line in a[0].splitlines()
             if "predicted step time" in line]
    assert times[1] > times[0]  # the slower network predicts the slower step


def test_sim_time_outside_a_timed_spawn_is_an_error():
    with pytest.raises(RuntimeError, match="only inside a rank of a spawn with network"):
        kbt.sim_time()
    seen = []

    def rank_main(rank):
        try:
            kbt.sim_time()
        except RuntimeError as e:
            seen.append(str(e))

    kbt.spawn(rank_main, nprocs=2)  # no network: untimed
    assert len(seen) == 2 and all("network" in s for s in seen)


def test_a_compute_model_returning_a_negative_time_fails_the_spawn():
    def train(rank):
        dist.init_process_group("gloo")
        a = torch.randn(8, 8)
        a @ a
        dist.barrier()

    with pytest.raises(kbthreads.SpawnException) as ei:
        kbt.spawn(train, nprocs=2, network=kbt.Network(A, B), compute=lambda r, f, c: -1.0)
    err = ei.value.errors[min(ei.value.errors)]
    assert isinstance(err, ValueError) and "returned -1.0 seconds" in str(err)


def _attention(rank, make, backward):
    q, k, v = (make(1, 2, 16, 8).requires_grad_(backward) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    if backward:
        out.sum().backward()


@pytest.mark.parametrize("kind", ["real", "fake"])
def test_attention_on_the_cpu_counts_its_flops(kind):
    # two heads of 16 queries and keys of 8 dimensions: q @ k^T and the
    # weights @ v, 2 * 16 * 16 * 8 FLOPs each per head
    from torch._subclasses.fake_tensor import FakeTensorMode

    def body(rank, backward):
        with FakeTensorMode() if kind == "fake" else contextlib.nullcontext():
            _attention(rank, torch.randn, backward)

    net = kbt.Network(5e-6, 25e9)
    forward = kbt.spawn(body, args=(False,), nprocs=1, network=net, device_flops=1e12)
    assert forward.summary()["ranks"][0]["flops"] == 2 * (2 * 2 * 16 * 16 * 8)
    both = kbt.spawn(body, args=(True,), nprocs=1, network=net, device_flops=1e12)
    # the backward recomputes the scores, then four products for the
    # gradients (torch's count for its CUDA kernels, of the same shapes)
    assert both.summary()["ranks"][0]["flops"] == 7 * (2 * 2 * 16 * 16 * 8)
