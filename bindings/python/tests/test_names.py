# SPDX-License-Identifier: MIT
"""The package's public names: one base exception, a rank's object and its
old name, the compatibility function, and nothing private exported."""
from __future__ import annotations

import pytest

import kbthreads
import kbthreads.multiprocessing


def test_every_library_failure_shares_one_base_exception():
    for cls in (kbthreads.KbError, kbthreads.SpawnException, kbthreads.RankFailure, kbthreads.SpawnStopped,
                kbthreads.SpawnTimeout, kbthreads.SpawnDiverged):
        assert issubclass(cls, kbthreads.KbthreadsError), cls
    assert issubclass(kbthreads.SpawnException, RuntimeError) and issubclass(kbthreads.KbError, RuntimeError)


def test_a_failed_spawn_is_caught_by_the_base_exception():
    def fn(r: int) -> None:
        raise ValueError(r)

    with pytest.raises(kbthreads.KbthreadsError):
        kbthreads.spawn(fn, nprocs=2)


def test_worker_is_the_old_name_of_rank():
    assert kbthreads.Worker is kbthreads.Rank
    seen = []
    kbthreads.spawn(lambda r: seen.append(kbthreads.getcurrent()), nprocs=2)
    assert [type(w) for w in seen] == [kbthreads.Rank] * 2 and [w.rank for w in seen] == [0, 1]


def test_a_process_context_lists_its_ranks_under_both_names():
    with kbthreads.spawn(lambda r: None, nprocs=3, join=False) as pc:
        assert [r.rank for r in pc.ranks] == [0, 1, 2]
        assert pc.workers == pc.ranks
        assert pc.join() is True


def test_accelerated_is_always_true():
    assert kbthreads.accelerated() is True


def test_the_package_exports_public_names_only():
    assert all(not name.startswith("_") for name in kbthreads.__all__)
    assert all(hasattr(kbthreads, name) for name in kbthreads.__all__)
    assert kbthreads._MultiprocessingNamespace is kbthreads.MultiprocessingNamespace  # the reference's name
    assert kbthreads.multiprocessing.SpawnException is kbthreads.SpawnException
