/* SPDX-License-Identifier: MIT */
// kbdemo_cpp - kbdemo's data-parallel training step, the rank program
// written with the C++ layer (include/kbthreads.hpp): a lambda per rank,
// kb::wait / kb::yield / kb::barrier, failures thrown as kb::failure and
// reported from kb::spawn_error. The model, the command line and the report
// are kbdemo's (demo_common.c), so for the same options both programs print
// the same bytes on stdout (a ctest compares them).
//
// Exit status: 0 success, 1 a kbthreads/engine failure or a wrong result,
// 2 bad command line.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <system_error>

#include <kbthreads.hpp>

#include "demo_common.h"
#include "des_engine.h"

namespace {

// One rank's program. Every failure is a kb::failure with kbdemo's code and
// message; cancellation arrives as kb::cancelled from a suspension point.
class rank_program {
  public:
    rank_program(demo &d, kb::context &ctx, int rank) : d_(d), ctx_(ctx), rank_(rank), rs_(d.rs[rank]) {}

    void run()
    {
        if (kb::rank() != rank_ || kb::world_size() != d_.nranks)
            fail(DEMO_EIDENTITY, "kb::rank() " + std::to_string(kb::rank()) + ", kb::world_size() " +
                                     std::to_string(kb::world_size()));
        compute_steps();
        ring_allreduce();
        loss_allreduce();
        kb::barrier();
        char msg[160];
        if (int rc = demo_check(&d_, rank_, msg, sizeof msg))
            throw kb::failure(rc, msg);
        uint64_t t0 = clock();
        await(op(des_compute(d_.eng, rank_, OPTIMIZER_NS), "des_compute (optimizer)"), "kb_wait (optimizer)");
        rs_.busy_ns += OPTIMIZER_NS;
        record(&d_, rank_, t0, "optimizer step");
    }

  private:
    [[noreturn]] void fail(int code, const std::string &what) const
    {
        throw kb::failure(code, "rank " + std::to_string(rank_) + ": " + what);
    }
    // A handle from an engine creation call (0: the engine refused).
    kb_handle op(kb_handle h, const char *what) const
    {
        const char *why = des_engine_error(d_.eng);
        if (h == 0)
            fail(DEMO_EENGINE, std::string(what) + ": " + (why[0] ? why : "refused"));
        return h;
    }
    // An engine code from des_observe.
    void check_engine(int rc, const char *what) const
    {
        if (rc != 0)
            fail(rc, std::string(what) + ": " + (rc < 0 ? kb_strerror(rc) : des_strerror(rc)) +
                         (rc > 0 ? std::string(": ") + des_engine_error(d_.eng) : std::string()));
    }
    uint64_t clock() const { return des_clock(d_.eng, rank_); }
    void await(kb_handle h, const char *what)
    {
        kb::wait(h);
        check_engine(des_observe(d_.eng, rank_, h), what);
    }
    // des_await_all for a send and a recv: queue the send, wait for the recv,
    // so that one drain completes both and the rank loses a single turn.
    void await_both(kb_handle send, kb_handle recv, const char *phase)
    {
        if (!ctx_.is_completed(recv)) {
            if (!ctx_.is_completed(send))
                ctx_.enqueue_wait(send);
            kb::wait(recv);
        }
        await(send, phase);
        await(recv, phase);
    }

    void compute_steps()
    {
        size_t nelems = static_cast<size_t>(d_.nranks) * ELEMS_PER_CHUNK;
        for (int s = 1; s <= d_.steps; s++) {
            uint64_t t0 = clock(), dur = compute_ns(rank_, s);
            await(op(des_compute(d_.eng, rank_, dur), "des_compute"), "kb_wait (compute)");
            for (size_t i = 0; i < nelems; i++)
                rs_.grad[i] += contribution(rank_, s, i);
            rs_.busy_ns += dur;
            record(&d_, rank_, t0, "compute step %d/%d", s, d_.steps);
        }
    }

    // One ring exchange: chunk send_c to the right neighbour, the left one's
    // into buf, both in one round.
    void exchange(int send_c, int64_t *buf, const char *phase)
    {
        int n = d_.nranks, right = mod(rank_ + 1, n), left = mod(rank_ - 1, n);
        kb_handle hs =
            op(des_send(d_.eng, rank_, right, chunk_bytes(n, send_c), chunk(&rs_, send_c), CHUNK_LEN),
               "des_send");
        kb_handle hr = op(des_recv(d_.eng, rank_, left, buf, CHUNK_LEN), "des_recv");
        await_both(hs, hr, phase);
    }

    // Reduce-scatter then all-gather, as in kbdemo.c.
    void ring_allreduce()
    {
        int n = d_.nranks, left = mod(rank_ - 1, n);
        for (int k = 0; k < n - 1; k++) {
            int recv_c = mod(rank_ - k - 1, n);
            uint64_t t0 = clock();
            exchange(mod(rank_ - k, n), rs_.tmp, "kb_wait (reduce-scatter)");
            uint64_t dur = chunk_bytes(n, recv_c) / REDUCE_BYTES_PER_NS;
            await(op(des_compute(d_.eng, rank_, dur), "des_compute (reduce)"), "kb_wait (reduce)");
            for (int i = 0; i < ELEMS_PER_CHUNK; i++)
                chunk(&rs_, recv_c)[i] += rs_.tmp[i];
            rs_.busy_ns += dur;
            record(&d_, rank_, t0, "reduce-scatter %d/%d: chunk %d += rank %d", k + 1, n - 1, recv_c, left);
        }
        for (int k = 0; k < n - 1; k++) {
            int recv_c = mod(rank_ - k, n);
            uint64_t t0 = clock();
            exchange(mod(rank_ + 1 - k, n), chunk(&rs_, recv_c), "kb_wait (all-gather)");
            record(&d_, rank_, t0, "all-gather %d/%d: chunk %d from rank %d", k + 1, n - 1, recv_c, left);
        }
    }

    // The loss goes through the collective queue: submit, then yield until
    // drain phase (b) has completed it.
    void loss_allreduce()
    {
        rs_.loss = loss_of(rank_);
        uint64_t t0 = clock();
        kb_handle h = op(des_allreduce_i64(d_.eng, rank_, LOSS_BYTES, &rs_.loss), "des_allreduce_i64");
        ctx_.collective_submit(h, rank_);
        while (!ctx_.is_completed(h))
            kb::yield();
        await(h, "kb_wait (loss)"); // completed: just moves the clock
        record(&d_, rank_, t0, "all-reduce(loss) = %" PRId64, rs_.loss);
    }

    demo &d_;
    kb::context &ctx_;
    int rank_;
    rank_state &rs_;
};

void report_spawn_failure(const kb::spawn_error &e, const des_engine *eng)
{
    std::fprintf(stderr, "kbdemo_cpp: kb::context::spawn: %s\n", e.code().message().c_str());
    std::fprintf(stderr, "kbdemo_cpp: %s\n", e.what());
    if (int dc = e.drain_code())
        std::fprintf(stderr, "kbdemo_cpp: drain failed on handle %" PRIu64 ": %s\n",
                     static_cast<uint64_t>(e.drain_handle()), dc > 0 ? des_strerror(dc) : kb_strerror(dc));
    for (const kb::rank_error &re : e.ranks())
        std::fprintf(stderr, "kbdemo_cpp:   rank %d, code %d: %s\n", re.rank, re.code, re.message.c_str());
    if (des_engine_error(eng)[0] != '\0')
        std::fprintf(stderr, "kbdemo_cpp: engine: %s\n", des_engine_error(eng));
}

// Everything after the command line; the exit status.
int run(demo &d)
{
    if (!demo_setup(&d))
        return 1;
    try {
        kb::c_engine hooks(des_engine_hooks(d.eng));
        kb::context ctx(hooks);
        kb_spawn_stats st{};
        kb::spawn_options opts{};
        opts.trace_path = d.trace;
        opts.stats = &st;
        opts.schedule = d.seeded ? KB_SCHED_SEEDED : KB_SCHED_ROUND_ROBIN;
        opts.seed = d.seed;
        try {
            ctx.spawn(
                d.nranks, [&](int rank) { rank_program(d, ctx, rank).run(); }, opts);
        } catch (const kb::spawn_error &e) {
            report_spawn_failure(e, d.eng);
            return 1;
        }
        return demo_finish(&d, ctx.native_handle(), &st);
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "kbdemo_cpp: %s\n", e.what());
        return 1;
    }
}

} // namespace

int main(int argc, char **argv)
{
    demo d;
    int status = demo_init(&d, "kbdemo_cpp", argc, argv);
    if (status >= 0)
        return status;
    return demo_exit(&d, run(d));
}
