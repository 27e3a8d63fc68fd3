# SPDX-License-Identifier: MIT
"""kbthreads-torchrun (``python -m kbthreads.torch.run``): torchrun's
command line, kbthreads ranks underneath.

    torchrun --nproc-per-node 4 train.py --lr 0.1
    kbthreads-torchrun --nproc-per-node 4 train.py --lr 0.1

The script runs once per rank, as ``__main__``, each rank with its own
module globals, ``sys.argv``, ``os.environ`` and the variables torchrun
sets (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), so
``init_process_group("gloo")`` with nothing else works in it. Every rank is
a thread of this process, one running at a time in rank order: the results
are the same on every run. With ``--network`` the run keeps simulated time
and can print or write what a cluster would take (``--summary``,
``--timeline``, ``--plot``). A rank that fails ends the launch with exit
status 1 and a report of the root causes. docs/torch.md, "The torchrun
launcher", has the options."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch

from .._errors import KbError, SpawnException
from .._loader import accel as _accel
from ._launch_args import PROG, LaunchPlan, parse
from ._launch_program import Program, ProgramError, load
from ._launch_rank import Runner
from ._launch_report import report
from ._network import Network
from ._simtime import SimRun
from ._spawn import spawn


def launch_variables(plan: LaunchPlan, environ: Mapping[str, str]) -> Callable[[int], dict[str, str]]:
    """Each rank's variables, as torchrun's agent sets them for a worker
    (environ: the launcher's own environment, which every rank also gets)."""
    world = plan.world_size
    common = {
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(plan.nproc_per_node),
        "GROUP_WORLD_SIZE": str(plan.nnodes),
        "ROLE_NAME": plan.role,
        "ROLE_WORLD_SIZE": str(world),  # one role: every rank has it
        "MASTER_ADDR": plan.master_addr,
        "MASTER_PORT": str(plan.master_port),
        "TORCHELASTIC_RUN_ID": plan.run_id,
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_USE_AGENT_STORE": "False",  # no agent, no store of its own: each rank's rendezvous is kbthreads'
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }
    omp = omp_threads(plan, environ)
    if omp is not None:
        common["OMP_NUM_THREADS"] = omp

    def for_rank(rank: int) -> dict[str, str]:
        node, local = divmod(rank, plan.nproc_per_node)
        return common | {"RANK": str(rank), "LOCAL_RANK": str(local), "GROUP_RANK": str(node), "ROLE_RANK": str(rank)}

    return for_rank


def omp_threads(plan: LaunchPlan, environ: Mapping[str, str]) -> str | None:
    """OMP_NUM_THREADS as torchrun 2.x sets it: 1 when more than one rank
    shares a node and the environment does not say."""
    return "1" if "OMP_NUM_THREADS" not in environ and plan.nproc_per_node > 1 else None


def network_of(plan: LaunchPlan) -> Network | None:
    spec = plan.network
    if spec is None:
        return None
    if spec.inter_latency is None or spec.inter_bandwidth is None:  # one node (parse checked)
        return Network(spec.latency, spec.bandwidth, allreduce=spec.allreduce)
    return Network(
        spec.latency,
        spec.bandwidth,
        ranks_per_node=spec.ranks_per_node or plan.nproc_per_node,
        inter_latency=spec.inter_latency,
        inter_bandwidth=spec.inter_bandwidth,
        allreduce=spec.allreduce,
    )


@contextmanager
def _process_state(program: Program, omp: str | None) -> Iterator[None]:
    """What a worker process would have at its start and the ranks share:
    the script's folder first on sys.path, torch's intra-op threads as
    OMP_NUM_THREADS says (torch read the variable when this process
    imported it). Put back afterwards, with ``__main__``."""
    main = sys.modules.get("__main__")
    entry = program.path_entry
    added = False
    if entry is not None and (not sys.path or sys.path[0] != entry):
        sys.path.insert(0, entry)
        added = True
    threads = torch.get_num_threads()
    if omp is not None:
        torch.set_num_threads(int(omp))
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if added and sys.path and sys.path[0] == entry:
            del sys.path[0]
        if main is not None:
            sys.modules["__main__"] = main


def _write_outputs(plan: LaunchPlan, run: SimRun) -> None:
    if plan.summary:
        print(run.format_summary())
    if plan.timeline:
        run.write_timeline(plan.timeline)
    if plan.plot:
        run.write_plot(plan.plot)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (default: this process's); the exit status."""
    plan = parse(sys.argv[1:] if argv is None else argv)
    try:
        program = load(plan.mode, plan.target)
    except ProgramError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return e.status
    # The machine's limits (threads, memory maps) before anything per rank
    # is made: the spawn checks them too, but only after each rank's
    # environment and argv exist.
    rc, why = _accel.spawn_check(None, plan.world_size, 0)
    if rc != 0:
        print(f"{PROG}: error: {plan.world_size} ranks cannot start here: {why or KbError(rc)}", file=sys.stderr)
        return 2
    runner = Runner(program)
    try:
        with _process_state(program, omp_threads(plan, os.environ)):
            result = spawn(
                runner,
                nprocs=plan.world_size,
                environ=launch_variables(plan, os.environ),
                argv=[program.argv0, *plan.script_args],
                network=network_of(plan),
                **plan.simulation(),
            )
    except SpawnException as e:
        sys.stdout.flush()
        print(report(program.title, plan.world_size, plan.nproc_per_node, runner.failures, e), file=sys.stderr)
        return 1
    except KbError as e:
        if runner.started:
            raise
        print(f"{PROG}: error: {plan.world_size} ranks cannot start: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if isinstance(result, SimRun):
        try:
            _write_outputs(plan, result)
        except OSError as e:
            print(f"{PROG}: error: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
