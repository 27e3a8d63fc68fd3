# SPDX-License-Identifier: MIT
"""The flagship's speed and scale: examples/llama_dryrun.py (a Llama-3-style
decoder with Llama 3 8B's layer shapes, data x tensor x pipeline parallel,
fake tensors) at 64, 256 and 1,024 ranks, one training step each.

Each size runs in a process of its own, one after another (never side by
side: each would slow the other). Per size: the wall time of the process
(exec to exit: import, spawn, the step, the summary), its peak resident set
(the kernel's maximum RSS of that child, from wait4), and both divided by
the ranks; the load average before each run, because these figures move
with the machine's load. No figure is judged: this prints them.

    python bench/torch/torch_llama.py [--ranks 64 256 1024] [--layers-per-stage 1] [--out results.json]
    python bench/torch/torch_llama.py --ranks 64 --profile prof.txt   # where the 64-rank run's time goes (sampled)

Layouts: tp 8 (a node), pp 4, dp = ranks / 32 (64: dp 2; 256: dp 8; 1,024:
dp 32). The layer count per stage is reduced (default 1: four blocks, not
Llama 3 8B's 32); everything else has 8B's shapes (dim 4096, 32 heads, 8 KV
heads, ffn 14336, vocab 128256), sequences of 8192 tokens, 8 microbatches
per step.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llama_dryrun.py"
TP, PP = 8, 4


def layout(ranks: int) -> tuple[int, int, int]:
    if ranks % (TP * PP):
        raise SystemExit(f"--ranks {ranks}: a multiple of {TP * PP} (tp {TP} x pp {PP})")
    return ranks // (TP * PP), TP, PP


# --smoke: the same program at 32 ranks with tiny layers (proves the bench runs; make bench-smoke)
SMOKE_SHAPE = ["--dim", "64", "--heads", "8", "--kv-heads", "8", "--ffn", "128", "--vocab", "256", "--seq", "64"]


def command(ranks: int, layers: int, smoke: bool = False) -> list[str]:
    dp, tp, pp = layout(ranks)
    return [sys.executable, str(EXAMPLE), "--dp", str(dp), "--tp", str(tp), "--pp", str(pp),
            "--layers-per-stage", str(layers), "--steps", "1", *(SMOKE_SHAPE if smoke else [])]


def measure(ranks: int, layers: int, profile: str | None, smoke: bool = False) -> dict[str, object]:
    """One run in a child process: wall time, peak RSS, its printout."""
    cmd = command(ranks, layers, smoke)
    if profile:  # the same run under the sampler below, in the child
        cmd = [sys.executable, str(Path(__file__).resolve()), "--sample", profile, "--", *cmd[1:]]
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        child = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage (its children's included)
        wall = time.monotonic() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    rss_kib = usage.ru_maxrss
    if child.returncode != 0:
        print(stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{ranks} ranks: the run failed (status {child.returncode})")
    step = next((ln for ln in stdout.splitlines() if ln.startswith("predicted step time")), "")
    result: dict[str, object] = {
        "ranks": ranks,
        "layout": "dp %d x tp %d x pp %d" % layout(ranks),
        "layers_per_stage": layers,
        "wall_s": wall,
        "peak_rss_mib": rss_kib / 1024,
        "load_before": load,
        "predicted": step.split("(")[0].replace("predicted step time", "").strip(),
    }
    if profile:
        result["profile"] = Path(profile).read_text()
    return result


def sample(out: str, argv: list[str]) -> int:
    """Run the script ``argv`` here under a sampling profiler: a thread that
    every 10 ms reads every thread's Python stack (sys._current_frames).
    Ranks run one at a time; the others are parked, so a stack whose
    innermost frame and line another thread shares is a parked one and is
    not counted, nor the driver (the main thread) waiting in its join. py-spy stops the
    process for each sample, which at 64 threads slowed the run tenfold;
    this costs the run one thread's share of the GIL."""
    import runpy
    import threading

    own: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    nearest: Counter[str] = Counter()
    counted = [0, 0]  # samples, samples with a running stack
    done = threading.Event()
    main = threading.get_ident()

    def name(f: Any) -> str:
        return f"{f.f_code.co_name} ({f.f_code.co_filename.split('site-packages/')[-1]}:{f.f_lineno})"

    def loop() -> None:
        me = threading.get_ident()
        while not done.wait(0.01):
            frames = {t: f for t, f in sys._current_frames().items() if t != me}
            sites = Counter((f.f_code, f.f_lineno) for f in frames.values())
            counted[0] += 1
            for t, f in frames.items():
                if sites[f.f_code, f.f_lineno] > 1 or (t == main and "kbthreads/_run.py" in f.f_code.co_filename):
                    continue  # parked: two ranks never run at once; the driver waiting for a round
                counted[1] += 1
                own[name(f)] += 1
                files = []
                g = f
                while g is not None:
                    if not any(b in g.f_code.co_filename for b in BASE):
                        files.append(g.f_code.co_filename)
                    g = g.f_back
                for label, marker in FAMILIES:
                    if any(marker in x for x in files):
                        inside[label] += 1
                near = next((label for x in files for label, marker in FAMILIES if marker in x), "other")
                nearest[near] += 1

    t = threading.Thread(target=loop, daemon=True)
    sys.argv = argv
    t.start()
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        status = int(e.code or 0) if not isinstance(e.code, str) else 1
    else:
        status = 0
    done.set()
    t.join()
    n = max(counted[1], 1)
    lines = [f"{counted[0]} samples every 10 ms, {counted[1]} of a running stack", "",
             "share of the running samples whose stack is inside (a sample counts in each it is inside):"]
    lines += [f"  {100 * c / n:5.1f}%  {k}" for k, c in inside.most_common()]
    lines += ["", "by the nearest of those frames to the innermost (each sample once):"]
    lines += [f"  {100 * c / n:5.1f}%  {k}" for k, c in nearest.most_common()]
    lines += ["", "top functions by own samples (the innermost frame):"]
    lines += [f"  {100 * c / n:5.1f}%  {k}" for k, c in own.most_common(25)]
    Path(out).write_text("\n".join(lines) + "\n")
    return status


# The frames every rank's stack starts with (the spawn's entry): not counted as being inside kbthreads.
BASE = ("kbthreads/_run.py", "kbthreads/torch/_spawn.py", "kbthreads/_context.py")
FAMILIES = [
    ("kbthreads (collectives, simulated time, FLOP and memory modes)", "kbthreads/"),
    ("fake tensors", "torch/_subclasses/"),
    ("DTensor (sharding propagation, redistribution)", "torch/distributed/tensor/"),
    ("FSDP2", "torch/distributed/fsdp/"),
    ("pipelining", "torch/distributed/pipelining/"),
    ("autograd (backward)", "torch/autograd/"),
    ("torch's FLOP counter", "torch/utils/flop_counter"),
    ("the model", "examples/llama_model.py"),
    ("optimizer", "torch/optim/"),
    ("DeviceMesh, process groups", "torch/distributed/device_mesh"),
]


def table(results: list[dict[str, object]]) -> str:
    rows = [
        "| ranks | layout | blocks per stage | wall s | peak RSS MiB | wall ms per rank | RSS MiB per rank "
        "| load before | predicted step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        n = int(r["ranks"])  # type: ignore[call-overload]
        wall, rss = float(r["wall_s"]), float(r["peak_rss_mib"])  # type: ignore[arg-type]
        rows.append(
            f"| {n} | {r['layout']} | {r['layers_per_stage']} | {wall:.1f} | {rss:.0f} | {1000 * wall / n:.0f} "
            f"| {rss / n:.2f} | {float(r['load_before']):.1f} | {r['predicted']} |"  # type: ignore[arg-type]
        )
    return "\n".join(rows)


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "--sample" and sys.argv[3] == "--":
        return sample(sys.argv[2], sys.argv[4:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--layers-per-stage", type=int, default=1)
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--profile", help="run under a sampling profiler, its summary written here (use with one size)")
    p.add_argument("--report", help="write the report (markdown: the table, the command, the machine) here")
    p.add_argument("--smoke", action="store_true", help="32 ranks, tiny layers: proves the bench runs (no figure)")
    a = p.parse_args()
    if a.smoke:
        a.ranks = [32]
    for n in a.ranks:
        layout(n)
    results = []
    for n in sorted(a.ranks):
        r = measure(n, a.layers_per_stage, a.profile, a.smoke)
        results.append(r)
        print(f"{n} ranks: {float(r['wall_s']):.1f} s, {float(r['peak_rss_mib']):.0f} MiB", file=sys.stderr, flush=True)  # type: ignore[arg-type]
    print(table(results))
    for r in results:
        if "profile" in r:
            print(f"\nwhere the time goes at {r['ranks']} ranks (sampled):\n{r['profile']}")
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1) + "\n")
    if a.report:
        Path(a.report).write_text(report(results, a.layers_per_stage))
    return 0


def report(results: list[dict[str, object]], layers: int) -> str:
    """The report page: what ran, on what, the table and the targets."""
    import platform

    return "\n".join([
        "# The 3-D parallel Llama dry run at scale",
        "",
        f"Made by `make bench-torch-llama` (part of `make bench`; `bench/torch/torch_llama.py`) on "
        f"{time.strftime('%Y-%m-%d')}: {os.cpu_count()} CPUs, {platform.system()}, Python "
        f"{platform.python_version()}. `examples/llama_dryrun.py` with Llama 3 8B's layer shapes (dim 4096, 32 heads, "
        f"8 KV heads, ffn 14336, vocab 128256), {layers} block(s) per pipeline stage (8B has 32 blocks in all), "
        "sequences of 8,192 tokens, 8 microbatches, Schedule1F1B, bfloat16 fake tensors in each rank's own "
        "FakeTensorMode, simulated time and per-rank memory on; one training step. Each size is one process "
        "(exec to exit), the sizes one after another, never side by side; the load average is read before each.",
        "",
        "Targets on a 2-CPU machine: 64 ranks within 60 s; 1,024 ranks within 10 minutes and 8 GiB.",
        "",
        table(results),
        "",
    ])


if __name__ == "__main__":
    sys.exit(main())
