# SPDX-License-Identifier: MIT
"""What would a DDP training step cost on a cluster? A small transformer
trained with DistributedDataParallel on N simulated ranks, its step time
predicted for two networks from the FLOPs each rank executes and an
alpha-beta model of each collective (docs/torch-time.md).

    PYTHONPATH=bindings/python python examples/ddp_predict.py [--ranks 8] [--steps 3]
        [--device-tflops 10] [--timeline t.json] [--plot t.svg]

The training function is plain PyTorch; only the spawn line names
kbthreads. Prints, per network, the predicted time of the last step and the
run's summary (per rank: compute, communication, exposed and hidden
communication, idle); writes the slower network's timeline (Chrome trace
events: open it in Perfetto) and a plot. Deterministic: the same arguments
print the same figures and write the same files, byte for byte.
"""
from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import kbthreads.torch as kbt

VOCAB, DIM, HEADS, LAYERS, SEQ, BATCH = 1000, 128, 4, 2, 64, 8


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, dim_feedforward=4 * DIM, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)))


def train(rank: int, steps: int, step_times: dict) -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(TinyTransformer())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        tokens = torch.randint(VOCAB, (BATCH, SEQ), generator=data)
        opt.zero_grad()
        t0 = kbt.sim_time()
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1))
        loss.backward()
        opt.step()
        step_times.setdefault(rank, []).append(kbt.sim_time() - t0)


NETWORKS = {
    "NVLink-class, 300 GB/s, 2 us": kbt.Network(latency=2e-6, bandwidth=300e9),
    "Ethernet, 12.5 GB/s, 20 us": kbt.Network(latency=20e-6, bandwidth=12.5e9),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device-tflops", type=float, default=10.0, help="the simulated device's rate, TFLOP/s")
    p.add_argument("--timeline", default="ddp_predict.json", help="the slower network's timeline (Chrome trace)")
    p.add_argument("--plot", default="ddp_predict.svg", help="the slower network's timeline as an SVG chart")
    a = p.parse_args()
    if a.ranks < 1 or a.steps < 1 or not a.device_tflops > 0:
        p.error("--ranks and --steps must be >= 1 and --device-tflops > 0")
    torch.set_num_threads(1)
    params = sum(x.numel() for x in TinyTransformer().parameters())
    print(f"a {LAYERS}-layer transformer ({params / 1e6:.2f} M parameters), batch {BATCH}x{SEQ} per rank, "
          f"{a.ranks} ranks, a {a.device_tflops:g} TFLOP/s device")
    run = None
    for name, net in NETWORKS.items():
        times: dict = {}
        run = kbt.spawn(train, args=(a.steps, times), nprocs=a.ranks, network=net,
                        device_flops=a.device_tflops * 1e12)
        step = max(t[-1] for t in times.values())
        print(f"\n{name}: predicted step time {step * 1e3:.4f} ms")
        print(run.format_summary())
    assert run is not None
    run.write_timeline(a.timeline)
    run.write_plot(a.plot)
    print(f"\ntimeline: {a.timeline} (open in Perfetto), plot: {a.plot}")


if __name__ == "__main__":
    main()
