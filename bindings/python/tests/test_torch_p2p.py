# SPDX-License-Identifier: MIT
"""Point to point (send, recv, isend, irecv, batch_isend_irecv): every
message reaches the engine once, whatever its tag or source. Then tensors
that hold no values: fake tensors, each rank's own FakeTensorMode's, and
meta tensors. Each call takes them with the checks it makes of real
tensors, leaves the receiver's tensor in its own mode or on meta, and
reaches the engine priced by the same sizes as the same program on real
tensors. A send and its recv that disagree on what their tensors hold are a
mismatch; the one value a fake tensor can hold (its mode's constant, which
PyTorch's pipelining schedules send and branch on) travels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from torch._subclasses.fake_tensor import DataDependentOutputException  # noqa: E402
from torch_helpers import Recorder, tensors_of  # noqa: E402

import kbthreads  # noqa: E402
import kbthreads.torch as kbt  # noqa: E402

ABSTRACT = ["fake", "meta"]


def run(body: Callable[[int, Callable[..., Any]], Any], data: Any, n: int = 2) -> tuple[dict[int, Any], list[Any]]:
    """body(rank, make) on n ranks with tensors of kind data (or data(rank)):
    what each rank returned and what the engine saw."""
    out: dict[int, Any] = {}
    rec = Recorder()

    def rank_main(rank: int) -> None:
        dist.init_process_group("gloo")
        try:
            with tensors_of(data(rank) if callable(data) else data, torch.zeros) as make:
                out[rank] = body(rank, make)
        finally:
            dist.destroy_process_group()

    kbt.spawn(rank_main, nprocs=n, context=kbthreads.Context(engine=rec))
    return out, rec.seen


def test_every_message_reaches_the_engine_once_whatever_its_tag_or_source() -> None:
    """Three messages from rank 0 to rank 1, received as the first on tag 7,
    the first on tag 0 and the first from any source (before, the three
    shared one engine handle, and the engine saw one)."""

    def body(rank: int, make: Callable[..., Any]) -> list[Any]:
        if rank == 0:
            for n, tag in ((2, 0), (3, 7), (4, 0)):
                dist.send(torch.arange(n, dtype=torch.float32), dst=1, tag=tag)
            return []
        got = [torch.zeros(3), torch.zeros(2), torch.zeros(4)]
        dist.recv(got[0], src=0, tag=7)
        dist.recv(got[1], src=0, tag=0)
        dist.recv(got[2])
        return got

    out, seen = run(body, "real")
    assert [t.tolist() for t in out[1]] == [[0, 1, 2], [0, 1], [0, 1, 2, 3]]
    assert [(c.root, c.peer, c.nbytes, c.seq) for c in seen] == [(0, 1, (12,), 0), (0, 1, (8,), 1), (0, 1, (16,), 2)]


def _every_call(rank: int, make: Callable[..., Any]) -> list[Any]:
    """Each point-to-point call once between ranks 0 and 1 (rank 2 receives
    from any source): the tensors each rank received into."""
    got: list[Any] = []
    if rank == 0:
        dist.send(make(3, 4), dst=1)
        dist.isend(make(5, dtype=torch.float64), dst=1, tag=7).wait()
        ops = [dist.P2POp(dist.isend, make(2, 2), 1), dist.P2POp(dist.irecv, r := make(6, dtype=torch.int64), 1)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        got.append(r)
        dist.send(make(1), dst=2)
    elif rank == 1:
        got += [make(3, 4), make(5, dtype=torch.float64), make(2, 2)]
        dist.recv(got[0], src=0)
        dist.irecv(got[1], src=0, tag=7).wait()
        ops = [dist.P2POp(dist.irecv, got[2], 0), dist.P2POp(dist.isend, make(6, dtype=torch.int64), 0)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    else:
        got.append(make(1))
        dist.recv(got[0])  # any source
    return got


def _described(t: Any) -> tuple[Any, ...]:
    return ("meta" if t.is_meta else type(t).__name__, tuple(t.shape), t.dtype)


@pytest.mark.parametrize("data", ABSTRACT)
def test_every_point_to_point_call_reaches_the_engine_as_its_real_run_does(data: str) -> None:
    _, real = run(_every_call, "real", n=3)
    _, abstract = run(_every_call, data, n=3)
    assert len(real) == 5 and all(c.kind == "send" for c in real)
    assert abstract == real  # kind, ranks, dtype, numel, nbytes, root (sender), peer (receiver), in order


@pytest.mark.parametrize("data", ABSTRACT)
def test_a_received_abstract_tensor_stays_the_receivers_own(data: str) -> None:
    modes: dict[int, Any] = {}

    def body(rank: int, make: Callable[..., Any]) -> list[Any]:
        got = _every_call(rank, make)
        modes[rank] = [getattr(t, "fake_mode", None) for t in got]
        return got

    out, _ = run(body, data, n=3)
    kind = "meta" if data == "meta" else "FakeTensor"
    assert [_described(t) for t in out[1]] == [
        (kind, (3, 4), torch.float32),
        (kind, (5,), torch.float64),
        (kind, (2, 2), torch.float32),
    ]
    assert [_described(t) for t in out[0]] == [(kind, (6,), torch.int64)]
    if data == "fake":  # each rank's received tensors are its own mode's, one mode per rank
        assert len({id(m) for rank in modes for m in modes[rank]}) == 3
        assert all(len(set(map(id, modes[rank]))) == 1 for rank in modes)


@pytest.mark.parametrize("data", ABSTRACT)
def test_a_size_mismatch_of_abstract_tensors_raises_in_the_receiver_as_for_real_ones(data: str) -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        if rank == 0:
            dist.send(make(3), dst=1)
        else:
            dist.recv(make(2), src=0)

    with pytest.raises(kbthreads.SpawnException) as e:
        run(body, data)
    assert list(e.value.errors) == [1]
    assert isinstance(e.value.errors[1], kbt.CollectiveError)
    msg = str(e.value.errors[1])
    assert "mismatched send/recv" in msg and f"send({data} float32, [3])" in msg and f"recv({data} float32, [2]" in msg


@pytest.mark.parametrize(("sent", "received"), [("real", "fake"), ("fake", "real"), ("meta", "fake"), ("real", "meta")])
def test_a_send_and_recv_that_disagree_on_what_their_tensors_hold_are_a_mismatch(sent: str, received: str) -> None:
    def body(rank: int, make: Callable[..., Any]) -> None:
        if rank == 0:
            dist.send(make(3), dst=1)
        else:
            dist.recv(make(3), src=0)

    with pytest.raises(kbthreads.SpawnException) as e:
        run(body, lambda rank: sent if rank == 0 else received)
    assert isinstance(e.value.errors[1], kbt.CollectiveError)
    assert f"a {sent} tensor sent into a {received} one" in str(e.value.errors[1])


def test_a_fake_tensors_known_value_travels_to_the_receiver() -> None:
    """torch.tensor of one element in a FakeTensorMode keeps its value
    (PyTorch's pipelining stages send such a vote and read its .item())."""

    def body(rank: int, make: Callable[..., Any]) -> Any:
        if rank == 0:
            vote = torch.tensor([3], dtype=torch.int32)
            dist.send(vote, dst=1)
            vote.add_(1)  # after the send: the receiver keeps what was sent
            return None
        got = torch.zeros(1, dtype=torch.int32)
        dist.recv(got, src=0)
        return (got * 2).item()

    out, _ = run(body, "fake")
    assert out[1] == 6


def test_a_receivers_known_value_goes_when_the_sent_tensor_has_none() -> None:
    def body(rank: int, make: Callable[..., Any]) -> Any:
        if rank == 0:
            dist.send(torch.empty(1), dst=1)  # a fake tensor whose value is unknown
            return None
        got = torch.tensor([5.0])
        view = got[0:1]
        dist.recv(got, src=0)
        outcomes = []
        for t in (got, view):
            try:
                outcomes.append(t.item())
            except DataDependentOutputException:
                outcomes.append("unknown")
        return outcomes

    out, _ = run(body, "fake")
    assert out[1] == ["unknown", "unknown"]
