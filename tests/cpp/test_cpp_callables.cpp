/* SPDX-License-Identifier: MIT */
// Rank functions are any callable taking the rank: lambdas capturing by
// reference or owning move-only state, int-returning callables, plain
// functions; kb::context::start / process_context::join with timeouts, and
// the lifetimes of contexts and process contexts.
#include <chrono>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <vector>

#include "cpp_test.hpp"

using namespace std::chrono_literals;

static_assert(!std::is_copy_constructible_v<kb::context> && std::is_nothrow_move_constructible_v<kb::context>,
              "kb::context is move-only");
static_assert(!std::is_copy_constructible_v<kb::process_context> &&
                  std::is_nothrow_move_constructible_v<kb::process_context>,
              "kb::process_context is move-only");

static void test_cpp_a_lambda_capturing_by_reference_runs_in_rank_order(void **)
{
    kb::context ctx;
    std::vector<int> order;
    ctx.spawn(3, [&order](int r) {
        for (int i = 0; i < 2; i++) {
            order.push_back(r);
            kb::yield();
        }
    });
    assert_true((order == std::vector<int>{0, 1, 2, 0, 1, 2}));
}

static void test_cpp_a_lambda_owning_a_unique_ptr_is_called_in_place_by_spawn(void **)
{
    kb::context ctx;
    auto scale = std::make_unique<int>(10);
    int sum = 0;
    ctx.spawn(4, [&sum, scale = std::move(scale)](int r) { sum += *scale * r; });
    assert_int_equal(sum, 60);
}

static int rank_3_fails(int r)
{
    return r == 3 ? 1 : 0;
}

static void test_cpp_a_plain_function_is_a_rank_function(void **)
{
    kb::context ctx;
    ctx.spawn(3, rank_3_fails);
    try {
        ctx.spawn(4, &rank_3_fails);
        fail_msg("rank 3 did not fail");
    } catch (const kb::spawn_error &e) {
        assert_int_equal(e.ranks()[0].rank, 3);
    }
}

static void test_cpp_rank_and_world_size_inside_a_rank(void **)
{
    kb::context ctx;
    std::vector<int> seen;
    ctx.spawn(3, [&](int r) {
        seen.push_back(kb::rank() == r ? kb::world_size() : -1);
        seen.push_back(kb::is_cancelled());
    });
    assert_true((seen == std::vector<int>{3, 0, 3, 0, 3, 0}));
}

// A deleter that counts: the process context owns the callable.
struct counting_delete {
    int *deleted;
    void operator()(int *p) const
    {
        ++*deleted;
        delete p;
    }
};

static void test_cpp_start_moves_a_move_only_callable_into_the_process_context(void **)
{
    kb::context ctx;
    int deleted = 0, sum = 0;
    {
        std::unique_ptr<int, counting_delete> p(new int(5), counting_delete{&deleted});
        kb::process_context pc = ctx.start(2, [&sum, p = std::move(p)](int r) { sum += *p + r; });
        assert_int_equal(sum, 0); // started, not run
        pc.join();
        assert_int_equal(sum, 11);
        assert_int_equal(deleted, 0);
    }
    assert_int_equal(deleted, 1);
}

static void test_cpp_join_with_a_zero_timeout_runs_one_round_per_call(void **)
{
    kb::context ctx;
    kb::process_context pc = ctx.start(2, [](int) {
        for (int i = 0; i < 3; i++)
            kb::yield();
    });
    int calls = 1;
    while (!pc.join(0ms))
        calls++;
    assert_int_equal(calls, 4); // three rounds ending in a yield, then the last
    assert_true(pc.join(0ms));  // finished: the same answer again
    assert_int_equal(pc.stats().rounds, 4);
}

static void test_cpp_join_timeouts_of_any_duration_type(void **)
{
    kb::context ctx;
    kb::process_context pc = ctx.start(1, [](int) {
        for (int i = 0; i < 4; i++)
            kb::yield();
    });
    assert_false(pc.join(-5s));                                 // negative: one round
    assert_false(pc.join(std::chrono::duration<double>(0.0)));  // floating point
    assert_false(pc.join(std::chrono::nanoseconds(0)));         // finer than milliseconds
    assert_true(pc.join(std::chrono::duration<double>(1e300))); // beyond a long of milliseconds
}

static void test_cpp_a_failing_join_throws_spawn_error_every_time(void **)
{
    kb::context ctx;
    kb::process_context pc = ctx.start(2, [](int r) {
        kb::yield();
        if (r == 1)
            throw std::runtime_error("late");
    });
    assert_false(pc.join(0ms));
    for (int i = 0; i < 2; i++) {
        try {
            pc.join(0ms);
            fail_msg("no spawn_error");
        } catch (const kb::spawn_error &e) {
            assert_string_equal(e.ranks()[0].message.c_str(), "late");
        }
    }
}

static void test_cpp_destroying_a_live_process_context_cancels_its_ranks(void **)
{
    tr_reset();
    struct counting_engine final : kb::engine {
        int aborts = 0;
        void abort(kb::context &) override { aborts++; }
    } eng;
    kb::context ctx(eng);
    {
        kb::process_context pc = ctx.start(3, [](int r) {
            traced_dtor a{"a", r};
            for (;;)
                kb::yield();
        });
        assert_false(pc.join(0ms));
    }
    tr_assert("dtor a 0\n"
              "dtor a 1\n"
              "dtor a 2\n");
    assert_int_equal(eng.aborts, 1);
    ctx.spawn(1, [](int) {}); // the context is free again
}

static void test_cpp_a_moved_from_process_context_is_empty(void **)
{
    kb::context ctx;
    int runs = 0;
    kb::process_context a = ctx.start(2, [&](int) { runs++; });
    kb::process_context b = std::move(a);
    assert_null(a.native_handle());
    try {
        a.join();
        fail_msg("an empty process context joined");
    } catch (const std::system_error &e) {
        assert_int_equal(e.code().value(), KB_EINVAL);
    }
    b.join();
    assert_int_equal(runs, 2);
}

static void test_cpp_a_moved_context_keeps_its_engine_and_state(void **)
{
    struct binding_engine final : kb::engine {
        std::vector<kb::context *> bound;
        void bind(kb::context &ctx, int) override { bound.push_back(&ctx); }
    } eng;
    kb::context a(eng);
    a.complete(9);
    kb::context b = std::move(a);
    assert_null(a.native_handle());
    assert_true(b.is_completed(9));
    b.spawn(2, [](int) {});
    assert_true((eng.bound == std::vector<kb::context *>{&b, &b}));
}

static void test_cpp_queues_and_completions_through_the_context(void **)
{
    kb::context ctx;
    ctx.enqueue_wait(3);
    ctx.enqueue_wait(4);
    static char meta[] = "m";
    ctx.collective_submit(5, 1, meta);
    assert_true((ctx.pending_waits() == std::vector<kb_handle>{3, 4}));
    std::vector<kb_collective> c = ctx.pending_collectives();
    assert_int_equal(c.size(), 1);
    assert_int_equal(c[0].handle, 5);
    assert_int_equal(c[0].sip_id, 1);
    assert_ptr_equal(c[0].meta, meta);
    ctx.spawn(0, [](int) {}); // nprocs 0: no round, no drain
    assert_int_equal(ctx.pending_waits().size(), 2);
}

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpp_a_lambda_capturing_by_reference_runs_in_rank_order),
        cmocka_unit_test(test_cpp_a_lambda_owning_a_unique_ptr_is_called_in_place_by_spawn),
        cmocka_unit_test(test_cpp_a_plain_function_is_a_rank_function),
        cmocka_unit_test(test_cpp_rank_and_world_size_inside_a_rank),
        cmocka_unit_test(test_cpp_start_moves_a_move_only_callable_into_the_process_context),
        cmocka_unit_test(test_cpp_join_with_a_zero_timeout_runs_one_round_per_call),
        cmocka_unit_test(test_cpp_join_timeouts_of_any_duration_type),
        cmocka_unit_test(test_cpp_a_failing_join_throws_spawn_error_every_time),
        cmocka_unit_test(test_cpp_destroying_a_live_process_context_cancels_its_ranks),
        cmocka_unit_test(test_cpp_a_moved_from_process_context_is_empty),
        cmocka_unit_test(test_cpp_a_moved_context_keeps_its_engine_and_state),
        cmocka_unit_test(test_cpp_queues_and_completions_through_the_context),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
