# SPDX-License-Identifier: MIT
"""The libkbthreads tools, for C and Python programs alike: kbthreads-dump
(dump.py) and kbthreads-explore (explore/), and what they share: the ELF
reading (elf.py) and where the gdb extension is (locate.py).

Standard library only; none of it loads libkbthreads. tools/kbthreads-dump
and tools/kbthreads-explore are the launchers; pip installs the same
entry points as console scripts (kbthreads_tools.dump:main,
kbthreads_tools.explore.cli:main).
"""
