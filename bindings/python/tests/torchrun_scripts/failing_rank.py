# SPDX-License-Identifier: MIT
"""Rank 1 raises from a function after a barrier; the others wait in the next barrier."""
import os

import torch.distributed as dist

dist.init_process_group("gloo")
rank = int(os.environ["RANK"])
print(f"rank {rank} started", flush=True)


def fail_here() -> None:
    raise ValueError(f"rank {rank} cannot go on")


dist.barrier()
if rank == 1:
    fail_here()
dist.barrier()
