# SPDX-License-Identifier: MIT
"""A module-level rank program: writes what its rank sees to
DIR/rank<RANK>.json (DIR: its first argument): the launch variables, its
argv, its globals, its module, its group. Run by test_torch_launcher.py."""
import importlib.util
import json
import os
import pickle
import sys

import torch
import torch.distributed as dist

LAUNCH_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "OMP_NUM_THREADS",
)

counter = 0  # a global of this module: each rank adds one to its own


class Box:  # a class of this rank's __main__, where pickle looks it up
    pass


dist.init_process_group("gloo")  # nothing else: rank, world size and rendezvous from the environment
counter += 1
os.environ["CHANGED_BY_RANK"] = os.environ["RANK"]  # a rank's change to its environment is its own
dist.barrier()  # every rank has run the lines above before any rank reads

seen = {
    "env": {k: os.environ.get(k) for k in LAUNCH_VARIABLES},
    "changed_by_rank": os.environ["CHANGED_BY_RANK"],
    "argv": sys.argv,
    "counter": counter,
    "name": __name__,
    "file": __file__,
    "spec": None if __spec__ is None else __spec__.name,
    "main_is_this_module": sys.modules["__main__"].__dict__ is globals(),
    "unpickled_class_is_this_ranks": type(pickle.loads(pickle.dumps(Box()))) is Box,
    "rank": dist.get_rank(),
    "world_size": dist.get_world_size(),
    "threads": torch.get_num_threads(),
    "path0": sys.path[0],
    "beside_importable": importlib.util.find_spec("torchrun_beside") is not None,
}
with open(os.path.join(sys.argv[1], f"rank{os.environ['RANK']}.json"), "w") as f:
    json.dump(seen, f)
dist.destroy_process_group()
