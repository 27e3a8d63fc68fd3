# SPDX-License-Identifier: MIT
"""Bad torch.distributed programs on kbthreads ranks get an error, never a
hang: mismatched collectives raise in every rank involved, naming each
rank's call and line; ranks that can never complete are a collective
deadlock; bad setup is refused; a failing rank cancels the waiting ones,
whose finally blocks run."""
from __future__ import annotations

import re

import pytest

# kbthreads.torch needs PyTorch 2.x: the test venv has it (make test); an interpreter
# without it (make test-pythons, Debian's 1.13) skips these
torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402

import kbthreads  # noqa: E402
import kbthreads.torch as kbt  # noqa: E402
from torch_helpers import failure, run  # noqa: E402

HERE = __file__


def _line(fn, marker):
    """The line number of the line of fn's source containing marker."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if marker in ln)


def _assert_mismatch(e, ranks, what, body, marker):
    assert sorted(e.errors) == ranks
    line = _line(body, marker)
    for r, err in e.errors.items():
        assert isinstance(err, kbt.CollectiveError) and isinstance(err, RuntimeError)
        msg = str(err)
        assert "mismatched collective" in msg and f"the calls differ in {what}" in msg, msg
        for k in ranks:
            assert re.search(rf"rank {k}: .* at {re.escape(HERE)}:{line} in ", msg), msg


def test_shapes_that_differ_raise_in_every_rank_naming_each_call():
    def body(r, n):
        dist.all_reduce(torch.ones(3 if r != 1 else 4))  # the call

    _assert_mismatch(failure(body), [0, 1, 2], "shape", body, "# the call")


@pytest.mark.parametrize(
    "what, call",
    [
        ("kind", lambda r: dist.all_reduce(torch.ones(2)) if r else dist.broadcast(torch.ones(2), src=0)),
        ("dtype", lambda r: dist.all_reduce(torch.ones(2, dtype=torch.float64 if r == 2 else torch.float32))),
        ("reduce op", lambda r: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.MAX if r else dist.ReduceOp.MIN)),
        ("root", lambda r: dist.broadcast(torch.ones(2), src=r % 2)),
    ],
)
def test_each_kind_of_mismatch_is_named(what, call):
    e = failure(lambda r, n: call(r))
    assert sorted(e.errors) == [0, 1, 2]
    assert all(f"differ in {what}" in str(err) for err in e.errors.values())


def test_mismatched_all_to_all_split_sizes_are_reported():
    def body(r, n):
        out = torch.empty(3)
        inp = torch.ones(3)
        if r == 0:
            dist.all_to_all_single(out, inp, output_split_sizes=[1, 1, 1], input_split_sizes=[2, 0, 1])
        else:
            dist.all_to_all_single(out, inp)

    e = failure(body)
    assert "rank 0 sends 2 rows to rank 0, which expects 1" in str(e.errors[0])


def test_ranks_that_can_never_complete_are_a_collective_deadlock_with_every_ranks_call():
    def body(r, n):
        if r == 0:
            dist.all_reduce(torch.ones(1))  # rank 0 waits here
        elif r == 1:
            dist.broadcast(torch.ones(1), src=0)  # rank 1 waits here
        # rank 2 returns

    e = failure(body)
    assert sorted(e.errors) == [0, 1]
    msg = str(e.errors[0])
    assert msg == str(e.errors[1])
    assert msg.startswith("kbthreads.torch: collective deadlock: no rank can proceed")
    assert re.search(rf"rank 0: all_reduce\(float32, \[1\], op=SUM\) at {re.escape(HERE)}:"
                     rf"{_line(body, 'rank 0 waits')} in body", msg), msg
    assert re.search(rf"rank 1: broadcast\(float32, \[1\], root=0\) at .*:{_line(body, 'rank 1 waits')} ", msg), msg
    assert "rank 2: returned" in msg


def test_a_recv_with_no_sender_is_a_deadlock():
    def body(r, n):
        if r == 1:
            dist.recv(torch.empty(2), src=0)

    e = failure(body, n=2)
    assert "recv(float32 [2]) from rank 0" in str(e.errors[1]) and "rank 0: returned" in str(e.errors[1])


def test_a_send_and_recv_of_different_sizes_raise_in_the_receiver():
    def body(r, n):
        if r == 0:
            dist.send(torch.ones(3), dst=1)
        else:
            dist.recv(torch.empty(2), src=0)

    e = failure(body, n=2)
    assert "mismatched send/recv" in str(e.errors[1])


def test_a_rank_raising_cancels_the_ranks_waiting_in_collectives_in_rank_order():
    cleanup = []

    def rank_main(rank):
        dist.init_process_group("gloo")
        try:
            dist.all_reduce(torch.ones(1))  # every rank has started
            if rank == 2:
                raise ValueError("boom")
            dist.all_reduce(torch.ones(1))  # ranks 0 and 1 wait here when rank 2 fails
        finally:
            cleanup.append(rank)

    with pytest.raises(kbthreads.SpawnException) as ei:
        kbt.spawn(rank_main, nprocs=4)
    assert sorted(ei.value.errors) == [2] and isinstance(ei.value.errors[2], ValueError)
    # rank 2's own finally first, then the others in rank order (rank 3,
    # still at its first collective's return, is cancelled there)
    assert cleanup == [2, 0, 1, 3]


@pytest.mark.parametrize(
    "body, error, text",
    [
        (lambda r: dist.all_reduce(torch.ones(1)), ValueError, "Default process group has not been initialized"),
        (lambda r: [dist.init_process_group("gloo"), dist.init_process_group("gloo")], ValueError, "twice"),
        (lambda r: dist.init_process_group("gloo", rank=(r + 1) % 2, world_size=2), ValueError,
         "rank and world size come from the spawn"),
        (lambda r: dist.init_process_group("gloo", world_size=5), ValueError, "rank and world size come from the spawn"),
        (lambda r: dist.init_process_group("nccl"), ValueError, "CUDA collectives (nccl) are not simulated"),
        (lambda r: [dist.init_process_group("gloo"),
                    dist.all_gather_into_tensor(torch.empty(2), torch.ones(1, device="meta"))], ValueError,
         "all_gather_into_tensor mixes real and meta tensors in one call"),
        (lambda r: [dist.init_process_group("gloo"), dist.all_reduce(torch.ones(1), op=dist.ReduceOp.BAND)],
         ValueError, "BAND needs an integer or bool dtype"),
        (lambda r: [dist.init_process_group("gloo"), dist.broadcast(torch.ones(1), src=7)], ValueError, ""),
    ],
    ids=["before-init", "second-init", "wrong-rank", "wrong-world-size", "nccl", "real-and-meta-tensors", "band-float",
         "root-out-of-range"],
)
def test_bad_setup_is_a_clear_error(body, error, text):
    with pytest.raises(kbthreads.SpawnException) as ei:
        kbt.spawn(body, nprocs=2)
    err = ei.value.errors[min(ei.value.errors)]
    assert isinstance(err, error) and text in str(err), repr(err)
    # and the next spawn works
    assert run(lambda r, n: dist.get_world_size(), n=2) == {0: 2, 1: 2}


def test_the_kbthreads_backend_outside_a_spawn_is_refused():
    with pytest.raises(RuntimeError, match="serves only the ranks of kbthreads.torch.spawn"):
        dist.init_process_group("kbthreads", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


def test_a_store_read_no_rank_will_answer_is_a_deadlock_not_a_hang():
    def body(r, n):
        store = dist.distributed_c10d._get_default_store()
        if r == 0:
            store.get("never-set")  # rank 0 waits here

    e = failure(body, n=2)
    assert sorted(e.errors) == [0]
    msg = str(e.errors[0])
    assert "collective deadlock" in msg and "a store read of" in msg and "never-set" in msg and "rank 1: returned" in msg


def test_a_store_read_waits_for_another_ranks_write():
    def body(r, n):
        store = dist.distributed_c10d._get_default_store()
        if r == 0:
            return store.get("k")
        store.set("k", b"from rank 1")
        return None

    assert run(body, n=2)[0].endswith(b"from rank 1")
