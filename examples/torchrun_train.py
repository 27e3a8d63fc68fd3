# SPDX-License-Identifier: MIT
"""A training script as torchrun runs it: module level, its rank from the
environment, seeded per rank, nothing of kbthreads in it.

    torchrun --nproc-per-node 4 examples/torchrun_train.py [--steps 8] [--out DIR]
    kbthreads-torchrun --nproc-per-node 4 examples/torchrun_train.py [--steps 8] [--out DIR]

(from a source tree: PYTHONPATH=bindings/python python -m kbthreads.torch.run
... for the second). Every rank seeds torch, ``random`` and numpy with its
own seed, draws its data from all three between the collectives DDP runs
(dropout draws from torch's generator too), trains a small regression with
DistributedDataParallel and AdamW, and prints its loss, a checksum of its
weights and its last random draws. On kbthreads every rank is a thread of
one process, with its own random streams and environment, and the lines
are the same on every run; torchrun's processes print the same draws and
(at 2 ranks, bit for bit; at more, within float32 rounding: gloo sums in
another order) the same weights. --out DIR: each rank saves its draws and
final weights to DIR/rank<R>.pt.
"""
import argparse
import os
import random

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser(description="a torchrun-style DDP trainer")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--out", default=None, help="a folder: each rank saves rank<R>.pt there")
args = parser.parse_args()

rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
world_size = int(os.environ["WORLD_SIZE"])
dist.init_process_group(backend="gloo")  # everything else from the environment torchrun set

seed = 1337 + rank
torch.manual_seed(seed)
random.seed(seed)
np.random.seed(seed)

model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 1)))  # rank 0's weights
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
target = torch.linspace(-1.0, 1.0, 16)
draws = {"torch": [], "random": [], "numpy": []}

for _ in range(args.steps):
    x = torch.randn(32, 16)  # this rank's batch, from its own torch stream
    noise = torch.from_numpy(np.random.normal(0.0, 0.1, size=32).astype(np.float32))
    order = list(range(32))
    random.shuffle(order)  # and its order, from `random`
    x = x[order]
    y = (x @ target + noise).unsqueeze(1)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()  # DDP all-reduces the gradients here
    optimizer.step()
    draws["torch"].append(torch.rand(1).item())  # one draw of each stream after every step's collectives
    draws["random"].append(random.random())
    draws["numpy"].append(float(np.random.rand()))

weights = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
checksum = sum(float(w.double().sum()) for w in weights.values())
print(
    f"rank {rank} (local rank {local_rank}) of {world_size}: loss {loss.item():.6f}, weight checksum "
    f"{checksum:.10f}, last draws torch {draws['torch'][-1]:.8f} random {draws['random'][-1]:.8f} "
    f"numpy {draws['numpy'][-1]:.8f}",
    flush=True,
)
if args.out:
    torch.save({"weights": weights, "draws": draws}, os.path.join(args.out, f"rank{rank}.pt"))
dist.barrier()
dist.destroy_process_group()
