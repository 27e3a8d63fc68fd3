#!/bin/sh
# SPDX-License-Identifier: MIT
# The tools read ELF in one place: tools/kbthreads_tools/elf.py. No other
# Python file or script under tools/, bindings/ or gdb/ checks the ELF magic
# or unpacks an ELF64 section header (struct "IIQQQQ..."), so a second copy
# of the reader (as the explorer's gdb script once carried) fails here.
# usage: elf_reader_once.sh SOURCE_DIR
set -eu
src=$1
cd "$src"
want=tools/kbthreads_tools/elf.py
[ -f "$want" ] || { echo "no $want"; exit 1; }
status=0
for pattern in '\x7fELF' 'IIQQQQ' 'def read_elf'; do
    got=$(grep -rlF --exclude-dir=__pycache__ -- "$pattern" tools bindings gdb | sort)
    if [ "$got" != "$want" ]; then
        echo "'$pattern' should be in $want only; found in:"
        echo "${got:-(nowhere)}" | sed 's/^/  /'
        status=1
    fi
done
exit $status
