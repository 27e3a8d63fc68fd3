# SPDX-License-Identifier: MIT
"""The flagship example, examples/llama_dryrun.py: a Llama-3-style decoder
made 3-D parallel (data x tensor x pipeline) with PyTorch's own APIs
(init_device_mesh, parallelize_module, fully_shard, pipelining), run on
kbthreads ranks. At a tiny size on real tensors its losses equal the
unsplit model's on one thread, step after step (with SGD, whose update is
the gradient itself, so a gradient off by a factor shows from the second
step); with fake tensors at Llama 3 8B's layer shapes it prints a
prediction of the step."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", minversion="2.0")
pytest.importorskip("torch.distributed.pipelining")

from torch_helpers import child_env  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama_dryrun.py"
TINY = ["--real", "--dim", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "64", "--vocab", "64", "--seq", "16"]


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        yield importlib.import_module("llama_dryrun")
    finally:
        sys.path.remove(str(EXAMPLE.parent))


@pytest.fixture(autouse=True)
def one_intra_op_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    "layout",
    [
        ["--dp", "2", "--tp", "2", "--pp", "2", "--schedule", "Schedule1F1B"],
        ["--dp", "2", "--tp", "2", "--pp", "2", "--schedule", "ScheduleGPipe"],
        ["--dp", "1", "--tp", "2", "--pp", "4", "--schedule", "Schedule1F1B"],
    ],
    ids=["dp2-tp2-pp2-1F1B", "dp2-tp2-pp2-GPipe", "tp2-pp4-1F1B"],
)
def test_the_parallel_steps_give_the_unsplit_models_losses(example: Any, layout: list[str]) -> None:
    plan, args = example.parse([*TINY, *layout, "--steps", "3", "--optimizer", "sgd", "--no-sim"])
    out, _ = example.run(plan, args)
    got, want = example.mean_losses(out), example.unsplit_losses(plan)
    assert len(out["losses"]) == plan.dp * plan.tp  # every last-stage rank reported its losses
    assert len(got) == 3
    assert got == pytest.approx(want, rel=1e-5, abs=0)
    assert abs(want[2] - want[0]) > 1e-3  # the steps trained: a wrong gradient would show


def test_tensor_parallel_peers_compute_equal_losses(example: Any) -> None:
    plan, args = example.parse([*TINY, "--dp", "2", "--tp", "2", "--pp", "2", "--no-sim"])
    out, _ = example.run(plan, args)
    by_dp: dict[int, list[list[float]]] = {}
    for dp_rank, losses in out["losses"].values():
        by_dp.setdefault(dp_rank, []).append(losses)
    assert sorted(by_dp) == [0, 1]
    for peers in by_dp.values():
        assert len(peers) == 2 and peers[0] == peers[1]


def test_the_example_prints_a_prediction_and_writes_the_timeline(tmp_path: Path) -> None:
    tl, svg = tmp_path / "t.json", tmp_path / "t.svg"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--dp", "2", "--tp", "2", "--pp", "2", "--timeline", str(tl)]
    r = subprocess.run([*cmd, "--plot", str(svg)], capture_output=True, text=True, timeout=600, env=child_env())
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    step = [ln for ln in lines if ln.startswith("predicted step time")]
    assert len(step) == 1 and float(step[0].split()[3]) > 0
    assert any(ln.startswith("exposed communication") for ln in lines)
    stages = [ln.split() for ln in lines if ln[:5].strip() in ("0", "1") and len(ln.split()) == 11]
    assert [s[0] for s in stages] == ["0", "1"] and all(s[1] == "4" and float(s[5]) > 0 for s in stages)
    assert tl.stat().st_size > 0 and svg.read_text().startswith("<svg")


def test_a_layout_the_model_cannot_take_is_refused_with_a_message() -> None:
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), *TINY, "--tp", "4"], capture_output=True, text=True, timeout=300, env=child_env()
    )
    assert r.returncode == 2
    assert "--tp 4 must divide the KV heads (2)" in r.stderr


def test_a_fake_run_sees_the_real_runs_collectives_and_flops(example: Any) -> None:
    """The dry run on fake tensors communicates what the real run does:
    every collective (tensor parallelism's functional ones included) with
    the same counts and bytes, and every rank executes the same FLOPs."""
    shape = [a for a in TINY if a != "--real"]
    plan_r, args_r = example.parse([*shape, "--real", "--dp", "2", "--tp", "2", "--pp", "2"])
    plan_f, args_f = example.parse([*shape, "--dtype", "float32", "--dp", "2", "--tp", "2", "--pp", "2"])
    assert not plan_f.real
    real, fake = example.run(plan_r, args_r)[1].summary(), example.run(plan_f, args_f)[1].summary()
    assert {k: (v["count"], v["bytes"]) for k, v in fake["collectives"].items()} == {
        k: (v["count"], v["bytes"]) for k, v in real["collectives"].items()
    }
    assert {"all_gather_into_tensor", "reduce_scatter_tensor", "send"} <= set(real["collectives"])
    assert [v["flops"] for v in fake["ranks"].values()] == [v["flops"] for v in real["ranks"].values()]
    assert all(v["flops"] > 0 for v in fake["ranks"].values())


def test_a_tensor_parallel_rank_executes_its_share_of_the_flops(example: Any) -> None:
    """Compute time comes from each rank's own FLOPs: with tp 2 and no other
    split, each rank executes half of what the unsplit model does for the
    same batch (every counted op here is a matrix product split evenly)."""
    import kbthreads.torch as kbt

    plan, args = example.parse([*TINY, "--dp", "1", "--tp", "2", "--pp", "1", "--microbatches", "1"])
    _, sim = example.run(plan, args)

    def unsplit(rank: int) -> None:  # the same batch through the whole model, on one rank
        model = example.Llama(plan.model, seed=plan.seed, dtype=plan.dtype)
        tokens, targets = example.batch(plan, 0, 0)
        example.cross_entropy(model(tokens), targets).backward()

    whole = kbt.spawn(unsplit, nprocs=1, network=kbt.Network(1e-6, 1e9), device_flops=1e12)
    total = whole.summary()["ranks"][0]["flops"]  # (attention included: torch's own counter skips its CPU kernel)
    assert total > 0
    assert [v["flops"] for v in sim.summary()["ranks"].values()] == [total // 2] * 2
