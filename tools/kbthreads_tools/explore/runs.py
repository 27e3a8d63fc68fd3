# SPDX-License-Identifier: MIT
"""Running the plan: up to --jobs runs at once, committed in number order."""

from __future__ import annotations

import concurrent.futures
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .coverage import Coverage, orders_of
from .delays import Delays, extensions
from .runner import Outcome, Runner
from .schedule_file import read_schedule, schedule_digest
from .strategies import Planned

if TYPE_CHECKING:
    from .levels import DelayLevels


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class RunResult:
    number: int
    label: str
    outcome: Outcome
    digest: str
    orders: list[list[list[int]]] | None  # for coverage, until the run is committed
    prefix: str  # where its recording and output are
    # --strategy delay: the run's delays and level; the schedules of the
    # next level its run makes (until the level is planned), and how many
    delays: Delays | None = None
    level: int = 0
    children: list[Delays] | None = None
    nchildren: int = 0

    def to_json(self) -> dict[str, Any]:
        d = {
            "run": self.number,
            "label": self.label,
            "outcome": self.outcome.to_json(),
            "schedule": self.digest,
            "output": self.prefix,
        }
        if self.delays is not None:
            d.update(delays=[list(x) for x in self.delays], level=self.level, extensions=self.nchildren)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> RunResult:
        delays = tuple((int(s), int(t)) for s, t in d["delays"]) if "delays" in d else None
        return RunResult(
            int(d["run"]),
            str(d["label"]),
            Outcome.from_json(d["outcome"]),
            str(d["schedule"]),
            None,
            str(d["output"]),
            delays,
            int(d.get("level", 0)),
            None,
            int(d.get("extensions", 0)),
        )


@dataclass
class Explored:
    committed: list[RunResult]  # the runs reported, in number order, none after the first failure
    coverage: Coverage
    stopped: str  # "done", "failure", "stale", "time"; "runs" (--strategy delay: the --runs budget)
    delays: DelayLevels | None = None  # --strategy delay: the levels explored

    @property
    def failure(self) -> RunResult | None:
        return self.committed[-1] if self.stopped == "failure" else None


class Committer:
    """Takes run results in number order and decides when exploring stops:
    at the first failure, or after --until-stale runs in a row that added
    no new schedule. What it decides depends on the results in order only,
    never on how many ran at once."""

    def __init__(self, coverage: Coverage, until_stale: int | None):
        self.coverage = coverage
        self.until_stale = until_stale
        self.committed: list[RunResult] = []
        self.stopped = ""

    def take(self, r: RunResult) -> None:
        self.committed.append(r)
        self.coverage.add(r.number, r.digest, r.orders)
        r.orders = None
        if r.outcome.failed:
            self.stopped = "failure"
        elif self.until_stale and self.coverage.stale >= self.until_stale:
            self.stopped = "stale"


def run_one(runner: Runner, out: str, p: Planned) -> RunResult:
    prefix = os.path.join(out, "runs", f"{p.number:04d}")
    got = runner.run(prefix, dict(p.env, KB_RECORD=prefix + ".schedule"), tag=p.number)
    recorded = read_schedule(prefix + ".schedule")
    r = RunResult(p.number, p.label, got, schedule_digest(recorded), orders_of(recorded), prefix, p.delays, p.level)
    if p.delays is not None and not got.failed:  # a failure ends the exploration: nothing is extended
        ext = list(extensions(p.delays, recorded))
        r.nchildren = len(ext)
        if p.expand:
            r.children = [p.delays + (d,) for d in ext]
    return r


def run_all(
    runner: Runner, out: str, plan: list[Planned], jobs: int, deadline: float | None, committer: Committer
) -> str:
    """Run the plan, up to jobs at once, started in number order and
    committed in number order; when the committer stops, the runs above
    its last are killed and forgotten. Returns why it stopped."""
    results: dict[int, RunResult] = {}
    running: dict[concurrent.futures.Future[RunResult], int] = {}
    nxt = done_upto = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        while True:
            late = deadline is not None and time.monotonic() >= deadline
            while not committer.stopped and not late and len(running) < jobs and nxt < len(plan):
                running[pool.submit(run_one, runner, out, plan[nxt])] = nxt
                nxt += 1
            if not running:
                if late and nxt < len(plan):
                    committer.stopped = "time"
                break
            wait = None if deadline is None or committer.stopped else max(0.0, deadline - time.monotonic())
            finished, _ = concurrent.futures.wait(running, timeout=wait, return_when=concurrent.futures.FIRST_COMPLETED)
            for f in finished:
                results[running.pop(f)] = f.result()
            while not committer.stopped and done_upto in results:
                committer.take(results.pop(done_upto))
                done_upto += 1
            if committer.stopped:  # (a time budget may end before any run was committed)
                runner.cancel(above=committer.committed[-1].number if committer.committed else None)
            elif deadline is not None and time.monotonic() >= deadline and (running or nxt < len(plan)):
                committer.stopped = "time"
                runner.cancel()
    # Forgotten runs leave no files behind, so DIR is the same for any --jobs.
    last = committer.committed[-1].number if committer.committed else 0
    for p in plan[done_upto:nxt]:  # the runs started and not committed
        if p.number > last:
            for ext in (".schedule", ".out", ".err"):
                try:
                    os.unlink(os.path.join(out, "runs", f"{p.number:04d}{ext}"))
                except FileNotFoundError:
                    pass
    return committer.stopped or "done"
