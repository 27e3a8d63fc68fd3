# SPDX-License-Identifier: MIT
"""Writes what python -m gave this rank's __main__ to DIR/rank<RANK>.json (DIR: the first argument)."""
import json
import os
import sys

with open(os.path.join(sys.argv[1], f"rank{os.environ['RANK']}.json"), "w") as f:
    json.dump({"name": __name__, "spec": __spec__.name, "package": __package__, "argv": sys.argv, "file": __file__,
               "path0": sys.path[0]}, f)
