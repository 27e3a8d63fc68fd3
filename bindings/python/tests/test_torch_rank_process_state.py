# SPDX-License-Identifier: MIT
"""Each rank's process-wide state its own in kbthreads.torch spawns (issue 53):
one test per row of docs/rank-state.md's process-wide table, the caller's
state unchanged after spawns that changed it in every rank (also after a
failure, a cancellation, join=False), and spawn's environ / argv keywords.

Every expected random stream is computed here the way a separate process
would draw it: a fresh torch.Generator, random.Random or RandomState seeded
alike. Ranks hand the baton over with kbthreads.yield_() or a collective, so
every rank runs between another's draws."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import signal
import subprocess
import sys
import types
import warnings
from typing import Any

import pytest

import kbthreads

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kbthreads.torch as kbt  # noqa: E402

np = pytest.importorskip("numpy")


def _spawn(body: Any, n: int = 3, **kw: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}

    def main(rank: int) -> None:
        out[rank] = body(rank)

    kbt.spawn(main, nprocs=n, **kw)
    return out


@pytest.fixture
def caller_env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("KB_RPS_BASE", "caller")
    return "KB_RPS_BASE"


# ---- the case -------------------------------------------------------------------------
def test_per_rank_seeds_give_each_rank_its_own_torch_random_and_numpy_streams_across_a_barrier():
    def body(rank: int) -> Any:
        seed = 1000 + rank
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed)
        dist.init_process_group("gloo")
        try:
            a = (torch.randn(3), random.random(), np.random.rand(3))
            dist.barrier()
            b = (torch.randn(3), random.random(), np.random.rand(3))
        finally:
            dist.destroy_process_group()
        return a, b

    got = _spawn(body, 3)
    for rank in range(3):
        g, pr, nr = torch.Generator().manual_seed(1000 + rank), random.Random(1000 + rank), np.random.RandomState(1000 + rank)
        for drawn in got[rank]:  # a, then b: the same stream continued
            assert torch.equal(drawn[0], torch.randn(3, generator=g)), rank
            assert drawn[1] == pr.random(), rank
            assert np.array_equal(drawn[2], nr.rand(3)), rank


# ---- torch's default generator ----------------------------------------------------------------
def test_torch_default_generator_is_per_rank_for_seeding_state_and_every_drawing_op():
    def body(rank: int) -> Any:
        torch.manual_seed(7 + rank)
        a = torch.randint(0, 1000, (4,))
        kbthreads.yield_()
        b = torch.randperm(8)
        seed = torch.initial_seed()
        state = torch.get_rng_state()
        kbthreads.yield_()
        c = torch.rand(2)
        torch.set_rng_state(state)
        kbthreads.yield_()
        d = torch.rand(2)
        return a, b, seed, c, d

    got = _spawn(body, 3)
    for rank, (a, b, seed, c, d) in got.items():
        g = torch.Generator().manual_seed(7 + rank)
        assert torch.equal(a, torch.randint(0, 1000, (4,), generator=g))
        assert torch.equal(b, torch.randperm(8, generator=g))
        assert seed == 7 + rank
        assert torch.equal(c, torch.rand(2, generator=g))
        assert torch.equal(d, c)  # set_rng_state rewound this rank's generator only


def test_torch_seed_in_a_rank_reseeds_only_that_rank():
    def body(rank: int) -> Any:
        torch.manual_seed(60 + rank)
        kbthreads.yield_()
        new = torch.seed() if rank == 0 else None  # from the OS: a seed no other rank has
        kbthreads.yield_()
        return new, torch.initial_seed()

    got = _spawn(body, 2)
    assert got[0][1] == got[0][0]
    assert got[1] == (None, 61)


def _loader_draws() -> tuple[int, list[int]]:
    """A DataLoader's base seed (what its workers are seeded from; read from
    its iterator) and a shuffled epoch's order: both drawn from the default
    generator."""
    loader = torch.utils.data.DataLoader(range(10), shuffle=True, batch_size=None)
    it = iter(loader)
    return it._base_seed, [int(x) for x in it]


def test_dropout_and_a_dataloaders_base_seed_and_shuffle_draw_from_the_ranks_own_generator():
    def body(rank: int) -> Any:
        torch.manual_seed(50 + rank)
        kbthreads.yield_()
        mask = F.dropout(torch.ones(16), 0.5, training=True)
        kbthreads.yield_()
        return mask, _loader_draws()

    got = _spawn(body, 3)
    for rank in range(3):
        with torch.random.fork_rng(devices=[]):  # what a process seeded alike draws
            torch.manual_seed(50 + rank)
            mask = F.dropout(torch.ones(16), 0.5, training=True)
            loader = _loader_draws()
        assert torch.equal(got[rank][0], mask), rank
        assert got[rank][1] == loader, rank
    assert len({got[r][1][0] for r in range(3)}) == 3  # three streams, not one shared


def test_each_rank_starts_from_a_copy_of_the_callers_torch_generator():
    fresh = torch.Generator().get_state()  # a process that never drew: torch's default seed
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(fresh)
        got = _spawn(lambda rank: (torch.initial_seed(), torch.randn(2), kbthreads.yield_(), torch.randn(2)), 3)
        after = torch.get_rng_state()
    expected_g = torch.Generator()
    first, second = torch.randn(2, generator=expected_g), torch.randn(2, generator=expected_g)
    for seed, a, _, b in got.values():
        assert seed == torch.Generator().initial_seed()
        assert torch.equal(a, first) and torch.equal(b, second)
    assert torch.equal(after, fresh)  # the caller's generator did not move


# ---- random and numpy -------------------------------------------------------------------------
def test_random_module_functions_are_per_rank_also_when_imported_by_name_in_the_rank():
    def body(rank: int) -> Any:
        random.seed(200 + rank)
        a = random.random()
        kbthreads.yield_()
        from random import randint  # read inside the rank: the rank's

        b = randint(0, 10**9)
        kbthreads.yield_()
        return a, b, random.getstate(), random.choice("abcdefgh")

    got = _spawn(body, 3)
    for rank, (a, b, state, c) in got.items():
        r = random.Random(200 + rank)
        assert (a, b) == (r.random(), r.randint(0, 10**9))
        assert state == r.getstate()
        assert c == r.choice("abcdefgh")


def test_numpy_legacy_global_random_state_is_per_rank():
    def body(rank: int) -> Any:
        np.random.seed(300 + rank)
        a = np.random.rand(2)
        kbthreads.yield_()
        b = np.random.randint(0, 100, 3)
        state = np.random.get_state()
        kbthreads.yield_()
        c = np.random.mtrand._rand.normal()
        return a, b, state[1][:4].copy(), c

    got = _spawn(body, 3)
    for rank, (a, b, key, c) in got.items():
        r = np.random.RandomState(300 + rank)
        assert np.array_equal(a, r.rand(2))
        assert np.array_equal(b, r.randint(0, 100, 3))
        assert np.array_equal(key, r.get_state()[1][:4])
        assert c == r.normal()


def test_numpy_set_bit_generator_in_a_rank_replaces_only_that_ranks_global_state():
    def body(rank: int) -> Any:
        np.random.set_bit_generator(np.random.MT19937(400 + rank))
        kbthreads.yield_()
        return np.random.rand(2), np.random.get_bit_generator()

    before = np.random.get_bit_generator()
    got = _spawn(body, 2)
    for rank, (drawn, bitgen) in got.items():
        assert np.array_equal(drawn, np.random.RandomState(np.random.MT19937(400 + rank)).rand(2))
        assert bitgen is not before
    assert np.random.get_bit_generator() is before


@pytest.mark.parametrize("bitgen", ["MT19937", "PCG64"])
def test_each_rank_starts_from_a_copy_of_the_callers_random_and_numpy_states(bitgen):
    before_random, before_numpy = random.getstate(), np.random.get_bit_generator()
    random.seed(9)
    np.random.set_bit_generator(getattr(np.random, bitgen)(9))
    try:
        got = _spawn(lambda rank: (random.random(), kbthreads.yield_(), random.random(), np.random.rand(3)), 3)
        caller = (random.random(), np.random.rand(3))
    finally:
        random.setstate(before_random)
        np.random.set_bit_generator(before_numpy)
    r, rs = random.Random(9), np.random.RandomState(getattr(np.random, bitgen)(9))
    expected = (r.random(), None, r.random(), rs.rand(3))
    for a, _, b, c in got.values():
        assert (a, b) == (expected[0], expected[2])
        assert np.array_equal(c, expected[3])
    assert caller[0] == random.Random(9).random()  # the caller's states did not move
    assert np.array_equal(caller[1], np.random.RandomState(getattr(np.random, bitgen)(9)).rand(3))


# ---- environment, argv, excepthook, __main__, stdout -----------------------------------------
def test_os_environ_is_per_rank_starting_from_the_callers_plus_environ_entries(caller_env_key):
    def body(rank: int) -> Any:
        seen = (os.environ[caller_env_key], os.getenv("KB_RPS_RANK"), os.environb.get(b"KB_RPS_RANK"))
        os.environ["KB_RPS_OWN"] = str(rank)
        kbthreads.yield_()
        return seen, os.environ["KB_RPS_OWN"], os.getenv("KB_RPS_OWN")

    got = _spawn(body, 3, environ=lambda r: {"KB_RPS_RANK": str(r)})
    for rank, (seen, own, own_getenv) in got.items():
        assert seen == ("caller", str(rank), str(rank).encode())
        assert own == own_getenv == str(rank)
    assert "KB_RPS_RANK" not in os.environ and "KB_RPS_OWN" not in os.environ


def test_os_putenv_and_unsetenv_in_a_rank_leave_other_ranks_environ_alone(caller_env_key):
    def body(rank: int) -> Any:
        if rank == 0:
            os.putenv("KB_RPS_PUT", "0")
            os.unsetenv(caller_env_key)
        kbthreads.yield_()
        return os.environ.get("KB_RPS_PUT"), os.getenv(caller_env_key)

    try:
        got = _spawn(body, 2)
    finally:
        os.unsetenv("KB_RPS_PUT")
        os.putenv(caller_env_key, "caller")
    assert got == {0: (None, "caller"), 1: (None, "caller")}


def _child_sees(*names: str, env: Any = None) -> list[str]:
    code = "import os, sys; print(' '.join(str(os.environ.get(n)) for n in sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, *names], env=env, capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_a_subprocess_inherits_the_process_environment_and_a_rank_passes_its_own_with_env():
    def body(rank: int) -> Any:
        os.environ["KB_RPS_SUB"] = str(rank)  # written through os.environ: putenv too
        inherited = _child_sees("KB_RPS_SUB", "KB_RPS_RANK")
        own = _child_sees("KB_RPS_SUB", "KB_RPS_RANK", env=os.environ)
        kbthreads.yield_()
        return inherited, own

    got = _spawn(body, 2, environ=lambda r: {"KB_RPS_RANK": str(r)})
    for rank, (inherited, own) in got.items():
        assert inherited == [str(rank), "None"]  # the C environment: entries are the rank's own
        assert own == [str(rank), str(rank)]
    assert _child_sees("KB_RPS_SUB") == ["None"]  # the ranks' writes undone in the C environment


def test_sys_argv_is_per_rank_from_argv_or_a_copy_of_the_callers():
    def body(rank: int) -> Any:
        sys.argv.append(f"extra{rank}")
        kbthreads.yield_()
        return list(sys.argv)

    caller = list(sys.argv)
    given = _spawn(body, 3, argv=lambda r: ["train.py", f"--rank={r}"])
    copied = _spawn(body, 2)
    assert given == {r: ["train.py", f"--rank={r}", f"extra{r}"] for r in range(3)}
    assert copied == {r: [*caller, f"extra{r}"] for r in range(2)}
    assert sys.argv == caller


def test_a_ranks_uncaught_error_is_printed_with_exactly_one_rank_prefix_its_own():
    def body(rank: int) -> str:
        dist.init_process_group("gloo")  # wraps this rank's sys.excepthook
        try:
            dist.barrier()  # every rank has wrapped its own by now
            try:
                raise ValueError(f"boom in {rank}")
            except ValueError:
                buf = io.StringIO()
                with contextlib.redirect_stderr(buf):
                    sys.excepthook(*sys.exc_info())
            return buf.getvalue()
        finally:
            dist.destroy_process_group()

    hook = sys.excepthook
    got = _spawn(body, 3)
    for rank, text in got.items():
        lines = [line for line in text.splitlines() if line]
        assert lines and any(f"ValueError: boom in {rank}" in line for line in lines)
        assert all(line.startswith(f"[rank{rank}]: ") for line in lines), text
        assert not any("[rank" in line[len(f"[rank{rank}]: ") :] for line in lines), text
    assert sys.excepthook is hook


def test_sys_modules_main_set_in_a_rank_stays_that_ranks():
    def body(rank: int) -> Any:
        sys.modules["__main__"] = types.ModuleType(f"main_of_{rank}")
        kbthreads.yield_()
        return sys.modules["__main__"].__name__

    main = sys.modules["__main__"]
    assert _spawn(body, 3) == {r: f"main_of_{r}" for r in range(3)}
    assert sys.modules["__main__"] is main


def test_redirect_stdout_in_a_rank_captures_only_that_ranks_prints(capsys):
    def body(rank: int) -> str:
        buf = io.StringIO()
        if rank == 0:
            with contextlib.redirect_stdout(buf):
                print("rank 0 before")
                kbthreads.yield_()  # rank 1 prints meanwhile
                print("rank 0 after")
        else:
            print(f"rank {rank} plain")
            kbthreads.yield_()
        return buf.getvalue()

    got = _spawn(body, 2)
    assert got[0] == "rank 0 before\nrank 0 after\n"
    assert capsys.readouterr().out == "rank 1 plain\n"


# ---- the shared rows --------------------------------------------------------------------------
def _set_then_read(set_in_rank0: Any, read: Any) -> Any:
    """Rank 0 sets, yields; rank 1 reads: what rank 1 saw."""

    def body(rank: int) -> Any:
        if rank == 0:
            set_in_rank0()
        kbthreads.yield_()
        return read() if rank == 1 else None

    return _spawn(body, 2)[1]


def test_torch_set_default_dtype_in_a_rank_is_seen_by_every_rank():
    before = torch.get_default_dtype()
    try:
        seen = _set_then_read(lambda: torch.set_default_dtype(torch.float64), torch.get_default_dtype)
    finally:
        torch.set_default_dtype(before)
    assert seen == torch.float64


def test_torch_set_default_device_is_per_rank_and_a_rank_starts_on_cpu():
    def body(rank: int) -> Any:
        start = torch.empty(1).device.type
        if rank == 0:
            torch.set_default_device("meta")
        kbthreads.yield_()
        now = torch.empty(1).device.type
        if rank == 0:
            torch.set_default_device(None)
        return start, now

    torch.set_default_device("meta")  # the caller's: not a rank's
    try:
        got = _spawn(body, 2)
    finally:
        torch.set_default_device(None)
    assert got == {0: ("cpu", "meta"), 1: ("cpu", "cpu")}


def test_torch_set_num_threads_in_a_rank_is_seen_by_every_rank():
    before = torch.get_num_threads()
    other = 2 if before != 2 else 1
    try:
        seen = _set_then_read(lambda: torch.set_num_threads(other), torch.get_num_threads)
    finally:
        torch.set_num_threads(before)
    assert seen == other


def test_torch_backends_flags_set_in_a_rank_are_seen_by_every_rank():
    before = torch.backends.cudnn.deterministic

    def flip() -> None:
        torch.backends.cudnn.deterministic = not before

    try:
        seen = _set_then_read(flip, lambda: torch.backends.cudnn.deterministic)
    finally:
        torch.backends.cudnn.deterministic = before
    assert seen is (not before)


def test_warnings_filters_set_in_a_rank_apply_to_every_rank():
    def warn() -> str:
        try:
            warnings.warn("kb-rps-probe", UserWarning, stacklevel=1)
        except UserWarning:
            return "raised"
        return "warned"

    with warnings.catch_warnings():  # the caller's filters back afterwards
        warnings.simplefilter("ignore")
        seen = _set_then_read(lambda: warnings.filterwarnings("error", message="kb-rps-probe"), warn)
    assert seen == "raised"


def test_logging_configuration_set_in_a_rank_is_seen_by_every_rank():
    log = logging.getLogger("kbthreads.tests.rank_process_state")
    try:
        seen = _set_then_read(lambda: log.setLevel(logging.DEBUG), log.getEffectiveLevel)
    finally:
        log.setLevel(logging.NOTSET)
    assert seen == logging.DEBUG


def test_the_working_directory_changed_in_a_rank_is_every_ranks(tmp_path):
    before = os.getcwd()
    try:
        seen = _set_then_read(lambda: os.chdir(tmp_path), os.getcwd)
    finally:
        os.chdir(before)
    assert os.path.samefile(seen, tmp_path)


def test_a_rank_cannot_set_a_signal_handler_as_no_thread_but_the_main_one_can():
    def body(rank: int) -> str:
        try:
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        except ValueError as e:
            return str(e)
        return "set"

    before = signal.getsignal(signal.SIGUSR1)
    got = _spawn(body, 2)
    assert all("main thread" in text for text in got.values()), got
    assert signal.getsignal(signal.SIGUSR1) == before


# ---- the caller's state after a spawn ---------------------------------------------------------
def _change_everything(rank: int) -> None:
    torch.manual_seed(rank)
    random.seed(rank)
    np.random.seed(rank)
    torch.randn(5), random.random(), np.random.rand(5)
    os.environ["KB_RPS_CHANGED"] = str(rank)
    os.environ.pop("KB_RPS_BASE", None)
    sys.argv[:] = [f"rank{rank}"]
    sys.argv = [f"rank{rank}", "again"]
    sys.modules["__main__"] = types.ModuleType(f"main{rank}")
    sys.stdout = io.StringIO()


def _caller_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "random": random.getstate(),
        "numpy": np.random.get_state()[1].copy(),
        "environ": dict(os.environ),
        "environ object": os.environ,
        "argv": list(sys.argv),
        "argv object": sys.argv,
        "excepthook": sys.excepthook,
        "main": sys.modules["__main__"],
        "stdout": sys.stdout,
    }


def _assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert torch.equal(before["torch"], after["torch"])
    assert before["random"] == after["random"]
    assert np.array_equal(before["numpy"], after["numpy"])
    for k in ("environ", "argv"):
        assert before[k] == after[k], k
    for k in ("environ object", "argv object", "excepthook", "main", "stdout"):
        assert before[k] is after[k], k


def test_the_callers_rngs_environment_argv_excepthook_main_and_stdout_are_unchanged_after_a_spawn(caller_env_key):
    def body(rank: int) -> None:
        dist.init_process_group("gloo")  # wraps sys.excepthook
        try:
            _change_everything(rank)
            dist.barrier()
        finally:
            dist.destroy_process_group()

    torch.manual_seed(5), random.seed(5), np.random.seed(5)
    before = _caller_state()
    kbt.spawn(body, nprocs=3)
    _assert_same(before, _caller_state())
    assert torch.equal(torch.randn(2), torch.randn(2, generator=torch.Generator().manual_seed(5)))


def test_the_callers_state_is_unchanged_after_a_failed_spawn_with_cancelled_ranks(caller_env_key):
    def body(rank: int) -> None:
        _change_everything(rank)
        kbthreads.yield_()
        if rank == 1:
            raise RuntimeError("rank 1 fails")
        while True:
            kbthreads.yield_()  # cancelled here

    before = _caller_state()
    with pytest.raises(kbthreads.SpawnException):
        kbt.spawn(body, nprocs=3)
    _assert_same(before, _caller_state())


def test_a_cancelled_ranks_cleanup_runs_with_its_own_state():
    seen: dict[int, Any] = {}

    def body(rank: int) -> None:
        sys.argv = [f"rank{rank}"]
        torch.manual_seed(rank)
        try:
            kbthreads.yield_()
            if rank == 2:
                raise RuntimeError("rank 2 fails")
            while True:
                kbthreads.yield_()
        finally:
            seen[rank] = (list(sys.argv), torch.initial_seed())

    with pytest.raises(kbthreads.SpawnException):
        kbt.spawn(body, nprocs=3)
    assert seen == {r: ([f"rank{r}"], r) for r in range(3)}


def test_the_caller_has_its_own_state_between_join_slices_of_a_join_false_spawn():
    stop = []
    seen: dict[int, Any] = {}

    def body(rank: int) -> None:
        sys.argv = [f"rank{rank}"]
        torch.manual_seed(rank)
        while not stop:
            kbthreads.yield_()
        seen[rank] = (list(sys.argv), torch.initial_seed())

    torch.manual_seed(11)
    before = _caller_state()
    pc = kbt.spawn(body, nprocs=2, join=False)
    assert pc.join(0.05) is False  # the ranks ran, and are parked
    _assert_same(before, _caller_state())
    stop.append(True)
    assert pc.join() is True
    _assert_same(before, _caller_state())
    assert seen == {0: (["rank0"], 0), 1: (["rank1"], 1)}


def test_the_callers_state_comes_back_when_a_join_false_spawn_is_closed():
    def body(rank: int) -> None:
        _change_everything(rank)
        while True:
            kbthreads.yield_()

    before = _caller_state()
    pc = kbt.spawn(body, nprocs=2, join=False)
    assert pc.join(0.02) is False
    pc.close()
    _assert_same(before, _caller_state())


def test_a_spawn_run_while_another_is_installed_keeps_each_ranks_own_state():
    def body(tag: str) -> Any:
        def main(rank: int) -> None:
            torch.manual_seed(len(tag) * 10 + rank)
            kbthreads.yield_()
            seen[tag, rank] = (os.environ["KB_RPS_TAG"], list(sys.argv), torch.randn(1))

        return main

    seen: dict[Any, Any] = {}
    first = kbt.spawn(body("a"), nprocs=2, join=False, environ={"KB_RPS_TAG": "a"}, argv=["a"])
    kbt.spawn(body("bb"), nprocs=2, environ={"KB_RPS_TAG": "bb"}, argv=["bb"])
    assert first.join() is True
    for (tag, rank), (env, argv, x) in seen.items():
        assert (env, argv) == (tag, [tag])
        assert torch.equal(x, torch.randn(1, generator=torch.Generator().manual_seed(len(tag) * 10 + rank)))
    assert len(seen) == 4 and "KB_RPS_TAG" not in os.environ


def test_a_contexts_next_spawn_starts_its_ranks_from_the_callers_state_again():
    ctx = kbthreads.Context()

    def first(rank: int) -> None:
        sys.argv = ["left", "behind"]
        os.environ["KB_RPS_LEFT"] = "1"
        torch.manual_seed(99)

    def second(rank: int) -> None:
        seen[rank] = (list(sys.argv), os.environ.get("KB_RPS_LEFT"), torch.initial_seed())

    seen: dict[int, Any] = {}
    try:
        kbt.spawn(first, nprocs=2, context=ctx)
        kbt.spawn(second, nprocs=2, context=ctx)  # the same parked threads
    finally:
        ctx.close()
    caller_seed = torch.initial_seed()
    assert seen == {r: (sys.argv, None, caller_seed) for r in range(2)}


def test_a_plain_kbthreads_spawn_keeps_nothing_per_rank():
    def body(rank: int) -> Any:
        if rank == 0:
            sys.argv = ["set by rank 0"]
        kbthreads.yield_()
        return list(sys.argv), type(random) is types.ModuleType

    before = sys.argv
    out: dict[int, Any] = {}
    try:
        kbthreads.spawn(lambda r: out.__setitem__(r, body(r)), nprocs=2)
    finally:
        sys.argv = before
    assert out[1] == (["set by rank 0"], True)  # shared, as before: only kbthreads.torch swaps


# ---- the keywords' bad values -----------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, error",
    [
        ({"environ": 5}, TypeError),
        ({"environ": {"A": 1}}, TypeError),
        ({"environ": {1: "a"}}, TypeError),
        ({"environ": {"A=B": "x"}}, ValueError),
        ({"environ": {"": "x"}}, ValueError),
        ({"environ": {"A": "x\0y"}}, ValueError),
        ({"environ": lambda r: None}, TypeError),
        ({"environ": lambda r: {"A": r}}, TypeError),
        ({"argv": "train.py"}, TypeError),
        ({"argv": [1]}, TypeError),
        ({"argv": 5}, TypeError),
        ({"argv": lambda r: "train.py"}, TypeError),
        ({"argv": lambda r: [r]}, TypeError),
    ],
)
def test_spawn_refuses_a_bad_environ_or_argv_before_any_rank_starts(kw, error):
    started = []
    with pytest.raises(error, match="kbthreads.torch.spawn: (environ|argv)"):
        kbt.spawn(lambda rank: started.append(rank), nprocs=2, **kw)
    assert started == []
    assert type(random) is types.ModuleType  # nothing left installed
