/* SPDX-License-Identifier: MIT */
// The six example scenarios of the reference oracle, written with the C++
// layer (include/kbthreads.hpp): lambdas as ranks, kb::yield / kb::wait,
// a thrown kb::failure for the reference's raise, kb::cancelled unwinding
// the cancelled ranks. Each must print the trace the C port prints
// (tests/support/reference_traces.h), line for line: the engine is the C
// fake engine behind kb::c_engine, and the trace lines of the rank side and
// of the outcome (the kb::spawn_error) are written here as fe_traced and
// fe_do_spawn write them.
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cpp_test.hpp"

extern "C" {
#include "reference_traces.h"
}

namespace {

struct collective {
    int arrived = 0, sum = 0, result = 0;
    bool issued = false;
    kb_handle h = 0;
    std::string meta;
};

// One scenario: the fake engine, a kb::context driving it, and the
// reference's all_reduce state.
struct scenario {
    fe *f = fe_new();
    kb::c_engine bridge{f->engine}; // the fake engine's C hooks
    kb::context ctx{bridge};
    std::map<std::string, collective> colls;
    int next_sip = 0;
    std::vector<int> calls;

    scenario()
    {
        // The fake engine prints the queues of f->ctx: make that this context's.
        assert_int_equal(kb_ctx_destroy(f->ctx), 0);
        f->ctx = ctx.native_handle();
    }
    ~scenario()
    {
        f->ctx = nullptr; // the context destroys its own
        fe_free(f);
    }

    // (rank) fe_wait's lines around kb::wait.
    void wait(int r, kb_handle h)
    {
        if (ctx.is_completed(h)) {
            tr_add("wait_fast %d %s", r, tr_name(h));
            kb::wait(h);
            return;
        }
        tr_add("wait_enqueue %d %s", r, tr_name(h));
        kb::wait(h);
        tr_add("wait_done %d %s", r, tr_name(h));
    }

    // (rank) fe_all_reduce (FE_AR_WAIT) with the C++ calls.
    void all_reduce(int r, const std::string &tag, int world)
    {
        collective &c = colls[tag];
        if (c.h == 0) {
            c.h = fe_h(("coll:" + tag).c_str());
            c.meta = "all_reduce:" + tag;
        }
        c.arrived++;
        c.sum += r + 1;
        tr_add("coll_arrive %d %s n=%d/%d", r, tag.c_str(), c.arrived, world);
        if (c.arrived == world) {
            int sip = next_sip++;
            c.issued = true;
            c.result = c.sum;
            ctx.collective_submit(c.h, sip, &c.meta[0]);
            tr_add("coll_issue %d %s sip=%d", r, tr_name(c.h), sip);
        } else {
            while (!c.issued)
                kb::yield();
        }
        wait(r, c.h);
        tr_add("coll_done %d %s result=%d", r, tag.c_str(), c.result);
    }

    // fe_do_spawn of fe_traced(body): the outcome lines from kb::spawn_error.
    void spawn(int nprocs, const std::function<void(int)> &body)
    {
        f->nprocs = nprocs;
        f->driver = pthread_self();
        calls.assign(static_cast<std::size_t>(nprocs), 0);
        tr_add("spawn_begin nprocs=%d", nprocs);
        try {
            ctx.spawn(nprocs, [&](int r) { traced(r, body); });
            tr_add("spawn_return 0");
        } catch (const kb::spawn_error &e) {
            tr_add("spawn_raised %s", fe_code(e.code().value()));
            report(e);
        }
        fe_post(f, 1);
        tr_add("spawn_end");
    }

    // fe_traced: start, end or unwind (cancel|raise), then finally from a destructor.
    void traced(int r, const std::function<void(int)> &body)
    {
        calls[static_cast<std::size_t>(r)]++;
        tr_add("start %d", r);
        struct finally_line {
            int r;
            ~finally_line() { tr_add("finally %d", r); }
        } fin{r};
        try {
            body(r);
        } catch (const kb::cancelled &) {
            tr_add("unwind %d cancel", r);
            throw;
        } catch (...) {
            tr_add("unwind %d raise", r);
            throw;
        }
        tr_add("end %d", r);
    }

    static void report(const kb::spawn_error &e)
    {
        std::vector<int> ranks;
        for (const kb::rank_error &re : e.ranks())
            ranks.push_back(re.rank);
        std::sort(ranks.begin(), ranks.end());
        std::string line = "error ranks=[";
        for (std::size_t i = 0; i < ranks.size(); i++)
            line += (i ? "," : "") + std::to_string(ranks[i]);
        if (e.ranks().empty())
            line += "] first=None code=None";
        else
            line +=
                "] first=" + std::to_string(e.ranks()[0].rank) + " code=" + std::to_string(e.ranks()[0].code);
        tr_add("%s", line.c_str());
        for (const kb::rank_error &re : e.ranks())
            tr_add("error_entry %d code=%d msg=%s", re.rank, re.code, re.message.c_str());
        if (e.drain_code() != 0 || e.drain_handle() != 0)
            tr_add("error_drain code=%d handle=%s", e.drain_code(), tr_name(e.drain_handle()));
        tr_add("error_msg %s", e.what());
    }
};

// A plan: rank r runs plans[r], writing 'step R I' before action I.
using action = std::function<void(scenario &, int)>;
using plan = std::vector<action>;

const action Y = [](scenario &, int) { kb::yield(); };
action W(const char *name)
{
    return [name](scenario &s, int r) { s.wait(r, fe_h(name)); };
}
action AR(const char *tag, int world)
{
    return [tag, world](scenario &s, int r) { s.all_reduce(r, tag, world); };
}
action RAISE(int code, const char *msg)
{
    return [code, msg](scenario &, int) { throw kb::failure(code, msg); };
}
action ENQ(const char *name)
{
    return [name](scenario &s, int) { s.ctx.enqueue_wait(fe_h(name)); };
}

void spawn_plans(scenario &s, const std::vector<plan> &plans)
{
    s.spawn(static_cast<int>(plans.size()), [&](int r) {
        const plan &p = plans[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < p.size(); i++) {
            tr_add("step %d %zu", r, i);
            p[i](s, r);
        }
    });
}

} // namespace

static void test_cpp_ref_02_nprocs4_yields3(void **)
{
    scenario s;
    s.spawn(4, [](int r) {
        for (int i = 0; i < 3; i++) {
            tr_add("step %d %d", r, i);
            kb::yield();
        }
    });
    tr_assert(expect_02);
}

static void test_cpp_ref_04_worker_waits_fifo(void **)
{
    scenario s;
    spawn_plans(s, {{W("h:40"), Y, W("h:10")},
                    {W("h:30"), W("h:7")},
                    {W("h:20"), W("h:shared")},
                    {W("h:10"), W("h:shared"), Y}});
    tr_assert(expect_04);
}

static void test_cpp_ref_06_allreduce4(void **)
{
    scenario s;
    const plan p{Y, AR("ar0", 4), Y, Y};
    spawn_plans(s, {p, p, p, p});
    tr_assert(expect_06);
}

static void test_cpp_ref_09_rank2_raises_step2(void **)
{
    scenario s;
    const plan p01{Y, AR("g01", 2), Y};
    spawn_plans(s, {p01, p01, {Y, RAISE(1, "rank 2 boom at step 1")}, {Y, Y, Y}});
    tr_assert(expect_09);
    assert_int_equal(s.f->aborts, 1);
}

static void test_cpp_ref_10_rank0_raises_before_yield(void **)
{
    scenario s;
    const plan later{Y, Y};
    spawn_plans(s, {{RAISE(1, "rank 0 boom before first yield")}, later, later, later});
    tr_assert(expect_10);
    // never-started ranks never ran their function
    assert_true((s.calls == std::vector<int>{1, 0, 0, 0}));
    assert_int_equal(s.f->aborts, 1);
}

static void test_cpp_ref_24_drain_after_last_round(void **)
{
    scenario s;
    spawn_plans(s, {{ENQ("late:0")}, {}});
    tr_assert(expect_24);
}

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpp_ref_02_nprocs4_yields3),
        cmocka_unit_test(test_cpp_ref_04_worker_waits_fifo),
        cmocka_unit_test(test_cpp_ref_06_allreduce4),
        cmocka_unit_test(test_cpp_ref_09_rank2_raises_step2),
        cmocka_unit_test(test_cpp_ref_10_rank0_raises_before_yield),
        cmocka_unit_test(test_cpp_ref_24_drain_after_last_round),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
