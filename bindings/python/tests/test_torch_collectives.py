# SPDX-License-Identifier: MIT
"""Every collective of torch.distributed on kbthreads ranks, against values
worked out by hand, synchronous and with async_op=True, on the default
group and on a subgroup. Ranks contribute distinct values so that a wrong
rank, order or root shows."""
from __future__ import annotations

import pytest

# kbthreads.torch needs PyTorch 2.x: the test venv has it (make test); an interpreter
# without it (make test-pythons, Debian's 1.13) skips these
torch = pytest.importorskip("torch", minversion="2.0")
import torch.distributed as dist  # noqa: E402

from torch_helpers import run  # noqa: E402

N = 4
ASYNC = [False, True]


def _do(fn, *args, async_op=False, **kw):
    w = fn(*args, async_op=async_op, **kw)
    if async_op:
        assert w is not None
        assert w.wait() is True
        assert w.is_completed()
    return w


def _sub(r):
    """The subgroup of odd ranks [1, 3] (None for the even ones)."""
    g = dist.new_group([1, 3])
    return g if r % 2 else None


@pytest.mark.parametrize("async_op", ASYNC)
@pytest.mark.parametrize(
    "op, dtype, expected",
    [
        ("SUM", torch.float32, [1 + 2 + 3 + 4] * 2),
        ("AVG", torch.float32, [(1 + 2 + 3 + 4) / 4] * 2),
        ("PRODUCT", torch.float32, [1 * 2 * 3 * 4] * 2),
        ("MIN", torch.float32, [1, 1]),
        ("MAX", torch.float32, [4, 4]),
        ("BAND", torch.int64, [1 & 2 & 3 & 4] * 2),
        ("BOR", torch.int64, [1 | 2 | 3 | 4] * 2),
        ("BXOR", torch.int64, [1 ^ 2 ^ 3 ^ 4] * 2),
    ],
)
def test_all_reduce_each_op(op, dtype, expected, async_op):
    def body(r, n):
        t = torch.full((2,), r + 1, dtype=dtype)
        _do(dist.all_reduce, t, op=getattr(dist.ReduceOp, op), async_op=async_op)
        return t.tolist()

    assert run(body) == {r: expected for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_all_reduce_premul_sum_scales_every_input(async_op):
    def body(r, n):
        t = torch.full((3,), float(r + 1))
        _do(dist.all_reduce, t, op=dist._make_nccl_premul_sum(0.5), async_op=async_op)
        return t.tolist()

    assert run(body) == {r: [5.0] * 3 for r in range(N)}


def test_all_reduce_sums_in_rank_order_like_a_sequential_loop():
    # float32 values whose sum depends on the order of the additions
    vals = [torch.tensor([1e8, 1.0, -1e8, 3.14159], dtype=torch.float32) * (k + 1) ** 3 for k in range(N)]
    seq = vals[0].clone()
    for v in vals[1:]:
        seq += v

    def body(r, n):
        t = vals[r].clone()
        dist.all_reduce(t)
        return t

    for t in run(body).values():
        assert torch.equal(t, seq)


def test_all_reduce_on_a_subgroup_combines_only_its_members():
    def body(r, n):
        g = _sub(r)
        t = torch.full((1,), float(r))
        if g is not None:
            dist.all_reduce(t, group=g)
        return t.item()

    assert run(body) == {0: 0.0, 1: 4.0, 2: 2.0, 3: 4.0}


@pytest.mark.parametrize("async_op", ASYNC)
def test_broadcast_copies_the_roots_tensor(async_op):
    def body(r, n):
        t = torch.full((2,), float(r * 10))
        _do(dist.broadcast, t, src=2, async_op=async_op)
        return t.tolist()

    assert run(body) == {r: [20.0, 20.0] for r in range(N)}


def test_broadcast_on_a_subgroup_takes_a_global_source_rank():
    def body(r, n):
        g = _sub(r)
        t = torch.full((1,), float(r))
        if g is not None:
            dist.broadcast(t, src=3, group=g)
        return t.item()

    assert run(body) == {0: 0.0, 1: 3.0, 2: 2.0, 3: 3.0}


@pytest.mark.parametrize("async_op", ASYNC)
def test_reduce_leaves_the_result_on_the_root_only(async_op):
    def body(r, n):
        t = torch.full((1,), float(r + 1))
        _do(dist.reduce, t, dst=1, op=dist.ReduceOp.PRODUCT, async_op=async_op)
        return t.item()

    assert run(body) == {0: 1.0, 1: 24.0, 2: 3.0, 3: 4.0}


@pytest.mark.parametrize("async_op", ASYNC)
def test_all_gather_gives_every_rank_every_input_in_rank_order(async_op):
    def body(r, n):
        outs = [torch.empty(2, dtype=torch.int32) for _ in range(n)]
        _do(dist.all_gather, outs, torch.tensor([r, -r], dtype=torch.int32), async_op=async_op)
        return [o.tolist() for o in outs]

    assert run(body) == {r: [[k, -k] for k in range(N)] for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_all_gather_into_tensor_concatenates_and_stacks(async_op):
    def body(r, n):
        cat = torch.empty(2 * n)
        _do(dist.all_gather_into_tensor, cat, torch.tensor([r, r + 0.5]), async_op=async_op)
        stack = torch.empty(n, 2)
        _do(dist.all_gather_into_tensor, stack, torch.tensor([r, r + 0.5]), async_op=async_op)
        return cat.tolist(), stack.tolist()

    flat = [x for k in range(N) for x in (k, k + 0.5)]
    assert run(body) == {r: (flat, [[k, k + 0.5] for k in range(N)]) for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_gather_collects_on_the_root(async_op):
    def body(r, n):
        outs = [torch.empty(1) for _ in range(n)] if r == 3 else None
        _do(dist.gather, torch.tensor([float(r * r)]), outs, dst=3, async_op=async_op)
        return None if outs is None else [o.item() for o in outs]

    assert run(body) == {0: None, 1: None, 2: None, 3: [0.0, 1.0, 4.0, 9.0]}


@pytest.mark.parametrize("async_op", ASYNC)
def test_scatter_hands_each_rank_its_piece_of_the_roots_list(async_op):
    def body(r, n):
        out = torch.empty(2)
        ins = [torch.tensor([k, 100.0 + k]) for k in range(n)] if r == 0 else None
        _do(dist.scatter, out, ins, src=0, async_op=async_op)
        return out.tolist()

    assert run(body) == {r: [float(r), 100.0 + r] for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_reduce_scatter_reduces_piece_k_onto_rank_k(async_op):
    def body(r, n):
        out = torch.empty(1)
        ins = [torch.tensor([float(10 * r + k)]) for k in range(n)]
        _do(dist.reduce_scatter, out, ins, op=dist.ReduceOp.MAX, async_op=async_op)
        return out.item()

    assert run(body) == {r: float(30 + r) for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_reduce_scatter_tensor_sums_chunk_k_onto_rank_k(async_op):
    def body(r, n):
        out = torch.empty(2)
        inp = torch.arange(2 * n, dtype=torch.float32) + r
        _do(dist.reduce_scatter_tensor, out, inp, async_op=async_op)
        return out.tolist()

    # element j of the input on rank r is j + r; summed over r: 4j + 6
    assert run(body) == {r: [4.0 * (2 * r) + 6, 4.0 * (2 * r + 1) + 6] for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_all_to_all_exchanges_piece_k_with_rank_k(async_op):
    def body(r, n):
        outs = [torch.empty(1) for _ in range(n)]
        _do(dist.all_to_all, outs, [torch.tensor([10.0 * r + k]) for k in range(n)], async_op=async_op)
        return [o.item() for o in outs]

    assert run(body) == {r: [10.0 * k + r for k in range(N)] for r in range(N)}


@pytest.mark.parametrize("async_op", ASYNC)
def test_all_to_all_single_with_equal_and_uneven_split_sizes(async_op):
    def body(r, n):
        out = torch.empty(n)
        _do(dist.all_to_all_single, out, torch.arange(n, dtype=torch.float32) + 10 * r, async_op=async_op)
        # rank r sends k+1 rows to rank k, so rank r receives r+1 rows from everyone
        ins = [torch.full((k + 1,), float(10 * r + k)) for k in range(n)]
        inp = torch.cat(ins)
        uneven = torch.empty(n * (r + 1))
        _do(dist.all_to_all_single, uneven, inp, output_split_sizes=[r + 1] * n,
            input_split_sizes=[k + 1 for k in range(n)], async_op=async_op)
        return out.tolist(), uneven.tolist()

    out = run(body)
    for r in range(N):
        assert out[r][0] == [10.0 * k + r for k in range(N)]
        assert out[r][1] == [float(10 * k + r) for k in range(N) for _ in range(r + 1)]


@pytest.mark.parametrize("async_op", ASYNC)
def test_barrier_returns_after_every_rank_arrived(async_op):
    order = []

    def body(r, n):
        order.append(("before", r))
        w = dist.barrier(async_op=async_op)
        if async_op:
            w.wait()
        order.append(("after", r))

    run(body)
    assert order[:N] == [("before", r) for r in range(N)]
    assert sorted(order[N:]) == [("after", r) for r in range(N)]


def test_send_and_recv_and_their_nonblocking_forms():
    def body(r, n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        got = torch.empty(2)
        # everyone posts its receive first: only a non-blocking irecv allows it
        req = dist.irecv(got, src=prv)
        dist.send(torch.tensor([float(r), -1.0]), dst=nxt)
        req.wait()
        blocking = torch.empty(1)
        if r == 0:
            dist.send(torch.tensor([42.0]), dst=3)
        if r == 3:
            dist.recv(blocking, src=0)
        return got.tolist(), blocking.item() if r == 3 else None

    out = run(body)
    assert {r: v[0] for r, v in out.items()} == {r: [float((r - 1) % N), -1.0] for r in range(N)}
    assert out[3][1] == 42.0


def test_recv_from_any_source_reports_the_sender():
    def body(r, n):
        if r == 2:
            dist.send(torch.tensor([7.0]), dst=0)
        if r == 0:
            t = torch.empty(1)
            src = dist.recv(t)
            return src, t.item()
        return None

    assert run(body)[0] == (2, 7.0)


def test_batch_isend_irecv_exchanges_around_a_ring():
    def body(r, n):
        send, recv = torch.full((3,), float(r)), torch.empty(3)
        ops = [dist.P2POp(dist.isend, send, (r + 1) % n), dist.P2POp(dist.irecv, recv, (r - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return recv.tolist()

    assert run(body) == {r: [float((r - 1) % N)] * 3 for r in range(N)}


def test_object_collectives():
    def body(r, n):
        objs = [None] * n
        dist.all_gather_object(objs, {"rank": r, "sq": r * r})
        lst = [f"from {r}", r] if r == 1 else [None, None]
        dist.broadcast_object_list(lst, src=1)
        gathered = [None] * n if r == 2 else None
        dist.gather_object(("g", r), gathered, dst=2)
        got = [None]
        dist.scatter_object_list(got, [f"piece {k}" for k in range(n)] if r == 3 else None, src=3)
        return objs, lst, gathered, got[0]

    out = run(body)
    for r in range(N):
        objs, lst, gathered, got = out[r]
        assert objs == [{"rank": k, "sq": k * k} for k in range(N)]
        assert lst == ["from 1", 1]
        assert gathered == ([("g", k) for k in range(N)] if r == 2 else None)
        assert got == f"piece {r}"


def test_async_work_futures_hold_the_result():
    def body(r, n):
        t = torch.full((2,), float(r))
        w = dist.all_reduce(t, async_op=True)
        fut = w.get_future()
        return [x.tolist() for x in fut.value()], w.is_success(), w.exception()

    assert run(body) == {r: ([[6.0, 6.0]], True, None) for r in range(N)}


def test_polling_is_completed_lets_the_collective_complete():
    def body(r, n):
        t = torch.full((1,), float(r))
        w = dist.all_reduce(t, async_op=True)
        while not w.is_completed():  # each poll that finds it incomplete gives a round
            pass
        return t.item()

    assert run(body) == {r: 6.0 for r in range(N)}
