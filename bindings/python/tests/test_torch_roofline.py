# SPDX-License-Identifier: MIT
"""The roofline compute model (compute="roofline"): each op a rank runs
costs max(flops / device_flops, bytes / device_bandwidth), bytes being its
tensor arguments read and its tensor results written. Checked op by op
against a hand computation (a rank reads its clock around each op), on
real, fake and meta tensors, and the model's parameters."""

from __future__ import annotations

import contextlib
import math

import pytest

torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402

NET = kbt.Network(5e-6, 25e9)
F, BW = 1e10, 1e11  # FLOP/s, bytes/s: a 64x32 @ 32x16 product is compute bound, elementwise ops memory bound
M, K, N = 64, 32, 16
E = 4  # bytes per float32 element


def _ops():
    """(name, function of the tensors made by _inputs, flops, bytes) for
    each op; flops and bytes computed by hand from the shapes."""
    x, w, v, b = M * K, K * N, K, N  # element counts of the inputs
    return [
        ("mm", lambda t: t["x"] @ t["w"], 2 * M * K * N, E * (x + w + M * N)),
        # addmm: the bias (N) broadcast over M rows is read once
        ("addmm", lambda t: torch.addmm(t["b"], t["x"], t["w"]), 2 * M * K * N, E * (b + x + w + M * N)),
        ("add with a broadcast row", lambda t: t["x"] + t["v"], 0, E * (x + v + x)),
        ("relu", lambda t: torch.relu(t["x"]), 0, E * (x + x)),
        ("in-place mul", lambda t: t["y"].mul_(2.0), 0, E * (x + x)),
        # native_layer_norm: reads x, weight, bias; writes the output, the mean and rstd (M each)
        ("layer_norm", lambda t: torch.nn.functional.layer_norm(t["x"], (K,), t["v"], t["v"]), 0,
         E * (x + v + v + x + M + M)),
        ("softmax", lambda t: torch.softmax(t["x"], -1), 0, E * (x + x)),
        ("sum", lambda t: t["x"].sum(), 0, E * (x + 1)),
        ("a copy of a transpose", lambda t: t["x"].t().contiguous(), 0, E * (x + x)),
        ("view", lambda t: t["x"].view(K, M), 0, 0),
        ("expand", lambda t: t["v"].expand(M, K), 0, 0),
        ("empty", lambda t: torch.empty(M, K), 0, 0),
    ]


def _inputs(device=None):
    g = torch.Generator().manual_seed(0)
    made = {
        "x": torch.randn(M, K, generator=g),
        "y": torch.randn(M, K, generator=g),
        "w": torch.randn(K, N, generator=g),
        "v": torch.randn(K, generator=g),
        "b": torch.randn(N, generator=g),
    }
    return made if device is None else {k: t.to(device) for k, t in made.items()}


def _hand(flops, nbytes):
    return max(flops / F, nbytes / BW)


def _per_op_times(make_inputs, mode):
    """Each op's simulated time in rank 0, read from its clock around the
    op, with the inputs and ops made inside mode()."""
    seen = {}

    def rank_main(rank):
        with mode():
            t = make_inputs()
            for name, fn, _, _ in _ops():
                t0 = kbt.sim_time()
                fn(t)
                seen[name] = kbt.sim_time() - t0

    kbt.spawn(rank_main, nprocs=1, network=NET, compute="roofline", device_flops=F, device_bandwidth=BW)
    return seen


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


@pytest.mark.parametrize(
    "make_inputs, mode",
    [(_inputs, contextlib.nullcontext), (lambda: _inputs("meta"), contextlib.nullcontext), (_inputs, _fake_mode)],
    ids=["real", "meta", "fake"],
)
def test_each_op_costs_the_larger_of_its_flops_and_its_bytes_over_the_rates(make_inputs, mode):
    seen = _per_op_times(make_inputs, mode)
    want = {name: _hand(flops, nbytes) for name, _, flops, nbytes in _ops()}
    assert seen.keys() == want.keys()
    for name in want:
        assert math.isclose(seen[name], want[name], rel_tol=1e-12, abs_tol=1e-24), name


def test_the_hand_computation_has_compute_bound_and_memory_bound_ops():
    bound = {name: flops / F > nbytes / BW for name, _, flops, nbytes in _ops() if nbytes}
    assert bound["mm"] and not bound["relu"]  # the test above checks both sides of the max


def _step(rank):
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 8))
    model(torch.randn(16, 32, generator=g)).sum().backward()
    dist.all_reduce(model[0].weight.grad)


def test_a_ranks_flops_are_the_same_under_the_roofline_and_its_compute_is_at_least_the_flop_models():
    roof = kbt.spawn(_step, nprocs=2, network=NET, compute="roofline", device_flops=F, device_bandwidth=BW)
    flop = kbt.spawn(_step, nprocs=2, network=NET, device_flops=F)
    r, f = roof.summary()["ranks"], flop.summary()["ranks"]
    for rank in (0, 1):
        assert r[rank]["flops"] == f[rank]["flops"] > 0
        # the layer norm, the GELU, the sums and the optimizer-free backward's elementwise
        # work cost time only under the roofline
        assert r[rank]["compute"] > f[rank]["compute"]
        assert r[rank]["bytes"] > 0 and "bytes" not in f[rank]
    assert roof.summary()["compute"] == f"roofline(device_flops={F!r}, device_bandwidth={BW!r})"


def test_the_compute_spans_of_the_timeline_carry_their_bytes():
    run = kbt.spawn(_step, nprocs=2, network=NET, compute="roofline", device_flops=F, device_bandwidth=BW)
    spans = [e for e in run.timeline()["traceEvents"] if e.get("name") == "compute"]
    assert spans and all("bytes" in e["args"] and "flops" in e["args"] for e in spans)
    per_rank = {r: sum(e["args"]["bytes"] for e in spans if e["pid"] == r) for r in (0, 1)}
    assert per_rank == {r: s["bytes"] for r, s in run.summary()["ranks"].items()}


def _functional_all_reduce(rank, seen):
    import torch.distributed._functional_collectives as funcol

    dist.init_process_group("gloo")
    t = torch.ones(1024)
    t0 = kbt.sim_time()
    funcol.wait_tensor(funcol.all_reduce(t, "sum", dist.group.WORLD))
    seen[rank] = kbt.sim_time() - t0


def test_a_functional_collective_and_its_wait_move_no_bytes_the_network_prices_them():
    # the functional collectives, which DTensor's redistributions call; one
    # rank, so that no other rank's part of the collective runs on its thread
    roof, flop = {}, {}
    kbt.spawn(_functional_all_reduce, args=(roof,), nprocs=1, network=NET, compute="roofline",
              device_flops=F, device_bandwidth=1.0)  # a byte would cost a second
    kbt.spawn(_functional_all_reduce, args=(flop,), nprocs=1, network=NET, device_flops=F)
    assert roof == flop and roof[0] < 1.0


def _c10d_collectives(rank, seen):
    dist.init_process_group("gloo")
    t, out = torch.ones(1024), torch.empty(2048)
    dist.barrier()
    t0 = kbt.sim_time()
    dist.all_reduce(t)
    dist.all_gather_into_tensor(out, t)
    if rank == 0:
        dist.send(t, 1)
    else:
        dist.recv(t, 0)
    seen[rank] = kbt.sim_time() - t0
    dist.destroy_process_group()


def test_the_backends_copies_and_reductions_are_charged_to_no_rank():
    # gloo copies and reduces below the dispatcher, where a rank's modes see
    # nothing; kbthreads does it in Python on some member's thread, which
    # must not charge that rank (a byte costs a second here)
    roof, flop = {}, {}
    kbt.spawn(_c10d_collectives, args=(roof,), nprocs=2, network=NET, compute="roofline", device_flops=F,
              device_bandwidth=1.0)
    kbt.spawn(_c10d_collectives, args=(flop,), nprocs=2, network=NET, device_flops=F)
    assert roof == pytest.approx(flop, rel=1e-9) and max(roof.values()) < 1.0  # (clock sums in another order)


@pytest.mark.parametrize(
    "kw, text",
    [
        ({"compute": "roofline", "device_flops": F}, "needs device_flops .* and device_bandwidth"),
        ({"compute": "roofline", "device_bandwidth": BW}, "needs device_flops .* and device_bandwidth"),
        ({"compute": "roofline", "device_flops": F, "device_bandwidth": 0}, "device_bandwidth must be a positive"),
        ({"compute": "roofline", "device_flops": F, "device_bandwidth": math.inf},
         "device_bandwidth must be a positive"),
        ({"compute": "roofline", "device_flops": -1.0, "device_bandwidth": BW}, "device_flops must be a positive"),
        ({"device_flops": F, "device_bandwidth": BW}, "device_bandwidth is the roofline's"),
    ],
)
def test_bad_roofline_parameters_are_clear_errors(kw, text):
    with pytest.raises(ValueError, match=text):
        kbt.spawn(_step, nprocs=2, network=NET, **kw)


def test_device_bandwidth_without_a_network_is_an_error():
    with pytest.raises(ValueError, match="need network"):
        kbt.spawn(_step, nprocs=2, compute="roofline", device_flops=F, device_bandwidth=BW)


# ---- the launcher: --compute roofline --device-bandwidth -----------------------------------------------

def test_the_launcher_reads_the_roofline_options_with_their_units():
    from kbthreads.torch._launch_args import parse

    plan = parse(["--network", "latency=1us,bandwidth=1GB/s", "--compute", "roofline", "--device-flops", "10T",
                  "--device-bandwidth", "2TB/s", "t.py"])
    assert plan.simulation() == {"device_flops": 10e12, "compute": "roofline", "device_bandwidth": 2e12,
                                 "memory": False}


@pytest.mark.parametrize("argv, words", [
    (["--compute", "roofline", "--device-flops", "10T"], "--compute roofline needs --device-flops and "
                                                          "--device-bandwidth"),
    (["--device-flops", "10T", "--device-bandwidth", "2TB/s"], "--device-bandwidth is the roofline's"),
    (["--compute", "roofline", "--device-flops", "10T", "--device-bandwidth", "fast"], "cannot read 'fast'"),
])
def test_the_launcher_refuses_an_incomplete_or_unreadable_roofline(capsys, argv, words):
    from kbthreads.torch.run import main

    with pytest.raises(SystemExit) as e:
        main(["--network", "latency=1us,bandwidth=1GB/s", *argv, "t.py"])
    assert e.value.code == 2
    assert words in capsys.readouterr().err


def test_the_launcher_runs_a_script_under_the_roofline(tmp_path):
    import subprocess
    import sys

    from torch_helpers import child_env

    script = tmp_path / "train.py"
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "x = torch.ones(256, 256)\n"
        "y = torch.relu(x)\n"  # memory bound: 2 x 256 KiB at the bandwidth below
        "dist.barrier()\n"
    )
    timeline = tmp_path / "t.json"
    r = subprocess.run(
        [sys.executable, "-m", "kbthreads.torch.run", "--nproc-per-node", "2", "--network",
         "latency=1us,bandwidth=1GB/s", "--compute", "roofline", "--device-flops", "1T", "--device-bandwidth",
         "1GB/s", "--memory", "--summary", "--timeline", str(timeline), str(script)],
        capture_output=True, text=True, timeout=240, env=child_env())
    assert r.returncode == 0, r.stderr
    assert "compute: roofline(device_flops=1000000000000.0, device_bandwidth=1000000000.0)" in r.stdout
    assert "memory MiB" in r.stdout
    import json

    spans = [e for e in json.loads(timeline.read_text())["traceEvents"] if e.get("name") == "compute"]
    # each rank: ones (writes 256 KiB) and relu (reads and writes 256 KiB): 3 x 256 KiB at 1 GB/s
    assert sorted(e["pid"] for e in spans) == [0, 1]
    assert all(math.isclose(e["dur"], 3 * 256 * 1024 * 1e6 / 1e9) for e in spans)
