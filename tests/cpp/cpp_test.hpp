/* SPDX-License-Identifier: MIT */
// What every C++ test includes: cmocka, the trace and fake engine of
// tests/support (C, so declared extern "C" here), and the C++ layer.
//
// As in the C suite, nothing asserts in a rank thread (cmocka's failure
// longjmp would skip C++ destructors and leave the rank): ranks append to
// the trace, and the test's thread asserts after the spawn.
#ifndef KB_CPP_TEST_HPP
#define KB_CPP_TEST_HPP

#include <csetjmp>
#include <cstdarg>
#include <cstddef>
#include <cstdint>

extern "C" {
#include <cmocka.h> // declares its functions extern "C" only partly
#include "fake_engine.h"
}

#include <kbthreads.hpp>

// An object whose destructor appends "dtor NAME RANK" to the trace.
struct traced_dtor {
    const char *name;
    int rank;
    ~traced_dtor() { tr_add("dtor %s %d", name, rank); }
};

#endif
