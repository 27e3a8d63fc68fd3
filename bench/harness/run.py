#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run the libkbthreads benchmarks, the floors and the peers; print a table;
write the results under bench/results/.

    run.py --bindir BUILD [--results DIR] [--smoke] [--reps R] [--only WORD ...]
           [--quiet-wait SECONDS] [--no-maxn] [--condvar-bindir DIR] [--baseline-bindir DIR]
           [--no-idle-wait]

The programs (built by bench/CMakeLists.txt into BUILD) print one KBR line
per measured repetition (see bench_common.h). The run is split by concern:

  plan.py            how much work each job does, at which N (M scaled per N)
  jobs_loops.py      yield, wait, collective, spawn; floors; peers; Python
  jobs_sim.py        the simulation-shaped job and its checksums
  jobs_depth.py      a yield D levels deep in C, the binding against greenlet
  jobs_loaded.py     a CPU hog, two simulations side by side
  jobs_policy.py     the reactive wait policy against each forced one, idle, with a hog, side by side
  jobs_limits.py     memory per idle rank, the largest N
  runner.py          the run's state and its one way to run a job, through
  idle_gate.py       the bounded wait for an idle machine before each job,
  launch.py          the launch with the CPU accounting (cpu_accounting.py),
  retries.py         measuring again a job the machine was busy for, and
  aggregate.py       KBR lines to samples, samples to the summary, the files
  baseline.py        the --baseline-bindir build's figures as a file of their own
  machine.py         what is recorded about the machine and the build

libkbthreads runs unpinned (default options), with --spread (the
KB_AFFINITY_SPREAD spawn option, impl kbthreads_spread), with --pin
(KB_AFFINITY_ONE_CPU) and under one CPU (kbthreads_taskset). With
--condvar-bindir (a build against a library built with KB_BATON=condvar)
every yield, wait and spawn job of kb_bench runs again right after the
futex one from that build (impl kbthreads_condvar[_spread]). With
--baseline-bindir (a build of these programs against another checkout's
library) the sim, hog and pair jobs run on it too, right after the new ones.

Output: bench/results/<kind>-<UTC stamp>.json (everything: machine,
parameters, notes, every sample and the summary) and .csv (the summary),
copied to <kind>-latest.json / .csv (kind: bench or smoke); with
--baseline-bindir also <kind>-baseline-*.json, compared with the run's by
bench/report/compare.py at the end. Exit status 1 if any benchmark failed (peers
that are not installed are skipped with a note, not failed).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from typing import Any, Dict

# bench/harness/ (this folder) and bench/report/ (compare.py, run at the end of a baseline run)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aggregate  # noqa: E402
import baseline  # noqa: E402
import compare  # noqa: E402
import jobs_depth  # noqa: E402
import jobs_limits  # noqa: E402
import jobs_loaded  # noqa: E402
import jobs_loops  # noqa: E402
import jobs_policy  # noqa: E402
import jobs_sim  # noqa: E402
from bench_shared import BUSY_SHARE  # noqa: E402
from machine import build_type, loadavg, machine_info  # noqa: E402
from runner import BENCH, Runner  # noqa: E402
from terminal_table import print_table  # noqa: E402


def check_programs(r: Runner) -> None:
    """Exit with a hint when a build folder lacks its programs."""
    for name in ("kb_bench", "kb_floor_ring", "kb_floor_swapcontext"):
        if not r.have(name):
            sys.exit("run.py: %s not found in %s: build first (make -f bench/bench.mk bench-build)"
                     % (name, r.bindir))
    for opt, d in (("--condvar-bindir", r.condvar_bindir), ("--baseline-bindir", r.baseline_bindir)):
        if d and not os.access(os.path.join(d, "kb_bench"), os.X_OK):
            sys.exit("run.py: kb_bench not found in %s (%s)" % (d, opt))


def wait_quiet(r: Runner) -> None:
    """--quiet-wait: first wait, up to that many seconds, for the 1-minute load to drop."""
    limit = r.args.quiet_wait
    if limit <= 0:
        return
    threshold = max(0.5, 0.5 * (os.cpu_count() or 1))
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        la = loadavg()
        if la and la[0] <= threshold:
            return
        print("  waiting for a quiet machine (load %.2f > %.2f)..." % (la[0], threshold), flush=True)
        time.sleep(15)
    r.notes.append("the machine did not get quiet within %ds (1-min load %.2f): figures are noisy"
                   % (limit, loadavg()[0]))


def run_jobs(r: Runner) -> Dict[str, Any]:
    """Every job family in the run's order; the sim section of the results."""
    jobs_loops.swapcontext(r)
    for family in (jobs_loops.yield_family, jobs_loops.drain_family, jobs_loops.spawn_family):
        for n in r.plan.ns:
            family(r, n)
    for n in r.plan.sim_ns:
        jobs_sim.sim_family(r, n)
    sim = dict(r.plan.sim_params(), checksums=r.sim_checksums, mismatch=jobs_sim.check_checksums(r))
    jobs_depth.depth_family(r)
    jobs_loaded.hog_section(r)
    jobs_loaded.pair_section(r)
    r.policy = jobs_policy.policy_family(r)
    jobs_limits.memory(r)
    jobs_limits.maxn(r)
    return sim


def go(r: Runner) -> Dict[str, Any]:
    """The whole run: its results (bench/README.md, "The results file")."""
    check_programs(r)
    r.detect_peers()
    wait_quiet(r)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = loadavg()
    machine = machine_info()  # before the jobs: the commit that was built
    t0 = time.monotonic()
    print("libkbthreads benchmarks (%s, %d repetitions per figure)" %
          ("smoke" if r.plan.smoke else "full", r.plan.reps), flush=True)
    for note in r.notes:
        print("  note: " + note)
    sim = run_jobs(r)
    return {
        "kind": "smoke" if r.plan.smoke else "bench",
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t0, 1),
        "load_start": load_start,
        "load_end": loadavg(),
        "machine": machine,
        "build_type": build_type(r.bindir),
        "condvar_bindir": r.condvar_bindir,
        "baseline_bindir": r.baseline_bindir,
        "idle": dict(r.gate.params(), hog_cpu=jobs_loaded.other_cpu(), taskset_cpu=min(os.sched_getaffinity(0))),
        "sim": sim,
        "policy": r.policy,
        "params": dict(r.plan.params(), retry_busy=r.args.retry_busy, retry_budget=r.args.retry_budget),
        "info": r.info,
        "notes": r.notes,
        "failures": r.failures,
        "maxn": r.maxn_result,
        "jobs": r.jobs,
        "busy_share": BUSY_SHARE,
        "retry_seconds": round(r.retries.spent, 1),
        "summary": aggregate.summarize(r.samples),
        "samples": r.samples,
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bindir", required=True, help="the build folder holding kb_bench and friends")
    ap.add_argument("--condvar-bindir", default=None,
                    help="a build of kb_bench against the KB_BATON=condvar library: its yield, wait and "
                         "spawn jobs run beside the futex ones (impl kbthreads_condvar)")
    ap.add_argument("--results", default=os.path.join(BENCH, "results"))
    ap.add_argument("--smoke", action="store_true", help="a seconds-long run proving every benchmark runs")
    ap.add_argument("--reps", type=int, default=0, help="repetitions per figure (default 7, smoke 2)")
    ap.add_argument("--only", nargs="*", default=None,
                    help="run only these families: kbthreads floors peers yield wait collective spawn mem maxn "
                         "futex sem cond swapcontext greenlet simgrid spread (the --spread jobs) join (timed "
                         "kb_join) python (the binding) taskset pin (the best-of-configurations jobs) sim (the "
                         "simulation-shaped job) depth (a yield deep in C frames, the binding and greenlet) hog "
                         "pair (the loaded sections) policy (the wait-policy jobs; hog and pair take their "
                         "parts too); the condvar baton's jobs go with the futex ones")
    ap.add_argument("--quiet-wait", type=int, default=0,
                    help="first wait up to this many seconds for the 1-minute load to drop")
    ap.add_argument("--no-maxn", action="store_true", help="skip the largest-N search")
    ap.add_argument("--retry-budget", type=int, default=240,
                    help="seconds the whole run may spend on such re-runs (default 240)")
    ap.add_argument("--retry-busy", type=int, default=None,
                    help="measure a job again up to this many times when other processes used more than "
                         "%d%%%% of the CPUs during it (default 2, smoke 0)" % (100 * BUSY_SHARE))
    ap.add_argument("--maxn-cap", type=int, default=65536)
    ap.add_argument("--baseline-bindir", default=None,
                    help="a build of kb_bench (and kb_python_paths.txt) against another library, e.g. main's "
                         "(bench/bench.mk BENCH_BASELINE_SRC): its sim jobs and the hog and pair sections run "
                         "beside the new ones (impls kbthreads_baseline*, kbthreads_py_baseline*)")
    ap.add_argument("--ablate", action="store_true",
                    help="the wait-policy jobs run the default against the default with each of its "
                         "mechanisms switched off (KB_WAIT_ABLATE, which only the library of commit c9a14eb "
                         "reads: issue 45's ablation) instead of the forced modes")
    ap.add_argument("--no-idle-wait", action="store_true",
                    help="record the load at each job's start but never wait for an idle machine")
    args = ap.parse_args()
    if args.retry_busy is None:
        args.retry_busy = 0 if args.smoke else 2
    if args.reps and not args.smoke and args.reps < 5:
        print("run.py: note: fewer than 5 repetitions per figure", file=sys.stderr)
    return args


def main() -> None:
    args = parse_args()
    result = go(Runner(args))
    print_table(result)
    new_path = aggregate.write_results(result, args.results)
    if result["baseline_bindir"]:
        base = baseline.baseline_results(result)
        old_path = aggregate.write_results(base, args.results)
        print()
        compare.print_comparison(base, result, old_path, new_path)
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
