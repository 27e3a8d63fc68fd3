/* SPDX-License-Identifier: MIT */
// RAII in C++ ranks: a cancelled rank's suspension point throws
// kb::cancelled, its stack unwinds and its destructors run, one rank at a
// time in rank order; ranks that never started run neither body nor
// destructor; a destructor that suspends during the unwind does not
// terminate the program.
#include <stdexcept>
#include <vector>

#include "cpp_test.hpp"

// On a fresh trace and context, a spawn that must fail on exactly the given
// root-cause ranks.
template <class F> static void spawn_failing(int nprocs, F &&fn, std::vector<int> ranks)
{
    tr_reset();
    kb::context ctx;
    try {
        ctx.spawn(nprocs, fn);
        fail_msg("the spawn did not fail");
    } catch (const kb::spawn_error &e) {
        std::vector<int> got;
        for (const kb::rank_error &re : e.ranks())
            got.push_back(re.rank);
        assert_true(got == ranks);
    }
}

static void test_cpp_ranks_cancelled_at_yield_run_their_destructors_in_rank_order(void **)
{
    spawn_failing(4,
                  [](int r) {
                      traced_dtor a{"a", r};
                      tr_add("rank %d suspends", r);
                      kb::yield();
                      if (r == 2)
                          throw std::runtime_error("boom");
                      kb::yield();
                      tr_add("rank %d not cancelled", r);
                  },
                  {2});
    tr_assert("rank 0 suspends\n"
              "rank 1 suspends\n"
              "rank 2 suspends\n"
              "rank 3 suspends\n"
              "dtor a 2\n"
              "dtor a 0\n"
              "dtor a 1\n"
              "dtor a 3\n");
}

static void test_cpp_ranks_cancelled_at_wait_run_their_destructors(void **)
{
    spawn_failing(3,
                  [](int r) {
                      traced_dtor a{"a", r};
                      if (r == 2)
                          throw std::runtime_error("boom");
                      tr_add("rank %d waits", r);
                      kb::wait(100 + static_cast<kb_handle>(r)); // queued: the drain never comes
                      tr_add("rank %d not cancelled", r);
                  },
                  {2});
    tr_assert("rank 0 waits\n"
              "rank 1 waits\n"
              "dtor a 2\n"
              "dtor a 0\n"
              "dtor a 1\n");
}

static void test_cpp_ranks_cancelled_at_barrier_run_their_destructors(void **)
{
    spawn_failing(4,
                  [](int r) {
                      traced_dtor a{"a", r};
                      if (r == 2) {
                          kb::yield();
                          kb::yield();
                          throw std::runtime_error("boom"); // never arrives: the barrier stays shut
                      }
                      tr_add("rank %d arrives", r);
                      kb::barrier();
                      tr_add("rank %d not cancelled", r);
                  },
                  {2});
    tr_assert("rank 0 arrives\n"
              "rank 1 arrives\n"
              "rank 3 arrives\n"
              "dtor a 2\n"
              "dtor a 0\n"
              "dtor a 1\n"
              "dtor a 3\n");
}

static void test_cpp_never_started_ranks_run_neither_body_nor_destructor(void **)
{
    spawn_failing(4,
                  [](int r) {
                      tr_add("body %d", r);
                      traced_dtor a{"a", r};
                      if (r == 1)
                          throw std::runtime_error("boom");
                      kb::yield();
                  },
                  {1});
    tr_assert("body 0\n"
              "body 1\n"
              "dtor a 1\n"
              "dtor a 0\n");
}

// The destructor runs while kb::cancelled unwinds the stack
// (std::uncaught_exceptions() > 0): its kb::yield returns at once.
struct yielding_dtor {
    int rank;
    ~yielding_dtor()
    {
        tr_add("dtor %d cancelled=%d", rank, kb::is_cancelled());
        kb::yield();
        tr_add("dtor %d yielded and goes on", rank);
    }
};

static void test_cpp_a_destructor_suspending_during_a_cancel_unwind_returns_at_once(void **)
{
    spawn_failing(2,
                  [](int r) {
                      if (r == 1)
                          throw std::runtime_error("boom");
                      yielding_dtor d{r};
                      kb::yield();
                  },
                  {1});
    tr_assert("dtor 0 cancelled=1\n"
              "dtor 0 yielded and goes on\n");
}

static void test_cpp_a_destructor_suspending_during_an_exception_unwind_really_yields(void **)
{
    spawn_failing(2,
                  [](int r) {
                      if (r == 0) {
                          yielding_dtor d{r};
                          throw std::runtime_error("boom"); // not cancelled: the yield switches
                      }
                      for (int i = 0; i < 3; i++) {
                          tr_add("rank 1 turn %d", i);
                          kb::yield();
                      }
                  },
                  {0});
    tr_assert("dtor 0 cancelled=0\n"
              "rank 1 turn 0\n"
              "dtor 0 yielded and goes on\n");
}

static void test_cpp_a_rank_that_catches_cancelled_and_returns_is_no_error(void **)
{
    spawn_failing(2,
                  [](int r) {
                      if (r == 1)
                          throw std::runtime_error("boom");
                      try {
                          kb::yield();
                      } catch (const kb::cancelled &) {
                          tr_add("rank 0 caught kb::cancelled");
                      }
                  },
                  {1});
    tr_assert("rank 0 caught kb::cancelled\n");
}

static void test_cpp_a_rank_that_suspends_after_catching_cancelled_gets_it_again_at_once(void **)
{
    spawn_failing(3,
                  [](int r) {
                      if (r == 1) {
                          kb::yield();
                          throw std::runtime_error("boom");
                      }
                      try {
                          for (;;)
                              kb::yield();
                      } catch (const kb::cancelled &) {
                          tr_add("rank %d caught it", r);
                      }
                      try {
                          kb::barrier();
                      } catch (const kb::cancelled &) {
                          tr_add("rank %d caught it again", r);
                      }
                      kb::wait(7);
                  },
                  {1});
    // No switch in between: each rank's lines are together.
    tr_assert("rank 0 caught it\n"
              "rank 0 caught it again\n"
              "rank 2 caught it\n"
              "rank 2 caught it again\n");
}

static void test_cpp_catching_std_exception_does_not_catch_cancelled(void **)
{
    spawn_failing(2,
                  [](int r) {
                      if (r == 1)
                          throw std::runtime_error("boom");
                      traced_dtor a{"a", r};
                      try {
                          kb::yield();
                      } catch (const std::exception &) {
                          tr_add("swallowed");
                      }
                      tr_add("rank 0 went on");
                  },
                  {1});
    tr_assert("dtor a 0\n");
}

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpp_ranks_cancelled_at_yield_run_their_destructors_in_rank_order),
        cmocka_unit_test(test_cpp_ranks_cancelled_at_wait_run_their_destructors),
        cmocka_unit_test(test_cpp_ranks_cancelled_at_barrier_run_their_destructors),
        cmocka_unit_test(test_cpp_never_started_ranks_run_neither_body_nor_destructor),
        cmocka_unit_test(test_cpp_a_destructor_suspending_during_a_cancel_unwind_returns_at_once),
        cmocka_unit_test(test_cpp_a_destructor_suspending_during_an_exception_unwind_really_yields),
        cmocka_unit_test(test_cpp_a_rank_that_catches_cancelled_and_returns_is_no_error),
        cmocka_unit_test(test_cpp_a_rank_that_suspends_after_catching_cancelled_gets_it_again_at_once),
        cmocka_unit_test(test_cpp_catching_std_exception_does_not_catch_cancelled),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
