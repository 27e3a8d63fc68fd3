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

    python bench/torch_llama.py [--ranks 64 256 1024] [--layers-per-stage 1] [--out results.json]
    python bench/torch_llama.py --ranks 64 --profile prof.txt   # py-spy's samples of the 64-rank run, summarised

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
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama_dryrun.py"
TP, PP = 8, 4


def layout(ranks: int) -> tuple[int, int, int]:
    if ranks % (TP * PP):
        raise SystemExit(f"--ranks {ranks}: a multiple of {TP * PP} (tp {TP} x pp {PP})")
    return ranks // (TP * PP), TP, PP


def command(ranks: int, layers: int) -> list[str]:
    dp, tp, pp = layout(ranks)
    return [sys.executable, str(EXAMPLE), "--dp", str(dp), "--tp", str(tp), "--pp", str(pp),
            "--layers-per-stage", str(layers), "--steps", "1"]


def measure(ranks: int, layers: int, profile: str | None) -> dict[str, object]:
    """One run in a child process: wall time, peak RSS, its printout."""
    cmd = command(ranks, layers)
    raw = None
    if profile:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        raw = profile + ".raw"
        cmd = [spy, "record", "--format", "raw", "--rate", "20", "--threads", "--output", raw, "--", *cmd]
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
    if raw is not None:
        result["profile"] = summarise(raw, profile or "")
    return result


def summarise(raw: str, out: str) -> str:
    """py-spy's raw samples (one line per distinct stack: frames; count)
    summed by the innermost frame's module family, and the top functions by
    own samples, written to ``out`` and returned."""
    own: Counter[str] = Counter()
    family: Counter[str] = Counter()
    total = 0
    for line in Path(raw).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        count = int(n)
        total += count
        own[frames[-1]] += count
        family[_family(frames)] += count
    lines = [f"{total} samples (20 per second, every thread)", "", "by where the innermost frame is:"]
    lines += [f"  {100 * c / total:5.1f}%  {k}" for k, c in family.most_common()]
    lines += ["", "top functions by own samples:"]
    lines += [f"  {100 * c / total:5.1f}%  {k}" for k, c in own.most_common(25)]
    text = "\n".join(lines)
    Path(out).write_text(text + "\n")
    return text


FAMILIES = [
    ("kbthreads (scheduler, collectives, simulated time)", "kbthreads/"),
    ("fake tensors", "_subclasses/"),
    ("DTensor (sharding, redistribution)", "distributed/tensor/"),
    ("FSDP2", "distributed/fsdp/"),
    ("pipelining", "distributed/pipelining/"),
    ("autograd", "autograd/"),
    ("dispatch and other torch", "torch/"),
    ("the example", "examples/"),
]


def _family(frames: list[str]) -> str:
    """The family of the innermost frame that is Python (py-spy names a
    frame 'function (file:line)'); a thread waiting in C counts as idle."""
    for f in reversed(frames):
        for name, marker in FAMILIES:
            if marker in f:
                return name
    return "other (C, waiting)"


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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--layers-per-stage", type=int, default=1)
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--profile", help="run under py-spy and write its summary here (use with one size)")
    a = p.parse_args()
    for n in a.ranks:
        layout(n)
    results = []
    for n in sorted(a.ranks):
        r = measure(n, a.layers_per_stage, a.profile)
        results.append(r)
        print(f"{n} ranks: {float(r['wall_s']):.1f} s, {float(r['peak_rss_mib']):.0f} MiB", file=sys.stderr, flush=True)  # type: ignore[arg-type]
    print(table(results))
    for r in results:
        if "profile" in r:
            print(f"\nwhere the time goes at {r['ranks']} ranks (py-spy):\n{r['profile']}")
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
