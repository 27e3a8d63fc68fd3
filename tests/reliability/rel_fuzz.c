/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer entry point: the input bytes choose a program (rel_prog.h, the
 * same generator as the seeded tests, reading its choices from the bytes);
 * the program runs on the library and on the model, and a difference in
 * their traces is a crash. Built with -DKB_FUZZER=ON by clang:
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DKB_FUZZER=ON
 *   cmake --build build-fuzz --target rel_fuzz
 *   ./build-fuzz/tests/reliability/rel_fuzz -max_total_time=60 corpus/
 *
 * REL_NO_EXIT=1 in the environment leaves pthread_exit out of the programs.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rel_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct rp_prog p;
    static int no_exit = -1;
    if (no_exit < 0) {
        const char *e = getenv("REL_NO_EXIT");
        no_exit = e && *e && *e != '0';
    }
    struct rp_src s;
    rp_src_bytes(&s, data, size);
    s.no_exit = no_exit;
    rp_generate(&p, &s);
    if (rel_check(&p, stderr) != 0) {
        fprintf(stderr, "rel_fuzz: the library and the model differ on this input\n");
        abort();
    }
    return 0;
}
