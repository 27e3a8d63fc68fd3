/* SPDX-License-Identifier: MIT */
// Exceptions as rank failures: what a throwing rank records, the contents
// of kb::spawn_error, engine hooks that throw, and std::system_error with
// kb::category() for the library's error codes.
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>

#include "cpp_test.hpp"

namespace {

struct custom_error : std::exception {
    int payload;
    explicit custom_error(int p) : payload(p) {}
    const char *what() const noexcept override { return "custom trouble"; }
};

// The spawn_error of a spawn that must fail.
template <class F> kb::spawn_error failed_spawn(kb::context &ctx, int nprocs, F &&fn)
{
    try {
        ctx.spawn(nprocs, fn);
    } catch (const kb::spawn_error &e) {
        return e;
    }
    fail_msg("the spawn did not fail");
    throw std::logic_error("unreachable");
}

// The std::system_error code of a call that must throw one.
template <class F> std::error_code system_error_of(F &&fn)
{
    try {
        fn();
    } catch (const std::system_error &e) {
        return e.code();
    }
    fail_msg("no std::system_error");
    return {};
}

// A rank that fails by throwing x on its second turn.
template <class X> kb::spawn_error rank1_throws(X x)
{
    kb::context ctx;
    return failed_spawn(ctx, 3, [&](int r) {
        kb::yield();
        if (r == 1)
            throw x;
        kb::yield();
    });
}

} // namespace

static void test_cpp_a_rank_throwing_runtime_error_fails_with_its_what(void **)
{
    kb::spawn_error e = rank1_throws(std::runtime_error("boom at step 1"));
    assert_int_equal(e.code().value(), KB_ESPAWN);
    assert_true(e.code().category() == kb::category());
    assert_int_equal(e.ranks().size(), 1);
    assert_int_equal(e.ranks()[0].rank, 1);
    assert_int_equal(e.ranks()[0].code, kb::exception_code);
    assert_string_equal(e.ranks()[0].message.c_str(), "boom at step 1");
    assert_string_equal(e.what(), "spawn failed on ranks [1]: rank 1 raised code 10100: boom at step 1");
    assert_int_equal(e.drain_code(), 0);
    assert_true(e.engine_exception() == nullptr);
    try {
        std::rethrow_exception(e.ranks()[0].exception);
    } catch (const std::runtime_error &x) {
        assert_string_equal(x.what(), "boom at step 1");
    }
}

static void test_cpp_spawn_error_is_a_runtime_error(void **)
{
    kb::context ctx;
    try {
        ctx.spawn(1, [](int) { throw std::logic_error("no"); });
        fail_msg("the spawn did not fail");
    } catch (const std::runtime_error &e) {
        assert_non_null(std::strstr(e.what(), "rank 0 raised code 10100: no"));
    }
}

static void test_cpp_a_custom_exception_is_kept_with_its_type(void **)
{
    kb::spawn_error e = rank1_throws(custom_error(42));
    assert_string_equal(e.ranks()[0].message.c_str(), "custom trouble");
    try {
        std::rethrow_exception(e.ranks()[0].exception);
    } catch (const custom_error &x) {
        assert_int_equal(x.payload, 42);
    }
}

static void test_cpp_a_non_std_exception_fails_the_rank_too(void **)
{
    kb::spawn_error e = rank1_throws(42);
    assert_int_equal(e.ranks()[0].code, kb::exception_code);
    assert_string_equal(e.ranks()[0].message.c_str(), "an exception not derived from std::exception");
    try {
        std::rethrow_exception(e.ranks()[0].exception);
    } catch (int x) {
        assert_int_equal(x, 42);
    }
}

static void test_cpp_kb_failure_chooses_the_code(void **)
{
    kb::spawn_error e = rank1_throws(kb::failure(7, "seven"));
    assert_int_equal(e.ranks()[0].code, 7);
    assert_string_equal(e.what(), "spawn failed on ranks [1]: rank 1 raised code 7: seven");
    assert_int_equal(kb::failure(0, "zero").code(), KB_EINVAL);
}

static void test_cpp_an_escaping_library_error_fails_the_rank_with_its_code(void **)
{
    kb::spawn_error e = rank1_throws(std::system_error(std::error_code(KB_EBUSY, kb::category()), "busy"));
    assert_int_equal(e.ranks()[0].code, KB_EBUSY);
}

static void test_cpp_an_int_returning_rank_fails_with_its_code(void **)
{
    kb::context ctx;
    kb::spawn_error e = failed_spawn(ctx, 2, [](int r) { return r == 1 ? 3 : 0; });
    assert_int_equal(e.ranks()[0].code, 3);
    assert_string_equal(e.ranks()[0].message.c_str(), "rank function returned 3");
    assert_true(e.ranks()[0].exception == nullptr);
}

// Not the way to fail a C++ rank, but if one calls kb_raise, its forced
// unwind runs the destructors and passes the rank entry as in C.
static void test_cpp_kb_raise_in_a_rank_unwinds_as_in_c(void **)
{
    tr_reset();
    kb::context ctx;
    kb::spawn_error e = failed_spawn(ctx, 2, [](int r) {
        traced_dtor a{"a", r};
        if (r == 1)
            kb_raise(5, "raised by rank %d", r);
        kb::yield();
    });
    assert_int_equal(e.ranks()[0].code, 5);
    assert_string_equal(e.ranks()[0].message.c_str(), "raised by rank 1");
    assert_true(e.ranks()[0].exception == nullptr);
    tr_assert("dtor a 1\n"
              "dtor a 0\n");
}

static void test_cpp_several_failing_ranks_are_reported_in_failure_order(void **)
{
    kb::context ctx;
    kb::spawn_error e = failed_spawn(ctx, 3, [](int r) {
        if (r == 2) {
            kb::yield();
            throw std::runtime_error("first");
        }
        try {
            for (;;)
                kb::yield();
        } catch (const kb::cancelled &) {
            if (r == 0)
                throw kb::failure(5, "cleanup of rank 0 failed"); // a cancelled rank that fails: a root cause
        }
    });
    assert_int_equal(e.ranks().size(), 2);
    assert_int_equal(e.ranks()[0].rank, 2);
    assert_string_equal(e.ranks()[0].message.c_str(), "first");
    assert_int_equal(e.ranks()[1].rank, 0);
    assert_int_equal(e.ranks()[1].code, 5);
    assert_string_equal(e.ranks()[1].message.c_str(), "cleanup of rank 0 failed");
    assert_true(e.ranks()[0].exception != nullptr && e.ranks()[1].exception != nullptr);
    assert_string_equal(e.what(), "spawn failed on ranks [0, 2]: rank 2 raised code 10100: first");
}

static_assert(std::is_abstract_v<kb::engine>, "kb::engine is a base class");
static_assert(!std::is_base_of_v<std::exception, kb::cancelled>, "kb::cancelled is no std::exception");
static_assert(!std::is_default_constructible_v<kb::cancelled>, "only the library throws kb::cancelled");
static_assert(std::is_base_of_v<std::runtime_error, kb::spawn_error>, "kb::spawn_error is a runtime_error");

namespace {
// An engine whose hooks throw on request.
struct throwing_engine final : kb::engine {
    kb_handle throw_on = 0, fail_on = 0;
    int throw_in_bind = -1;
    bool throw_in_abort = false;
    int binds = 0, aborts = 0;
    int wait(kb_handle h, void *, kb_wait_origin) override
    {
        if (h == throw_on)
            throw std::runtime_error("engine broke on " + std::to_string(h));
        return h == fail_on ? 9 : 0;
    }
    void bind(kb::context &, int rank) override
    {
        binds++;
        if (rank == throw_in_bind)
            throw std::runtime_error("cannot bind");
    }
    void abort(kb::context &) override
    {
        aborts++;
        if (throw_in_abort)
            throw custom_error(3);
    }
};
} // namespace

static void test_cpp_an_engine_wait_throwing_in_a_drain_fails_the_spawn_and_is_carried(void **)
{
    throwing_engine eng;
    eng.throw_on = 55;
    kb::context ctx(eng);
    kb::spawn_error e = failed_spawn(ctx, 2, [](int r) { kb::wait(r == 0 ? 55 : 56); });
    assert_int_equal(e.drain_code(), kb::exception_code);
    assert_int_equal(e.drain_handle(), 55);
    assert_int_equal(eng.aborts, 1);
    try {
        std::rethrow_exception(e.engine_exception());
    } catch (const std::runtime_error &x) {
        assert_string_equal(x.what(), "engine broke on 55");
    }
}

static void test_cpp_an_engine_wait_throwing_on_the_driver_side_is_rethrown(void **)
{
    throwing_engine eng;
    eng.throw_on = 66;
    kb::context ctx(eng);
    try {
        ctx.wait(66);
        fail_msg("no exception");
    } catch (const std::runtime_error &x) {
        assert_string_equal(x.what(), "engine broke on 66");
    }
    assert_false(ctx.is_completed(66));
    ctx.wait(67);
    assert_true(ctx.is_completed(67));
}

static void test_cpp_an_engine_code_on_the_driver_side_is_a_system_error(void **)
{
    throwing_engine eng;
    eng.fail_on = 77;
    kb::context ctx(eng);
    assert_int_equal(system_error_of([&] { ctx.wait(77); }).value(), 9);
}

static void test_cpp_an_engine_bind_throwing_fails_the_spawn_before_any_rank_body(void **)
{
    throwing_engine eng;
    eng.throw_in_bind = 1;
    kb::context ctx(eng);
    int bodies = 0;
    kb::spawn_error e = failed_spawn(ctx, 3, [&](int) { bodies++; });
    assert_int_equal(bodies, 0);
    assert_int_equal(eng.binds, 2); // no rank bound after the failing one
    assert_int_equal(e.ranks().size(), 1);
    assert_int_equal(e.ranks()[0].rank, 1);
    assert_int_equal(e.ranks()[0].code, kb::exception_code);
    assert_string_equal(e.ranks()[0].message.c_str(), "engine bind hook for rank 1 threw: cannot bind");
    assert_true(e.engine_exception() != nullptr);
    // The context is usable again.
    eng.throw_in_bind = -1;
    ctx.spawn(2, [&](int) { bodies++; });
    assert_int_equal(bodies, 2);
}

static void test_cpp_an_engine_abort_throwing_is_carried_with_the_rank_failure(void **)
{
    throwing_engine eng;
    eng.throw_in_abort = true;
    kb::context ctx(eng);
    kb::spawn_error e = failed_spawn(ctx, 2, [](int r) {
        if (r == 1)
            throw std::runtime_error("boom");
        kb::yield();
    });
    assert_int_equal(eng.aborts, 1);
    assert_int_equal(e.ranks().size(), 1);
    assert_int_equal(e.ranks()[0].rank, 1);
    try {
        std::rethrow_exception(e.engine_exception());
    } catch (const custom_error &x) {
        assert_int_equal(x.payload, 3);
    }
}

static void test_cpp_library_errors_are_system_errors_in_the_kb_category(void **)
{
    kb::context ctx;
    std::error_code ec = system_error_of([&] { ctx.spawn(-1, [](int) {}); });
    assert_int_equal(ec.value(), KB_EINVAL);
    assert_string_equal(ec.category().name(), "kb");
    assert_string_equal(ec.message().c_str(), kb_strerror(KB_EINVAL));
    assert_true(ec == std::errc::invalid_argument);
    assert_int_equal(system_error_of([&] { ctx.start(-1, [](int) {}); }).value(), KB_EINVAL);
    assert_int_equal(system_error_of([&] { ctx.complete(KB_HANDLE_RESERVED_LOW); }).value(), KB_EINVAL);
}

static void test_cpp_suspension_points_outside_a_rank_are_eperm(void **)
{
    assert_int_equal(system_error_of([] { kb::yield(); }).value(), KB_EPERM);
    assert_int_equal(system_error_of([] { kb::barrier(); }).value(), KB_EPERM);
    assert_true(system_error_of([] { kb::wait(5); }) == std::errc::operation_not_permitted);
    assert_int_equal(kb::rank(), -1);
    assert_int_equal(kb::world_size(), 0);
}

static void test_cpp_spawn_from_inside_a_rank_is_eperm(void **)
{
    kb::context ctx, other;
    int code = 0;
    ctx.spawn(1, [&](int) {
        try {
            other.spawn(1, [](int) {});
        } catch (const std::system_error &e) {
            code = e.code().value();
        }
    });
    assert_int_equal(code, KB_EPERM);
}

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpp_a_rank_throwing_runtime_error_fails_with_its_what),
        cmocka_unit_test(test_cpp_spawn_error_is_a_runtime_error),
        cmocka_unit_test(test_cpp_a_custom_exception_is_kept_with_its_type),
        cmocka_unit_test(test_cpp_a_non_std_exception_fails_the_rank_too),
        cmocka_unit_test(test_cpp_kb_failure_chooses_the_code),
        cmocka_unit_test(test_cpp_an_escaping_library_error_fails_the_rank_with_its_code),
        cmocka_unit_test(test_cpp_an_int_returning_rank_fails_with_its_code),
        cmocka_unit_test(test_cpp_kb_raise_in_a_rank_unwinds_as_in_c),
        cmocka_unit_test(test_cpp_several_failing_ranks_are_reported_in_failure_order),
        cmocka_unit_test(test_cpp_an_engine_wait_throwing_in_a_drain_fails_the_spawn_and_is_carried),
        cmocka_unit_test(test_cpp_an_engine_wait_throwing_on_the_driver_side_is_rethrown),
        cmocka_unit_test(test_cpp_an_engine_code_on_the_driver_side_is_a_system_error),
        cmocka_unit_test(test_cpp_an_engine_bind_throwing_fails_the_spawn_before_any_rank_body),
        cmocka_unit_test(test_cpp_an_engine_abort_throwing_is_carried_with_the_rank_failure),
        cmocka_unit_test(test_cpp_library_errors_are_system_errors_in_the_kb_category),
        cmocka_unit_test(test_cpp_suspension_points_outside_a_rank_are_eperm),
        cmocka_unit_test(test_cpp_spawn_from_inside_a_rank_is_eperm),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
