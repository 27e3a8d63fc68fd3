# SPDX-License-Identifier: MIT
"""kbthreads-explore: hunt rank-order bugs in a program that links libkbthreads.

Runs COMMAND once in round-robin order (the baseline), then under up to N
other schedules, each in its own process (up to --jobs at once), selected
through the environment the library reads (KB_SCHED_PCT, KB_SCHED_SEED,
KB_SCHED_EXHAUSTIVE, KB_SCHED_DELAYS) and recorded with KB_RECORD;
--strategy delay runs every schedule with at most D delays, level by level,
and states the bound it reached. The failing run of the
lowest number is the one reported: its schedule is shrunk toward
round-robin (delta debugging over the rounds that differ from rank order,
each candidate replayed as a partial schedule through KB_REPLAY) and the
command that replays the shrunk one is printed, with a gdb command that
stops at its first turn out of rank order. --shard K/N explores one part of
the runs and writes a result file; `merge DIR...` turns the shards' results
into the report one run would have given. docs/scheduling.md describes the
strategies and the files.

Installed as ``kbthreads-explore``; also ``python3 -m kbthreads_tools.explore``
(and ``python3 -m kbthreads.explore`` beside the binding). Standard library
only, and it never loads libkbthreads itself.

One module a part, each importing only the parts below it:
schedule_file (the files KB_RECORD writes and KB_REPLAY reads), delays
(schedules as delays, the next level's from a run's recording), runner (one
run of the command), strategies (the planned runs, a shard's part),
coverage, runs (running the plan in parallel, committing in number order),
shrink (bisection and delta debugging), gdb_script (replay.gdb), results
(exit statuses, the --out directory, result.json), levels (--strategy
delay: iterative deepening, its merge and its guarantee), report (what is
printed), exploration (one exploration), merge (the shards' results) and
cli (the command line: main).
"""
