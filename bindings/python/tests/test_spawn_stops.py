# SPDX-License-Identifier: MIT
"""Spawns the library stops with ranks still live: the round limit
(KB_MAX_ROUNDS) and a replay that no longer matches (KB_REPLAY) raise
SpawnStopped (or a subclass) carrying the library's report and the live ranks."""
from __future__ import annotations

import pytest

import kbthreads


def yields(r: int, n: int) -> None:
    for _ in range(n):
        kbthreads.yield_()


def test_the_round_limit_raises_spawn_timeout_naming_the_live_ranks(monkeypatch):
    monkeypatch.setenv("KB_MAX_ROUNDS", "5")
    with pytest.raises(kbthreads.SpawnTimeout) as ei:
        kbthreads.spawn(yields, (100,), nprocs=2)
    e = ei.value
    assert isinstance(e, kbthreads.SpawnStopped) and isinstance(e, kbthreads.SpawnException)
    assert "5 rounds" in e.report and str(e) == e.report
    assert "kb_spawn_error" not in str(e)
    assert e.live == [kbthreads.LiveRank(0, "yield", None), kbthreads.LiveRank(1, "yield", None)]
    assert e.errors == {}


def test_a_spawn_after_a_round_limit_runs_on_the_same_context(monkeypatch):
    monkeypatch.setenv("KB_MAX_ROUNDS", "3")
    with pytest.raises(kbthreads.SpawnTimeout):
        kbthreads.spawn(yields, (10,), nprocs=3)
    assert kbthreads.spawn(yields, (2,), nprocs=3) is None


def test_a_joined_round_limit_raises_spawn_timeout_from_join(monkeypatch):
    monkeypatch.setenv("KB_MAX_ROUNDS", "4")
    with kbthreads.spawn(yields, (10,), nprocs=2, join=False) as pc:
        with pytest.raises(kbthreads.SpawnTimeout) as ei:
            pc.join()
        with pytest.raises(kbthreads.SpawnTimeout) as again:
            pc.join()  # once finished, the same exception again
    assert again.value is ei.value


def test_a_replay_that_stops_matching_raises_spawn_diverged_with_its_turn(monkeypatch, tmp_path):
    recording = tmp_path / "schedule"
    monkeypatch.setenv("KB_RECORD", str(recording))
    ctx = kbthreads.Context()
    ctx.spawn(yields, (3,), nprocs=2)
    monkeypatch.delenv("KB_RECORD")
    monkeypatch.setenv("KB_REPLAY", str(recording))
    with pytest.raises(kbthreads.SpawnDiverged) as ei:
        ctx.spawn(yields, (1,), nprocs=2)  # finishes rounds before the recording does
    e = ei.value
    assert isinstance(e, kbthreads.SpawnStopped)
    assert e.turn > 0 and "diverged" in e.report and "kb_spawn_error" not in str(e)
    assert e.live == []
    ctx.close()


def test_a_replay_without_a_recording_for_the_spawn_raises_spawn_diverged(monkeypatch, tmp_path):
    recording = tmp_path / "schedule"
    monkeypatch.setenv("KB_RECORD", str(recording))
    ctx = kbthreads.Context()
    ctx.spawn(yields, (1,), nprocs=2)
    monkeypatch.delenv("KB_RECORD")
    monkeypatch.setenv("KB_REPLAY", str(recording))
    with pytest.raises(kbthreads.SpawnDiverged) as ei:
        ctx.spawn(yields, (1,), nprocs=3)  # recorded with nprocs=2
    assert ei.value.live == [] and "no rank ran" in str(ei.value)
    ctx.close()


def test_a_stop_with_another_code_raises_spawn_stopped_itself():
    """kb_join's other stop with a report (KB_ENOMEM while the spawn ran: the
    library's fault tests cause it, tests/test_fault_alloc.c) is no timeout and
    no divergence: the base class, with the report's text and live ranks."""
    from types import SimpleNamespace

    from kbthreads import _accel, _run

    ctx = kbthreads.Context()
    report = (_accel.KB_ENOMEM, "out of memory checking the replay", [], 0, 0,
              [(1, _accel.KB_AT_YIELD, 0)], 0)
    exc, cause = _run.spawn_error(ctx, SimpleNamespace(failures={}), report)
    assert type(exc) is kbthreads.SpawnStopped and cause is None
    assert exc.report == "out of memory checking the replay"
    assert exc.live == [kbthreads.LiveRank(1, "yield", None)]
    ctx.close()
