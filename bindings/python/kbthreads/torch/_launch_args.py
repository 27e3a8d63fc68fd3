# SPDX-License-Identifier: MIT
"""kbthreads-torchrun's command line, read into a LaunchPlan.

torchrun's options keep their spellings (dashes and underscores) and their
meanings where they have one when every rank is a thread of this process:
``--nnodes`` counts simulated nodes, all run here. Options of torchrun's
agent that only tune how it watches, signals or restarts processes are
accepted and have no effect (a launch line copied from a torchrun job
runs); options whose effect cannot be given here (restarts, per-rank log
files, running something other than Python) are refused with the reason,
as argparse refuses a bad option: usage, message, exit status 2. The
kbthreads options ask for simulated time (docs/torch-time.md).

The whole command line is checked here, before the program is looked for
and before any rank exists."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._args import INT_MAX
from ._launch_units import (
    BANDWIDTH_UNITS,
    FLOPS_UNITS,
    NETWORK_KEYS,
    NetworkSpec,
    UnitError,
    bytes_per_second,
    flops,
    network_spec,
)

PROG = "kbthreads-torchrun"
DEFAULT_MASTER_PORT = 29500

# Options torchrun takes whose effect kbthreads-torchrun cannot give, and why.
_OUTPUT_WHY = "ranks are threads of this process and write to its own stdout and stderr"
_REFUSED_VALUES = {
    "log_dir": ("--log-dir", _OUTPUT_WHY + ": no per-rank log files"),
    "redirects": ("--redirects", _OUTPUT_WHY + ": nothing to redirect"),
    "tee": ("--tee", _OUTPUT_WHY + ": nothing to tee"),
    "local_ranks_filter": ("--local-ranks-filter", _OUTPUT_WHY + ": every rank's output is shown"),
    "duplicate_stdout_filters": ("--duplicate-stdout-filters", _OUTPUT_WHY),
    "duplicate_stderr_filters": ("--duplicate-stderr-filters", _OUTPUT_WHY),
    "logs_specs": ("--logs-specs", _OUTPUT_WHY),
    "numa_binding": ("--numa-binding", "ranks are threads of one process: there is no process to bind"),
}
_REFUSED_FLAGS = {
    "no_python": (
        "--no-python",
        "every rank runs a Python script or module in this interpreter; run other programs with torchrun",
    ),
    "virtual_local_rank": ("--virtual-local-rank", "kbthreads ranks are CPU ranks of one process, with no GPU to hide"),
}

# torchrun's agent's knobs for watching, starting, signalling and stopping
# worker processes: accepted (checked where they have a type) and unused.
_AGENT_KNOBS = (
    "--monitor-interval",
    "--start-method",
    "--event-log-handler",
    "--signals-to-handle",
    "--shutdown-timeout",
    "--local-addr",
)


@dataclass(frozen=True)
class LaunchPlan:
    """What to run, on how many ranks, with which launch variables."""

    nnodes: int
    nproc_per_node: int
    role: str
    run_id: str
    master_addr: str
    master_port: int
    mode: str  # "script" (python FILE), "module" (python -m NAME) or "run-path" (runpy.run_path in the worker)
    target: str  # the script's path as given, or the module's name
    script_args: tuple[str, ...]
    network: NetworkSpec | None
    device_flops: float | None
    timeline: str | None
    plot: str | None
    summary: bool
    compute: str | None = None  # None: spawn's default (the FLOP model); "roofline"
    device_bandwidth: float | None = None
    memory: bool = False

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def simulation(self) -> dict[str, Any]:
        """spawn's compute and memory arguments (network aside)."""
        return {
            "device_flops": self.device_flops,
            "compute": self.compute,
            "device_bandwidth": self.device_bandwidth,
            "memory": self.memory,
        }


def _pair(p: argparse._ActionsContainer, *names: str, **kw: Any) -> None:
    """An option under torchrun's spellings: --a-b and --a_b."""
    spellings = []
    for n in names:
        spellings.append(n)
        if n.startswith("--") and "-" in n[2:]:
            spellings.append("--" + n[2:].replace("-", "_"))
    p.add_argument(*spellings, **kw)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        allow_abbrev=False,
        description="Run a torchrun script on kbthreads ranks: every rank a thread of this process, one running "
        "at a time in rank order, the results the same on every run. Takes torchrun's command line.",
        epilog="Example: kbthreads-torchrun --nproc-per-node 4 train.py --epochs 3 (was: torchrun --nproc-per-node "
        "4 train.py --epochs 3). docs/torch.md, 'The torchrun launcher', lists what each option does here.",
    )
    t = p.add_argument_group("torchrun's options")
    _pair(t, "--nnodes", default="1", metavar="N", help="simulated nodes, all run here (N, or MIN:MAX with MIN = MAX)")
    _pair(t, "--nproc-per-node", default="1", metavar="N", help="ranks per node: a number, or cpu / auto (CPUs here)")
    _pair(t, "--node-rank", default="0", metavar="R", help="accepted (0 to nnodes-1); every node's ranks run here")
    t.add_argument("--standalone", action="store_true", help="accepted: every rendezvous is in this process")
    _pair(t, "--rdzv-backend", default="static", metavar="NAME", help="accepted; no rendezvous server is contacted")
    _pair(t, "--rdzv-endpoint", default="", metavar="HOST:PORT", help="accepted; nothing is contacted")
    _pair(t, "--rdzv-id", default="none", metavar="ID", help="TORCHELASTIC_RUN_ID (default: none)")
    _pair(t, "--rdzv-conf", default="", metavar="K=V,...", help="accepted and unused")
    _pair(t, "--master-addr", default="127.0.0.1", metavar="ADDR", help="MASTER_ADDR (no socket is opened)")
    _pair(t, "--master-port", default=None, metavar="PORT", help=f"MASTER_PORT (default {DEFAULT_MASTER_PORT})")
    _pair(t, "--max-restarts", default="0", metavar="0", help="0 only: a failed run is not restarted")
    t.add_argument("--role", default="default", help="ROLE_NAME (default: default)")
    t.add_argument("-m", "--module", action="store_true", help="run the target as a module (python -m)")
    _pair(t, "--run-path", action="store_true", help="run the target as torchrun's --run-path does")
    for opt in _AGENT_KNOBS:
        _pair(t, opt, default=None, metavar="X", help="accepted and unused (torchrun's agent's process handling)")
    for dest, (opt, _why) in _REFUSED_VALUES.items():
        extra = ("-r",) if dest == "redirects" else ("-t",) if dest == "tee" else ()
        _pair(t, *extra, opt, dest=dest, default=None, help=argparse.SUPPRESS)
    for dest, (opt, _why) in _REFUSED_FLAGS.items():
        _pair(t, opt, dest=dest, action="store_true", help=argparse.SUPPRESS)

    k = p.add_argument_group("kbthreads' options (simulated time, docs/torch-time.md)")
    k.add_argument(
        "--network",
        metavar="SPEC",
        help=f"price every collective on a modelled network: key=value,... with keys {NETWORK_KEYS} "
        "(e.g. latency=5us,bandwidth=25GB/s; ranks-per-node defaults to --nproc-per-node)",
    )
    k.add_argument("--device-flops", metavar="RATE", help=f"the simulated device's rate ({FLOPS_UNITS}; e.g. 10T)")
    k.add_argument(
        "--compute",
        choices=("flops", "roofline"),
        default=None,
        help="the compute model: flops (FLOPs / --device-flops, the default) or roofline (each op the larger of "
        "its FLOPs / --device-flops and its bytes / --device-bandwidth)",
    )
    k.add_argument(
        "--device-bandwidth",
        metavar="RATE",
        help=f"the simulated device's memory bandwidth, for --compute roofline ({BANDWIDTH_UNITS}; e.g. 2TB/s)",
    )
    k.add_argument(
        "--memory",
        action="store_true",
        help="keep each rank's memory by category: --summary's memory table, --timeline's memory tracks",
    )
    k.add_argument("--timeline", metavar="FILE", help="write the run's timeline (Chrome trace events, Perfetto)")
    k.add_argument("--plot", metavar="FILE", help="write the run's timeline as an SVG chart")
    k.add_argument("--summary", action="store_true", help="print each rank's simulated compute and communication")

    p.add_argument("training_script", metavar="script", help="the script (or, with -m, the module) every rank runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER, metavar="...", help="the script's arguments")
    return p


def _int(p: argparse.ArgumentParser, opt: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        p.error(f"{opt} must be an integer, not {text!r}")
    if not low <= value <= high:
        p.error(f"{opt} must be from {low} to {high}, not {value}")
    return value


def _nnodes(p: argparse.ArgumentParser, text: str) -> int:
    low, colon, high = text.partition(":")
    n = _int(p, "--nnodes", low, 1, INT_MAX)
    if colon and _int(p, "--nnodes", high, 1, INT_MAX) != n:
        p.error(
            f"--nnodes {text}: an elastic range of nodes needs real nodes joining a rendezvous; "
            "give a fixed number of simulated nodes (N, or N:N)"
        )
    return n


def _nproc(p: argparse.ArgumentParser, text: str) -> int:
    if text in ("cpu", "auto"):  # as torchrun counts them on a machine with no accelerator
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if text in ("gpu", "cuda", "xpu", "mps"):
        p.error(f"--nproc-per-node {text}: kbthreads ranks are CPU ranks; give a number of ranks")
    try:
        n = int(text)
    except ValueError:
        p.error(f"--nproc-per-node must be a positive integer (or cpu, auto), not {text!r}")
    if n < 1:
        p.error(f"--nproc-per-node must be a positive integer, not {n}")
    return n


def _output_file(p: argparse.ArgumentParser, opt: str, path: str | None) -> str | None:
    if path is not None:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            p.error(f"{opt} {path}: no folder {folder}")
        if os.path.isdir(path):
            p.error(f"{opt} {path}: is a folder")
    return path


def parse(argv: Sequence[str]) -> LaunchPlan:
    """The command line read and checked; argparse's exit (status 2, usage
    and message on stderr) for anything wrong in it."""
    p = parser()
    a = p.parse_args(list(argv))
    for dest, (opt, why) in _REFUSED_VALUES.items():
        value = getattr(a, dest)
        if value is not None and not (dest in ("redirects", "tee") and value == "0"):
            p.error(f"{opt} is not supported: {why}")
    for dest, (opt, why) in _REFUSED_FLAGS.items():
        if getattr(a, dest):
            p.error(f"{opt} is not supported: {why}")
    restarts = _int(p, "--max-restarts", a.max_restarts, 0, INT_MAX)
    if restarts:
        p.error(
            f"--max-restarts {restarts} is not supported: a restart starts the failed worker processes again; "
            "kbthreads-torchrun runs the ranks once (--max-restarts 0)"
        )
    if a.module and a.run_path:
        p.error("-m/--module and --run-path: give one (a module, or a script run by path)")
    if a.start_method is not None and a.start_method not in ("spawn", "fork", "forkserver"):
        p.error(f"--start-method must be spawn, fork or forkserver, not {a.start_method!r}")
    for opt, value in (("--monitor-interval", a.monitor_interval), ("--shutdown-timeout", a.shutdown_timeout)):
        try:
            if value is not None:
                float(value)
        except ValueError:
            p.error(f"{opt} must be a number of seconds, not {value!r}")

    nnodes = _nnodes(p, a.nnodes)
    nproc = _nproc(p, a.nproc_per_node)
    _int(p, "--node-rank", a.node_rank, 0, nnodes - 1)
    if nnodes * nproc > INT_MAX:
        p.error(f"--nnodes x --nproc-per-node is {nnodes * nproc} ranks, above the spawn's limit of {INT_MAX}")
    port = DEFAULT_MASTER_PORT if a.master_port is None else _int(p, "--master-port", a.master_port, 0, 65535)

    network = device_flops = bandwidth = None
    try:
        if a.network is not None:
            network = network_spec(a.network)
        if a.device_flops is not None:
            device_flops = flops(a.device_flops, "--device-flops")
        if a.device_bandwidth is not None:
            bandwidth = bytes_per_second(a.device_bandwidth, "--device-bandwidth")
    except UnitError as e:
        p.error(str(e))
    if a.compute == "roofline" and (device_flops is None or bandwidth is None):
        p.error("--compute roofline needs --device-flops and --device-bandwidth")
    if bandwidth is not None and a.compute != "roofline":
        p.error("--device-bandwidth is the roofline's: give --compute roofline")
    if network is None:
        needing = [
            o
            for o, v in (
                ("--device-flops", a.device_flops),
                ("--compute", a.compute),
                ("--memory", a.memory or None),
                ("--timeline", a.timeline),
                ("--plot", a.plot),
                ("--summary", a.summary or None),
            )
            if v is not None
        ]
        if needing:
            p.error(f"{', '.join(needing)} need{'s' if len(needing) == 1 else ''} --network (simulated time)")
    else:
        rpn = network.ranks_per_node or nproc
        if nnodes * nproc > rpn and network.inter_latency is None:
            p.error(
                f"--network: {nnodes * nproc} ranks at {rpn} per node make {-(-nnodes * nproc // rpn)} nodes: "
                "give the link between nodes (inter-latency=...,inter-bandwidth=...)"
            )

    return LaunchPlan(
        nnodes=nnodes,
        nproc_per_node=nproc,
        role=a.role,
        run_id=a.rdzv_id,
        master_addr=a.master_addr,
        master_port=port,
        mode="module" if a.module else "run-path" if a.run_path else "script",
        target=a.training_script,
        script_args=tuple(a.training_script_args),
        network=network,
        device_flops=device_flops,
        timeline=_output_file(p, "--timeline", a.timeline),
        plot=_output_file(p, "--plot", a.plot),
        summary=a.summary,
        compute=a.compute,
        device_bandwidth=bandwidth,
        memory=a.memory,
    )
