/* SPDX-License-Identifier: MIT */
/*
 * What a build of the library says about itself: the baton it was built
 * with (CMake KB_BATON, kb_baton_name), the system-dependent parts it has
 * (kb_features; KB_PORTABLE=ON builds the POSIX fallbacks), and the
 * documented answer where one is missing (KB_ENOTSUP for the affinity
 * options).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "kbthreads.h"

static int ran;

static int note_rank(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    ran = 1;
    return 0;
}

static void test_kb_baton_name_is_the_baton_the_build_chose(void **state)
{
    (void)state;
    assert_string_equal(kb_baton_name(), KB_TEST_BATON);
}

static void test_kb_baton_name_is_futex_or_condvar(void **state)
{
    (void)state;
    const char *b = kb_baton_name();
    assert_true(strcmp(b, "futex") == 0 || strcmp(b, "condvar") == 0);
    assert_ptr_equal(kb_baton_name(), b); /* a static string */
}

static void test_kb_features_are_the_builds(void **state)
{
    (void)state;
    unsigned f = kb_features();
#ifdef KB_TEST_PORTABLE
    /* Every fallback, thread names and ids included: nothing Linux-only
     * (the ctest portable_no_linux_only_symbols checks the calls). */
    assert_int_equal(f, 0);
    assert_string_equal(kb_baton_name(), "condvar");
#elif defined(__linux__)
    assert_int_equal(f, KB_FEATURE_AFFINITY | KB_FEATURE_THREAD_NAMES | KB_FEATURE_BACKTRACE |
                            KB_FEATURE_THREAD_IDS | KB_FEATURE_GDB_SECTION);
#endif
    assert_int_equal(f & ~0x1fu, 0); /* no undocumented bit */
}

static void test_the_affinity_options_need_KB_FEATURE_AFFINITY_else_KB_ENOTSUP(void **state)
{
    (void)state;
    int want = (kb_features() & KB_FEATURE_AFFINITY) ? 0 : KB_ENOTSUP;
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    int options[] = {KB_AFFINITY_ONE_CPU, KB_AFFINITY_SPREAD};
    for (int i = 0; i < 2; i++) {
        kb_spawn_opts o = {.affinity = options[i]};
        ran = 0;
        assert_int_equal(kb_spawn(ctx, note_rank, NULL, 2, &o, NULL), want);
        assert_int_equal(ran, want == 0);
        kb_process_context *pc = NULL;
        assert_int_equal(kb_start(ctx, note_rank, NULL, 2, &o, &pc), want);
        if (pc) {
            assert_int_equal(kb_join(pc, -1, NULL), 1);
            kb_process_context_free(pc);
        }
    }
    /* Without an affinity option every build spawns. */
    ran = 0;
    assert_int_equal(kb_spawn(ctx, note_rank, NULL, 2, NULL, NULL), 0);
    assert_int_equal(ran, 1);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

static void test_kb_strerror_names_KB_ENOTSUP(void **state)
{
    (void)state;
    assert_string_equal(kb_strerror(KB_ENOTSUP), "not supported on this system (see kb_features)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kb_baton_name_is_the_baton_the_build_chose),
        cmocka_unit_test(test_kb_baton_name_is_futex_or_condvar),
        cmocka_unit_test(test_kb_features_are_the_builds),
        cmocka_unit_test(test_the_affinity_options_need_KB_FEATURE_AFFINITY_else_KB_ENOTSUP),
        cmocka_unit_test(test_kb_strerror_names_KB_ENOTSUP),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
