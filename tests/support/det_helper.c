/* SPDX-License-Identifier: MIT */
/*
 * Runs the determinism program (det_program.h) once in this process and
 * prints "<hash in hex> <lines>" on stdout; with --trace, the whole trace
 * instead. Usage: kb_det_helper SEED [--trace]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "det_program.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SEED [--trace]\n", argv[0]);
        return 2;
    }
    uint64_t seed = strtoull(argv[1], NULL, 0);
    uint64_t h = det_run_program(seed);
    if (argc > 2 && strcmp(argv[2], "--trace") == 0)
        fputs(tr_text(), stdout);
    else
        printf("%016llx %zu\n", (unsigned long long)h, tr_lines());
    return 0;
}
