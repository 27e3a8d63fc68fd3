# SPDX-License-Identifier: MIT
"""A spawn's statistics from Python: ProcessContext.stats while it runs and
once it ended, Context.last_stats, and the wait policy's report in them
(the mode chosen, whether the reactive policy chose it, what it measured)."""
from __future__ import annotations

import dataclasses
import os

import pytest

import kbthreads

MODES = {"sleep", "look", "nudge", "spin"}


def yields(r: int, n: int) -> None:
    for _ in range(n):
        kbthreads.yield_()


def fails_late(r: int, n: int) -> None:
    yields(r, n)
    if r == 1:
        raise ValueError("rank 1 fails")


def test_a_finished_spawn_reports_its_rounds_turns_and_handoffs():
    with kbthreads.spawn(yields, (5,), nprocs=3, join=False) as pc:
        pc.join()
        st = pc.stats
    assert isinstance(st, kbthreads.SpawnStats)
    # 5 yields: 6 turns per rank (the last ends the function), 6 rounds.
    assert (st.rounds, st.turns) == (6, 18)
    assert st.handoffs >= st.turns and st.wall_ns > 0


def test_the_stats_are_a_frozen_record():
    with kbthreads.spawn(yields, (1,), nprocs=2, join=False) as pc:
        pc.join()
        st = pc.stats
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.rounds = 0  # type: ignore[misc]


def test_stats_of_a_live_spawn_count_the_rounds_so_far():
    with kbthreads.spawn(yields, (1000,), nprocs=2, join=False) as pc:
        assert pc.join(timeout=0) is False  # exactly one round
        first = pc.stats.rounds
        pc.join(timeout=0)
        assert pc.stats.rounds == first + 1


def test_the_default_policy_is_reactive_and_names_the_mode_it_measured(monkeypatch):
    # How many modes the policy tries within a spawn depends on the time its
    # windows take (on a busy machine one window can cover the whole spawn),
    # so only what holds under any load is asserted here; its choices are
    # tested on a clock of their own (tests/test_internal_wait_policy.c).
    monkeypatch.delenv("KB_WAIT_POLICY", raising=False)
    with kbthreads.spawn(yields, (3000,), nprocs=4, join=False) as pc:
        pc.join()
        st = pc.stats
    assert st.wait_reactive is True
    assert st.wait_mode in MODES
    assert set(st.wait_ns) == MODES
    assert st.wait_ns[st.wait_mode] > 0  # the mode it ended in was measured


@pytest.mark.parametrize("mode", sorted(MODES))
def test_kb_wait_policy_forces_the_reported_mode_and_nothing_is_measured(monkeypatch, mode):
    monkeypatch.setenv("KB_WAIT_POLICY", mode)
    with kbthreads.spawn(yields, (200,), nprocs=2, join=False) as pc:
        pc.join()
        st = pc.stats
    # (on one CPU a nudge has no other CPU to wake on: the library reports the sleep it is)
    expected = "sleep" if mode == "nudge" and len(os.sched_getaffinity(0)) == 1 else mode
    assert (st.wait_mode, st.wait_reactive, st.wait_switches) == (expected, False, 0)
    assert set(st.wait_ns.values()) == {0}


def test_last_stats_is_none_before_the_first_spawn_and_kept_after_each():
    ctx = kbthreads.Context()
    assert ctx.last_stats is None
    ctx.spawn(yields, (2,), nprocs=2)
    assert ctx.last_stats is not None and ctx.last_stats.rounds == 3
    ctx.spawn(yields, (4,), nprocs=2)
    assert ctx.last_stats.rounds == 5
    ctx.close()


def test_last_stats_covers_a_failed_spawn():
    ctx = kbthreads.Context()
    with pytest.raises(kbthreads.SpawnException):
        ctx.spawn(fails_late, (3,), nprocs=3)
    st = ctx.last_stats
    assert st is not None and st.rounds == 4  # rank 1 failed in round 4
    ctx.close()


def test_a_contexts_next_spawn_of_the_same_nprocs_starts_where_the_last_one_ended(monkeypatch):
    monkeypatch.delenv("KB_WAIT_POLICY", raising=False)
    ctx = kbthreads.Context()
    ctx.spawn(yields, (3000,), nprocs=4)
    first = ctx.last_stats
    ctx.spawn(yields, (2,), nprocs=4)  # too short to measure anything itself
    nxt = ctx.last_stats
    ctx.spawn(yields, (2,), nprocs=3)  # another shape: from the count-based choice
    other = ctx.last_stats
    ctx.close()
    assert first is not None and nxt is not None and other is not None
    assert (nxt.wait_mode, nxt.wait_ns, nxt.wait_switches) == (first.wait_mode, first.wait_ns, 0)
    assert first.wait_ns[first.wait_mode] > 0
    assert set(other.wait_ns.values()) == {0}
