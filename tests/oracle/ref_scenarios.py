# SPDX-License-Identifier: MIT
"""The six example scenarios of ../shared/reference/oracle/scenarios, run
through the normaliser (oracle_lib.py): the C form the tests in
tests/test_reference_scenarios.c keep inline."""
import os
import sys
import importlib.util

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib  # noqa: E402

SCEN = os.path.join(oracle_lib.ORACLE, "scenarios")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCEN, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


s_02_nprocs4_yields3 = _load("02_nprocs4_yields3")
s_04_worker_waits_fifo = _load("04_worker_waits_fifo")
s_06_allreduce4 = _load("06_allreduce4")
s_09_rank2_raises_step2 = _load("09_rank2_raises_step2")
s_10_rank0_raises_before_yield = _load("10_rank0_raises_before_yield")
s_24_drain_after_last_round = _load("24_drain_after_last_round")

if __name__ == "__main__":
    # the loaded mains have no useful co_firstlineno here: keep file order
    order = [n for n in list(globals()) if n.startswith("s_")]
    for i, n in enumerate(order):
        globals()[n].__dict__["_order"] = i
    oracle_lib.main(sys.modules[__name__])
