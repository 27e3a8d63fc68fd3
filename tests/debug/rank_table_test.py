#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The rank table `kb ranks` and kbthreads-dump print, from one function
(kb_rank_table in gdb/kbthreads_gdb.py), on a run made up here: no gdb, no
process. The texts below are the formats as docs/debugging.md shows them.

Usage: rank_table_test.py [--layout-module gdb/kbthreads_gdb.py]
(standard library only: unittest; exit 0 = pass)
"""

import argparse
import importlib.util
import os
import sys
import unittest

sys.dont_write_bytecode = True  # nothing written into the source tree

LAYOUT_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gdb", "kbthreads_gdb.py")


def load_layout_module(path):
    """kbthreads_gdb.py as kbthreads-dump loads it: outside gdb."""
    spec = importlib.util.spec_from_file_location("kbthreads_gdb", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Fields(object):
    """Stands for a KbStruct: fields by name, 0 when absent."""

    def __init__(self, addr=0, **fields):
        self.addr, self.fields = addr, fields

    def get(self, field, default=0):
        return self.fields.get(field, default)


def sample_run(kb):
    """Rank 0 waits on handle 7 (LWP 100), rank 1 holds the baton (LWP
    101), rank 2 finished and its thread ended (LWP 102), rank 3 has no
    thread yet."""
    ranks = [Fields(state=1, susp=2, susp_handle=7, tid=100), Fields(state=1, tid=101),
             Fields(state=2, tid=102), Fields(state=0)]
    run = Fields(0x1000, nprocs=4, holder=1)
    return kb.KbRun(run, ranks, Fields(), {}, [], None)


class RankTableTest(unittest.TestCase):
    kb = None  # set by main()

    def setUp(self):
        self.run = sample_run(self.kb)
        # the threads a tool finds: 100 and 101 live, gdb numbers 3 and 4, 101 selected
        self.live = {100: ("kb-rank-0", "3"), 101: ("kb-rank-1", "4")}

    def gdb_thread(self, lwp, _handle):
        if lwp not in self.live:
            return None
        name, label = self.live[lwp]
        return self.kb.KbRankThread(lwp, name, label, lwp == 101)

    def dump_thread(self, lwp, _handle):
        if lwp not in self.live:
            return None
        return self.kb.KbRankThread(lwp, self.live[lwp][0], None, False)

    def test_kb_ranks_shows_the_gdb_thread_and_marks_the_selected_one(self):
        self.assertEqual(self.kb.kb_rank_table(self.run, self.gdb_thread, True), [
            "    rank  thread       LWP  name             state",
            "       0       3       100  kb-rank-0        waiting on handle 7",
            " *     1       4       101  kb-rank-1        running",
            "       2       -         -  (exited)         finished",
            "       3       -         -  (no thread)      not started",
        ])

    def test_the_dump_shows_the_same_rows_without_the_gdb_thread_column(self):
        self.assertEqual(self.kb.kb_rank_table(self.run, self.dump_thread, False), [
            "    rank       LWP  name             state",
            "       0       100  kb-rank-0        waiting on handle 7",
            "       1       101  kb-rank-1        running",
            "       2         -  (exited)         finished",
            "       3         -  (no thread)      not started",
        ])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout-module", default=LAYOUT_MODULE)
    args, rest = ap.parse_known_args()
    RankTableTest.kb = load_layout_module(args.layout_module)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
