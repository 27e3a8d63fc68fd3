# SPDX-License-Identifier: MIT
"""A DistributedDataParallel training script in PyTorch's usual shape, run
on kbthreads ranks: the only kbthreads line is the launcher's import.

    PYTHONPATH=bindings/python python examples/ddp_train.py [--world-size 4] [--steps 5] [--out weights.pt]

Each rank trains a replica of a small model on its own data; DDP
all-reduces the gradients from inside ``loss.backward()``. On kbthreads the
ranks are threads of this process, one running at a time in rank order, so
the final weights are bit-identical from run to run; with
``torch.multiprocessing`` and gloo (swap the import back) it is the same
program in N processes. It prints the final loss and a checksum of the
weights, and saves them with --out.
"""
from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP

import kbthreads.torch as mp  # the launch line; was: import torch.multiprocessing as mp


class ToyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net1 = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net2(self.relu(self.net1(x)))


def train(rank: int, world_size: int, steps: int, out: str | None) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)

    torch.manual_seed(0)  # every replica starts from the same weights
    model = DDP(ToyModel())
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches

    for _ in range(steps):
        optimizer.zero_grad()
        inputs = torch.randn(20, 10, generator=data)
        labels = torch.randn(20, 5, generator=data)
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()

    if rank == 0:
        weights = model.module.state_dict()
        total = sum(float(w.double().sum()) for w in weights.values())
        print(f"world size {world_size}, {steps} steps: last loss {loss.item():.6f}, weight checksum {total:.10f}")
        if out:
            torch.save(weights, out)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", default=None, help="save rank 0's final weights here")
    a = parser.parse_args()
    torch.set_num_threads(1)
    mp.spawn(train, args=(a.world_size, a.steps, a.out), nprocs=a.world_size, join=True)


if __name__ == "__main__":
    main()
