# SPDX-License-Identifier: MIT
"""The wait-policy jobs of bench/harness/run.py (issue 31): the reactive default
against every mode KB_WAIT_POLICY forces, the static count-based choice
(KB_WAIT_POLICY=static) and the library's own affinity modes, on the yield
and wait loops, with 0 and 2 µs of work before each suspension point
(kb_bench --work), at every N; then the same policies beside a CPU hog and
with two simulations side by side.

A cell (one section, loop, work, N) is measured by PROCESSES processes of
each configuration, interleaved (every configuration once, then again,
each round starting at another configuration: rotated()),
because processes of one sitting differ by up to 30%: each process gives
the median of its repetitions, and the report compares the medians of
those (bench/report/report_policy.py). Every process also reports the wait mode
its spawns ended in (kb_bench's KBI wait_end line).
"""
from __future__ import annotations

import os
import statistics
from typing import Callable, Dict, List, Optional, Tuple

from jobs_loaded import Hog
from jobs_loops import pin_cpu0
from jobs_sim import py_sim_argv, sim_argv
from runner import Runner

# (name, KB_WAIT_POLICY or None, extra kb_bench arguments, preexec_fn)
Config = Tuple[str, Optional[str], List[str], Optional[Callable[[], None]]]

FORCED = ["look", "nudge", "sleep", "spin"]
CONFIGS: List[Config] = (
    [("auto", None, [], None), ("static", "static", [], None)]
    + [(m, m, [], None) for m in FORCED]
    + [("one_cpu", None, ["--pin"], None), ("spread", None, ["--spread"], None), ("taskset", None, [], pin_cpu0)]
)
# Beside a hog and side by side, the unpinned policies only (the affinity
# modes are not what a loaded machine's user can choose between).
LOADED_CONFIGS: List[Config] = [c for c in CONFIGS if not c[2] and c[3] is None]
# --baseline-bindir: the default of the library built there (BENCH_BASELINE_SRC),
# in every cell of the matrix beside the new one.
BASELINE: Config = ("baseline", None, [], None)
# --ablate (issue 45): the default with one of its mechanisms switched off
# (KB_WAIT_ABLATE, read by the library of the ablation's commit), against
# the whole default; forced modes and affinity options are left out.
ABLATIONS = ["slots", "gather", "seat", "memory", "early", "backoff", "spin_rule", "cutoff", "bank", "degrade"]
ABLATION_CONFIGS: List[Config] = [("no_" + a, "KB_WAIT_ABLATE=" + a, [], None) for a in ABLATIONS]


def idle_configs(r: Runner) -> List[Config]:
    """The configurations of the idle section (see LOADED_CONFIGS for the loaded ones)."""
    if getattr(r.args, "ablate", False):
        return [CONFIGS[0]] + ABLATION_CONFIGS
    return CONFIGS + ([BASELINE] if r.baseline_bindir else [])


def loaded_configs(r: Runner) -> List[Config]:
    if getattr(r.args, "ablate", False):
        return [CONFIGS[0]] + ABLATION_CONFIGS
    return LOADED_CONFIGS + ([BASELINE] if r.baseline_bindir else [])


# The ablation's matrix, smaller than the full one (eleven configurations per
# cell): no work between suspension points, the rank counts where the
# mechanisms act (tries stop at 256 ranks, 512 shows the cut-off), three
# processes per cell.
ABLATION_NS = [2, 8, 64, 512]
ABLATION_LOADED_NS = [2, 8, 64]
ABLATION_WORKS = [0]
ABLATION_PROCESSES = 3


def matrix(r: Runner) -> Tuple[List[int], List[int], List[int], int]:
    """(works, idle Ns, loaded Ns, processes) of the policy jobs."""
    p = r.plan
    if getattr(r.args, "ablate", False) and not p.smoke:
        return ABLATION_WORKS, ABLATION_NS, ABLATION_LOADED_NS, ABLATION_PROCESSES
    return p.policy_works, p.policy_ns, p.loaded_ns, p.policy_processes


def prog_dir(r: Runner, cfg: Config) -> str:
    return r.baseline_bindir if cfg is BASELINE else r.bindir


def usable(cfg: Config, n: int) -> bool:
    """Forced spinning only where every rank has a CPU (N < CPUs): beyond
    that a spinner holds the CPU the next holder needs for its time slice,
    which the smoke run shows at 10-20x the other modes (docs/design.md);
    the reactive policy never tries it there either."""
    return cfg[0] != "spin" or n < len(os.sched_getaffinity(0))


def rotated(cfgs: List[Config], proc: int, processes: int) -> List[Config]:
    """The configurations in the order process round `proc` runs them: each
    round starts at a different one. A process that follows a large spawn
    of the previous cell's last configuration may start while that one's
    threads are still being torn down (a 2026-12-03 run showed the first
    configuration of every round slower at N = 512 and 4096), so no
    configuration may always come first."""
    k = (proc * len(cfgs)) // max(1, processes)
    return cfgs[k:] + cfgs[:k]


def with_reps(argv: List[str], reps: int) -> List[str]:
    """argv with its --reps value replaced."""
    out = list(argv)
    out[out.index("--reps") + 1] = str(reps)
    return out


def with_policy(argv: List[str], policy: Optional[str]) -> List[str]:
    """argv run with KB_WAIT_POLICY set (through env(1): the rest of the
    environment stays the runner's); a policy of the form NAME=VALUE sets
    that variable instead (the ablation's)."""
    if not policy:
        return argv
    return ["env", policy if "=" in policy else "KB_WAIT_POLICY=" + policy] + argv


class Cells:
    """The section's results: one record per (section, bench, N, config)."""

    def __init__(self, r: Runner) -> None:
        self.r = r
        self.rows: Dict[Tuple[str, str, int, str], Dict[str, object]] = {}

    def run(self, section: str, bench: str, n: int, cfg: str, label: str, argv: List[str],
            preexec_fn: Optional[Callable[[], None]] = None, copies: int = 1,
            deliberate: Optional[str] = None, figure: Optional[str] = None) -> None:
        """Run one process (or pair) of the cell and keep its median; figure:
        the KBR figure to read (default: bench, the cell's name)."""
        r = self.r
        first = len(r.samples)
        impl = "policy_%s_%s" % (section, cfg)
        rename = {k: impl for k in ("kbthreads", "kbthreads_spread", "kbthreads_py", "kbthreads_py_baseline")}
        rc, kbi = r.run(label, argv, preexec_fn=preexec_fn, copies=copies, deliberate=deliberate, rename=rename)
        row = self.rows.setdefault((section, bench, n, cfg), {
            "section": section, "bench": bench, "n": n, "config": cfg, "impl": impl,
            "process_medians": [], "wait_end": [], "flagged": False})
        if rc != 0:
            return
        mine = [s for s in r.samples[first:] if s["bench"] == (figure or bench) and s["unit"] == "ns"]
        # One median per process (copies > 1: each copy's figures are
        # interleaved in the output; their median together stands for the pair).
        if mine:
            row["process_medians"].append(statistics.median(s["value"] for s in mine))  # type: ignore[union-attr]
            row["flagged"] = bool(row["flagged"]) or any(s["flagged"] for s in mine)
        row["wait_end"] += [v for k, v in kbi if k == "wait_end"]  # type: ignore[operator]

    def records(self) -> List[Dict[str, object]]:
        return [self.rows[k] for k in sorted(self.rows)]


def idle_section(r: Runner, cells: Cells) -> None:
    p = r.plan
    works, ns, _, procs = matrix(r)
    for work in works:
        for n in ns:
            m = p.m_for(p.policy_ops, n)
            for op in ("yield", "wait"):
                bench = "%s_w%d" % (op, work)
                args = [op, "--n", str(n), "--m", str(m), "--reps", str(p.policy_reps), "--work", str(work)]
                for proc in range(procs):
                    for c in rotated([c for c in idle_configs(r) if usable(c, n)], proc, procs):
                        cfg, policy, extra, pre = c
                        base = [os.path.join(prog_dir(r, c), "kb_bench")] + args
                        cells.run("idle", bench, n, cfg, "policy: %s N=%d W=%d %s (%d/%d)" % (
                            op, n, work, cfg, proc + 1, procs), with_policy(base + extra, policy),
                            preexec_fn=pre)


def hog_section(r: Runner, cells: Cells) -> None:
    p = r.plan
    _, _, loaded_ns, procs = matrix(r)
    r.gate.before_job()  # an idle machine before the hog starts
    with Hog():
        for n in loaded_ns:
            m = p.m_for(p.policy_ops, n)
            for op in ("yield", "wait"):
                args = [op, "--n", str(n), "--m", str(m), "--reps", str(p.policy_reps)]
                for proc in range(procs):
                    for c in rotated([c for c in loaded_configs(r) if usable(c, n)], proc, procs):
                        cfg, policy, _, _ = c
                        base = [os.path.join(prog_dir(r, c), "kb_bench")] + args
                        cells.run("hog", op, n, cfg, "policy hog: %s N=%d %s (%d/%d)" % (
                            op, n, cfg, proc + 1, procs), with_policy(base, policy), deliberate="hog")


def pair_section(r: Runner, cells: Cells) -> None:
    p = r.plan
    binding = r.python_binding()
    base_binding = r.baseline_python()
    _, _, loaded_ns, procs = matrix(r)
    for n in loaded_ns:
        m = p.sim_m(n)

        def argv_of(lang: str, c: Config) -> Optional[List[str]]:
            if lang == "C":
                return with_reps(sim_argv(r, prog_dir(r, c), n, m), p.policy_reps)
            if c is BASELINE:
                return (with_reps(py_sim_argv(r, n, m, *base_binding, impl="kbthreads_py_baseline"),
                                  p.policy_reps) if base_binding else None)
            return with_reps(py_sim_argv(r, n, m, *binding), p.policy_reps) if binding else None

        # Both print figure "sim"; the cells are told apart by name.
        for bench, lang in (("sim", "C"), ("sim_py", "python")):
            for proc in range(procs):
                for c in rotated([c for c in loaded_configs(r) if usable(c, n)], proc, procs):
                    cfg, policy, _, _ = c
                    argv = argv_of(lang, c)
                    if argv is None:
                        continue
                    cells.run("pair", bench, n, cfg, "policy pair: %s sim N=%d %s (%d/%d)" % (
                        lang, n, cfg, proc + 1, procs), with_policy(argv, policy), copies=2,
                        deliberate="pair", figure="sim")


def policy_family(r: Runner) -> List[Dict[str, object]]:
    """Every wait-policy job; the results' "policy" records."""
    cells = Cells(r)
    if r.want("policy"):
        idle_section(r, cells)
    if r.want("policy", "hog"):
        hog_section(r, cells)
    if r.want("policy", "pair"):
        pair_section(r, cells)
    return cells.records()


def wait_end_modes(values: List[str]) -> List[str]:
    """The modes of a row's wait_end values ("look:1:2:7" -> "look")."""
    return [v.split(":", 1)[0] for v in values]

