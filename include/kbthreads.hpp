/* SPDX-License-Identifier: MIT */
/**
 * @file kbthreads.hpp
 * @brief C++17 layer over kbthreads.h: callables as ranks, RAII, exceptions as rank failures.
 *
 * Header-only; it needs nothing but the C library (link with -lkbthreads, or
 * kbthreads::kbthreads). Everything is in namespace kb.
 *
 * @code
 * kb::context ctx;                         // or kb::context ctx(my_engine);
 * std::vector<int> order;
 * ctx.spawn(4, [&](int rank) {             // any callable taking the rank
 *     for (int step = 0; step < 3; step++) {
 *         order.push_back(rank);           // one rank at a time: no lock
 *         kb::yield();                     // throws kb::cancelled once cancelled
 *     }
 * });                                      // a rank that threw: kb::spawn_error
 * @endcode
 *
 * Rules
 *   - A rank function is any callable invocable as `fn(int rank)` returning
 *     void or something convertible to int (nonzero: the rank failed with that
 *     code, as in C). A rank that lets an exception escape fails the spawn:
 *     the code is kb::failure::code() for a kb::failure, the error code's value
 *     for a std::system_error of kb::category(), else kb::exception_code; the
 *     message is what() ("an exception not derived from std::exception" for
 *     others, e.g. `throw 42`). The original exception is kept in the
 *     kb::spawn_error the spawn throws.
 *   - Cancellation: spawns run in KB_CANCEL_RETURN mode whatever the options
 *     say. A cancelled rank's suspension point (kb::yield, kb::wait,
 *     kb::barrier, kb::context::wait in a rank) throws kb::cancelled, which is
 *     not a std::exception so that `catch (const std::exception &)` does not
 *     swallow it; the stack unwinds (destructors run, one rank at a time, in
 *     rank order) and the rank's entry catches it without reporting anything.
 *     While the thread is already unwinding (std::uncaught_exceptions() > 0),
 *     a cancelled suspension point returns instead of throwing, so a destructor
 *     that suspends cannot call std::terminate that way.
 *   - Why RETURN mode: UNWIND mode (and kb_raise) leave a rank with pthread_exit,
 *     a forced unwind. A forced unwind runs destructors, but `catch (...)` that
 *     does not rethrow it aborts the process, noexcept frames (every destructor)
 *     terminate, and the standard does not define it at all. So nothing in this
 *     layer calls pthread_exit or lets a forced unwind cross C++ frames: C++
 *     ranks fail by throwing (kb::failure for a chosen code), never by kb_raise.
 *     (Should a rank call kb_raise or pthread_exit anyway, the entry lets
 *     glibc's forced unwind pass on, so the C rules apply.)
 *   - Engine hooks (kb::engine) run on the driver side. An exception thrown by
 *     a hook never crosses the library's C frames: wait answers
 *     kb::exception_code (the drain fails, or a driver-side wait rethrows the
 *     exception), bind fails the spawn (the rank it was binding fails with the
 *     hook's message, the others never run their function), abort's is kept;
 *     the first such exception is kb::spawn_error::engine_exception().
 *   - Library error codes become std::system_error with kb::category()
 *     (messages from kb_strerror; conditions compare equal to std::errc).
 *   - Threads: what the C header says of a kb_ctx holds for a kb::context; a
 *     context must outlive its process contexts and must not be moved while
 *     a spawn or process context on it is live.
 */
#ifndef KBTHREADS_HPP
#define KBTHREADS_HPP

#include <kbthreads.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__GLIBCXX__)
#include <cxxabi.h> /* abi::__forced_unwind */
#endif

/** The C++ layer over libkbthreads. */
namespace kb {

/* ------------------------------------------------------------------------ */
/* Errors.                                                                  */
/* ------------------------------------------------------------------------ */

/** @cond KB_INTERNAL */
namespace detail {
class category_impl final : public std::error_category {
  public:
    const char *name() const noexcept override { return "kb"; }
    std::string message(int ev) const override { return kb_strerror(ev); }
    /* KB_E* codes that are negated errno values compare equal to std::errc. */
    std::error_condition default_error_condition(int ev) const noexcept override
    {
        if (ev < 0 && ev > -4096)
            return std::error_condition(-ev, std::generic_category());
        return std::error_condition(ev, *this);
    }
};
} // namespace detail
/** @endcond */

/** The error category of libkbthreads codes: name "kb", messages from
 *  kb_strerror(); negative errno codes are equivalent to std::errc values
 *  (`ec == std::errc::invalid_argument` for KB_EINVAL). */
inline const std::error_category &category() noexcept
{
    static const detail::category_impl instance;
    return instance;
}

/** The code recorded for a rank that threw an exception other than
 *  kb::failure (or a std::system_error of kb::category()), and the code an
 *  engine hook that threw answers the library with. Positive, so it never
 *  collides with a library code. */
inline constexpr int exception_code = 10100;

/** Throw std::system_error(code, kb::category(), what) for a nonzero code. */
inline void check(int code, const char *what)
{
    if (code != 0)
        throw std::system_error(std::error_code(code, category()), what);
}

/** Thrown by a rank to fail with a chosen code and message (the C++ form of
 *  kb_raise). Code 0 is recorded as KB_EINVAL, as by kb_raise. */
class failure : public std::runtime_error {
  public:
    /** A failure with code and message what. */
    failure(int code, const std::string &what) : std::runtime_error(what), code_(code != 0 ? code : KB_EINVAL)
    {
    }
    /** The code the rank fails with (never 0). */
    int code() const noexcept { return code_; }

  private:
    int code_;
};

/** @cond KB_INTERNAL */
namespace detail {
[[noreturn]] inline void throw_cancelled();
} // namespace detail
/** @endcond */

/** Thrown by the suspension points of a cancelled rank. Deliberately not
 *  derived from std::exception, so that handlers for std::exception let it
 *  pass; the rank's entry catches it. A rank that catches it and returns
 *  normally is no error; if it suspends again it gets a new one at once.
 *  Only the library throws it. */
class cancelled final {
  private:
    cancelled() = default;
    friend void detail::throw_cancelled();
};

/** @cond KB_INTERNAL */
namespace detail {
[[noreturn]] inline void throw_cancelled()
{
    throw cancelled();
}

/* The result of a suspension point of a rank (or a driver-side wait). */
inline void suspended(int rc, const char *what)
{
    if (rc == KB_ECANCELED && kb_rank() >= 0) {
        if (std::uncaught_exceptions() > 0)
            return; /* called from a destructor during an unwind: do not terminate */
        throw_cancelled();
    }
    check(rc, what);
}

/* The message and code of a rank exception; what() stays valid while e lives. */
inline const char *describe(const std::exception_ptr &e, int *code)
{
    *code = exception_code;
    if (!e)
        return "unknown exception";
    try {
        std::rethrow_exception(e);
    } catch (const failure &f) {
        *code = f.code();
        return f.what();
    } catch (const std::system_error &s) {
        if (s.code().category() == category() && s.code().value() != 0)
            *code = s.code().value();
        return s.what();
    } catch (const std::exception &x) {
        return x.what();
    } catch (...) {
        return "an exception not derived from std::exception";
    }
}
} // namespace detail
/** @endcond */

/** One root-cause rank of a failed spawn (kb_rank_error, with the exception). */
struct rank_error {
    int rank;                     /**< the rank */
    int code;                     /**< its failure code */
    std::string message;          /**< the exception's what(), or the C message */
    std::exception_ptr exception; /**< what the rank threw; null if it returned a code */
};

/** @cond KB_INTERNAL */
namespace detail {
struct report {
    std::error_code code;
    std::vector<rank_error> ranks;
    int drain_code = 0;
    kb_handle drain_handle = 0;
    std::exception_ptr engine_exception;
    std::uint64_t turn = 0;
    std::vector<kb_live_rank> live;
};
} // namespace detail
/** @endcond */

/** A failed spawn (KB_ESPAWN, KB_ETIMEDOUT or KB_EDIVERGED with a report).
 *  what() is kb_spawn_error_message(). */
class spawn_error : public std::runtime_error {
  public:
    /** @cond KB_INTERNAL */
    spawn_error(const char *what, std::shared_ptr<const detail::report> r)
        : std::runtime_error(what), r_(std::move(r))
    {
    }
    /** @endcond */
    /** KB_ESPAWN, KB_ETIMEDOUT or KB_EDIVERGED, in kb::category(). */
    std::error_code code() const noexcept { return r_->code; }
    /** The root-cause ranks, in the order their failures were recorded. */
    const std::vector<rank_error> &ranks() const noexcept { return r_->ranks; }
    /** The engine's code if the drain failed (kb::exception_code if its wait
     *  threw), else 0. */
    int drain_code() const noexcept { return r_->drain_code; }
    /** The handle whose engine wait failed in the drain, else 0. */
    kb_handle drain_handle() const noexcept { return r_->drain_handle; }
    /** The first exception an engine hook threw during the spawn, or null. */
    std::exception_ptr engine_exception() const noexcept { return r_->engine_exception; }
    /** With KB_EDIVERGED: the 1-based turn where the replay stopped matching. */
    std::uint64_t turn() const noexcept { return r_->turn; }
    /** With KB_ETIMEDOUT or KB_EDIVERGED: the live ranks, in rank order. */
    const std::vector<kb_live_rank> &live() const noexcept { return r_->live; }

  private:
    std::shared_ptr<const detail::report> r_;
};

/* ------------------------------------------------------------------------ */
/* Calls made by rank functions.                                            */
/* ------------------------------------------------------------------------ */

/** This thread's rank, or -1 outside a rank. */
inline int rank() noexcept
{
    return kb_rank();
}
/** The number of ranks of this rank's spawn, or 0 outside a rank. */
inline int world_size() noexcept
{
    return kb_world_size();
}
/** Whether this rank has been cancelled (false outside a rank). */
inline bool is_cancelled() noexcept
{
    return kb_cancelled() != 0;
}
/** kb_yield: give the baton on until this rank's next turn. Throws
 *  kb::cancelled once cancelled (see the rules above), std::system_error
 *  (KB_EPERM) outside a rank. */
inline void yield()
{
    detail::suspended(kb_yield(), "kb::yield");
}
/** kb_barrier: wait until every not-finished rank has arrived. Throws as
 *  kb::yield does. */
inline void barrier()
{
    detail::suspended(kb_barrier(), "kb::barrier");
}
/** kb_wait on this rank's ctx: return at once if h is completed, else queue
 *  it and suspend until a drain completes it. Throws as kb::yield does, and
 *  std::system_error (KB_EINVAL) for a reserved handle. */
inline void wait(kb_handle h)
{
    if (kb_rank() < 0)
        check(KB_EPERM, "kb::wait");
    detail::suspended(kb_wait(kb_current_ctx(), h), "kb::wait");
}

/* ------------------------------------------------------------------------ */
/* Engines and contexts.                                                    */
/* ------------------------------------------------------------------------ */

class context;

/** The C++ form of kb_engine. Every hook runs on the driver side while the
 *  driver holds the baton; the defaults do what a NULL C hook does. An
 *  exception thrown by a hook is caught before it reaches the library (see
 *  the rules above). The engine must outlive the contexts using it. */
class engine {
  public:
    /** Abstract (so derive from it), though every hook has a default. */
    virtual ~engine() = 0;
    /** Run the simulation until h completes: 0, or a nonzero code that fails
     *  the spawn (in a drain) or is thrown as std::system_error by a
     *  driver-side kb::context::wait. Default: 0 (complete at once). */
    virtual int wait(kb_handle /*h*/, void * /*meta*/, kb_wait_origin /*origin*/) { return 0; }
    /** Called for rank 0..nprocs-1 in order before any rank runs. */
    virtual void bind(context & /*ctx*/, int /*rank*/) {}
    /** Called once per failure, after the live ranks are cancelled and before
     *  the queues are cleared; also when a live process context is destroyed
     *  (an exception from that call is dropped). */
    virtual void abort(context & /*ctx*/) {}
};

inline engine::~engine() = default;

/** Spawn options: the C struct (value-initialise it: `kb::spawn_options o{};`).
 *  cancel_mode is ignored: C++ spawns always run in KB_CANCEL_RETURN mode. */
using spawn_options = kb_spawn_opts;

class process_context;

/** @cond KB_INTERNAL */
namespace detail {
/* What a kb::context owns on the heap, so that its address (the C engine's
 * self) survives moves of the context. Touched only by the baton holder. */
struct ctx_state {
    kb_ctx *ctx = nullptr;
    engine *eng = nullptr;
    context *owner = nullptr;
    std::exception_ptr hook_error; /* the first exception a hook threw, until taken */
    int bind_failed = -1;          /* the rank whose bind threw in the current spawn */

    void keep(std::exception_ptr e)
    {
        if (!hook_error)
            hook_error = std::move(e);
    }
    static int wait_hook(void *self, kb_handle h, void *meta, kb_wait_origin origin) noexcept
    {
        auto *s = static_cast<ctx_state *>(self);
        try {
            return s->eng->wait(h, meta, origin);
        } catch (...) {
            s->keep(std::current_exception());
            return exception_code;
        }
    }
    static void bind_hook(void *self, kb_ctx *, int rank) noexcept
    {
        auto *s = static_cast<ctx_state *>(self);
        if (s->bind_failed >= 0)
            return; /* the spawn is failing: bind no further ranks */
        try {
            s->eng->bind(*s->owner, rank);
        } catch (...) {
            s->keep(std::current_exception());
            s->bind_failed = rank;
        }
    }
    static void abort_hook(void *self, kb_ctx *) noexcept
    {
        auto *s = static_cast<ctx_state *>(self);
        try {
            s->eng->abort(*s->owner);
        } catch (...) {
            s->keep(std::current_exception());
        }
    }
};

/* A rank function, type-erased; Fn may be a reference (spawn) or a value
 * (start, which must own it). */
struct body {
    virtual ~body() = default;
    virtual int run(int rank) = 0;
};
template <class Fn> struct body_of final : body {
    Fn fn;
    template <class F> explicit body_of(F &&f) : fn(std::forward<F>(f)) {}
    int run(int rank) override
    {
        if constexpr (std::is_void_v<std::invoke_result_t<Fn &, int>>) {
            std::invoke(fn, rank);
            return 0;
        } else {
            return static_cast<int>(std::invoke(fn, rank));
        }
    }
};

/* One spawn: the body, each rank's exception, the context's state. Each rank
 * writes only its own slot, under the baton; the driver reads after. */
struct run_state {
    ctx_state *cs;
    std::unique_ptr<body> fn;
    std::vector<std::exception_ptr> thrown;

    run_state(ctx_state *c, std::unique_ptr<body> f, int nprocs)
        : cs(c), fn(std::move(f)), thrown(nprocs > 0 ? static_cast<std::size_t>(nprocs) : 0)
    {
    }

    int failed(int rank, std::exception_ptr e) noexcept
    {
        int code;
        const char *msg = describe(e, &code);
        thrown[static_cast<std::size_t>(rank)] = std::move(e);
        kb_fail(code, "%s", msg);
        return code;
    }
    /* Some rank's bind threw: that rank fails with the hook's message; the
     * others give their first turn away and are cancelled, never running fn. */
    int bind_failed(int rank) noexcept
    {
        if (rank != cs->bind_failed) {
            while (kb_yield() == 0) {
            }
            return KB_ECANCELED;
        }
        int code;
        const char *msg = describe(cs->hook_error, &code);
        kb_fail(exception_code, "engine bind hook for rank %d threw: %s", rank, msg);
        return exception_code;
    }

    /* The C entry point of every rank. Not noexcept: a forced unwind (a rank
     * calling kb_raise or pthread_exit despite the rules) must pass on. */
    static int entry(int rank, void *arg)
    {
        auto *st = static_cast<run_state *>(arg);
        try {
            if (st->cs->bind_failed >= 0)
                return st->bind_failed(rank);
            return st->fn->run(rank);
        } catch (const cancelled &) {
            return KB_ECANCELED; /* not recorded for a cancelled rank */
        }
#if defined(__GLIBCXX__)
        catch (abi::__forced_unwind &) {
            throw;
        }
#endif
        catch (...) {
            return st->failed(rank, std::current_exception());
        }
    }

    /* After kb_spawn / kb_join returned rc with report err (owned here):
     * nothing for rc >= 0, else throw spawn_error or std::system_error. */
    void finish(int rc, kb_spawn_error *err, const char *what)
    {
        std::unique_ptr<kb_spawn_error, void (*)(kb_spawn_error *)> owned(err, kb_spawn_error_free);
        if (rc >= 0)
            return;
        std::exception_ptr hook = std::exchange(cs->hook_error, nullptr);
        if (!err)
            check(rc, what);
        auto r = std::make_shared<report>();
        r->code = std::error_code(rc, category());
        for (std::size_t i = 0; i < kb_spawn_error_count(err); i++) {
            const kb_rank_error *re = kb_spawn_error_get(err, i);
            std::exception_ptr e;
            if (re->rank >= 0 && static_cast<std::size_t>(re->rank) < thrown.size())
                e = thrown[static_cast<std::size_t>(re->rank)];
            r->ranks.push_back(rank_error{re->rank, re->code, re->message, e});
        }
        r->drain_code = kb_spawn_error_drain_code(err);
        r->drain_handle = kb_spawn_error_drain_handle(err);
        r->engine_exception = hook;
        r->turn = kb_spawn_error_turn(err);
        for (std::size_t i = 0; i < kb_spawn_error_live_count(err); i++)
            r->live.push_back(*kb_spawn_error_live_get(err, i));
        throw spawn_error(kb_spawn_error_message(err), std::move(r));
    }

    static spawn_options return_mode(const spawn_options &opts)
    {
        spawn_options o = opts;
        o.cancel_mode = KB_CANCEL_RETURN;
        return o;
    }
};

template <class F> void check_rank_fn()
{
    static_assert(std::is_invocable_v<F &, int>, "a rank function is invocable as fn(int rank)");
    using R = std::invoke_result_t<F &, int>;
    static_assert(std::is_void_v<R> || std::is_convertible_v<R, int>,
                  "a rank function returns void or a code convertible to int");
}
} // namespace detail
/** @endcond */

/** A spawn started with kb::context::start (join=False). Move-only; its
 *  destructor frees it as kb_process_context_free does (live ranks are
 *  cancelled, their destructors run). */
class process_context {
  public:
    /** An empty process context (joining it throws KB_EINVAL). */
    process_context() noexcept = default;
    process_context(const process_context &) = delete;
    process_context &operator=(const process_context &) = delete;
    /** Take over o's spawn; o becomes empty. */
    process_context(process_context &&o) noexcept
        : st_(std::move(o.st_)), pc_(std::exchange(o.pc_, nullptr)), failure_(std::move(o.failure_))
    {
    }
    /** Free this one's spawn, then take over o's. */
    process_context &operator=(process_context &&o) noexcept
    {
        if (this != &o) {
            reset();
            st_ = std::move(o.st_);
            pc_ = std::exchange(o.pc_, nullptr);
            failure_ = std::move(o.failure_);
        }
        return *this;
    }
    ~process_context() { reset(); }

    /** Drive rounds until every rank finished (true) or, at the end of a
     *  round, timeout passed (false; at least one round per call; a negative
     *  timeout counts as 0). A failure throws kb::spawn_error, and so does
     *  every later join; other errors std::system_error. */
    template <class Rep, class Period> bool join(const std::chrono::duration<Rep, Period> &timeout)
    {
        const double ms = std::ceil(std::chrono::duration<double, std::milli>(timeout).count());
        long limit = 0;
        if (ms >= static_cast<double>(LONG_MAX))
            limit = LONG_MAX;
        else if (ms > 0)
            limit = static_cast<long>(ms);
        return join_ms(limit);
    }
    /** Drive rounds until every rank finished; throws as join(timeout). */
    void join() { join_ms(-1); }
    /** The statistics so far (kb_process_context_stats; per-rank arrays left
     *  NULL). */
    kb_spawn_stats stats() const
    {
        kb_spawn_stats s{};
        check(kb_process_context_stats(pc_, &s), "kb::process_context::stats");
        return s;
    }
    /** The C process context (NULL when empty). */
    kb_process_context *native_handle() const noexcept { return pc_; }

  private:
    friend class context;
    process_context(std::unique_ptr<detail::run_state> st, kb_process_context *pc) noexcept
        : st_(std::move(st)), pc_(pc)
    {
    }
    bool join_ms(long ms)
    {
        if (failure_)
            std::rethrow_exception(failure_);
        kb_spawn_error *err = nullptr;
        int rc = kb_join(pc_, ms, &err);
        try {
            st_ ? st_->finish(rc, err, "kb::process_context::join") : check(rc, "kb::process_context::join");
        } catch (const spawn_error &) {
            failure_ = std::current_exception();
            throw;
        }
        return rc == 1;
    }
    void reset() noexcept
    {
        if (!pc_)
            return;
        kb_process_context_free(std::exchange(pc_, nullptr));
        st_->cs->hook_error = nullptr; /* an abort hook's exception here has nowhere to go */
        st_->cs->bind_failed = -1;
        st_.reset();
    }

    std::unique_ptr<detail::run_state> st_;
    kb_process_context *pc_ = nullptr;
    std::exception_ptr failure_;
};

/** A scheduling context (owns a kb_ctx; move-only). Its methods are the C
 *  calls on its ctx, errors thrown as std::system_error. */
class context {
  public:
    /** A context without an engine (every wait completes as soon as the drain
     *  reaches it). Throws std::system_error (KB_ENOMEM). */
    context() : context(nullptr) {}
    /** A context driving e (not owned; it must outlive the context). */
    explicit context(engine &e) : context(&e) {}
    context(const context &) = delete;
    context &operator=(const context &) = delete;
    /** Take over o's ctx; o becomes empty. */
    context(context &&o) noexcept : s_(std::move(o.s_))
    {
        if (s_)
            s_->owner = this;
    }
    /** Destroy this one's ctx, then take over o's. */
    context &operator=(context &&o) noexcept
    {
        if (this != &o) {
            destroy();
            s_ = std::move(o.s_);
            if (s_)
                s_->owner = this;
        }
        return *this;
    }
    /** kb_ctx_destroy. Destroying a context that is in use (a live spawn or
     *  process context, or from its own rank or engine hook) is a program
     *  error: std::terminate(), as for a joinable std::thread. */
    ~context() { destroy(); }

    /** Run fn(rank) for ranks 0..nprocs-1 to completion. fn is called in
     *  place (not copied). Throws kb::spawn_error when the spawn failed,
     *  std::system_error for errors before any rank ran (KB_EINVAL for
     *  nprocs < 0, KB_EPERM from a rank, KB_EBUSY from an engine hook, ...),
     *  std::bad_alloc if the layer's own bookkeeping (a pointer per rank)
     *  cannot be allocated. */
    template <class F> void spawn(int nprocs, F &&fn, const spawn_options &opts = spawn_options{})
    {
        detail::check_rank_fn<std::remove_reference_t<F>>();
        detail::run_state st(s_.get(), std::make_unique<detail::body_of<F &>>(fn), nprocs);
        const spawn_options o = detail::run_state::return_mode(opts);
        kb_spawn_error *err = nullptr;
        int rc = kb_spawn(native_handle(), &detail::run_state::entry, &st, nprocs, &o, &err);
        s_->bind_failed = -1;
        st.finish(rc, err, "kb::context::spawn");
    }
    /** kb_start: create and bind the ranks without running them; fn is
     *  decay-copied (or moved) into the result. The errors of spawn before any
     *  rank ran. */
    template <class F> process_context start(int nprocs, F &&fn, const spawn_options &opts = spawn_options{})
    {
        using Fn = std::decay_t<F>;
        detail::check_rank_fn<Fn>();
        auto st = std::make_unique<detail::run_state>(
            s_.get(), std::make_unique<detail::body_of<Fn>>(std::forward<F>(fn)), nprocs);
        const spawn_options o = detail::run_state::return_mode(opts);
        kb_process_context *pc = nullptr;
        int rc = kb_start(native_handle(), &detail::run_state::entry, st.get(), nprocs, &o, &pc);
        if (rc != 0) {
            s_->bind_failed = -1;
            s_->hook_error = nullptr;
            check(rc, "kb::context::start");
        }
        return process_context(std::move(st), pc);
    }

    /** kb_wait_meta. In a rank: a suspension point like kb::wait. On the
     *  driver side: the engine's wait; a nonzero code is thrown as
     *  std::system_error, an exception of the hook is rethrown. */
    void wait(kb_handle h, void *meta = nullptr)
    {
        const bool had_error = s_ && s_->hook_error;
        int rc = kb_wait_meta(native_handle(), h, meta);
        if (rc != 0 && kb_rank() < 0 && !had_error && s_ && s_->hook_error)
            std::rethrow_exception(std::exchange(s_->hook_error, nullptr)); /* this wait's hook threw */
        detail::suspended(rc, "kb::context::wait");
    }
    /** kb_enqueue_wait. */
    void enqueue_wait(kb_handle h)
    {
        check(kb_enqueue_wait(native_handle(), h), "kb::context::enqueue_wait");
    }
    /** kb_complete. */
    void complete(kb_handle h) { check(kb_complete(native_handle(), h), "kb::context::complete"); }
    /** kb_is_completed. */
    bool is_completed(kb_handle h) const
    {
        int rc = kb_is_completed(native_handle(), h);
        if (rc < 0)
            check(rc, "kb::context::is_completed");
        return rc == 1;
    }
    /** kb_collective_submit. */
    void collective_submit(kb_handle h, int sip_id, void *meta = nullptr)
    {
        check(kb_collective_submit(native_handle(), h, sip_id, meta), "kb::context::collective_submit");
    }
    /** The pending worker waits, oldest first. */
    std::vector<kb_handle> pending_waits() const
    {
        std::vector<kb_handle> v(kb_pending_waits(native_handle(), nullptr, 0));
        v.resize(kb_pending_waits(native_handle(), v.data(), v.size()));
        return v;
    }
    /** The pending collectives, oldest first. */
    std::vector<kb_collective> pending_collectives() const
    {
        std::vector<kb_collective> v(kb_pending_collectives(native_handle(), nullptr, 0));
        v.resize(kb_pending_collectives(native_handle(), v.data(), v.size()));
        return v;
    }
    /** The C ctx (NULL for a moved-from context). */
    kb_ctx *native_handle() const noexcept { return s_ ? s_->ctx : nullptr; }

  private:
    explicit context(engine *e) : s_(std::make_unique<detail::ctx_state>())
    {
        s_->eng = e;
        s_->owner = this;
        kb_engine hooks{};
        if (e) {
            hooks.self = s_.get();
            hooks.wait = &detail::ctx_state::wait_hook;
            hooks.bind = &detail::ctx_state::bind_hook;
            hooks.abort = &detail::ctx_state::abort_hook;
        }
        check(kb_ctx_create(e ? &hooks : nullptr, &s_->ctx), "kb::context");
    }
    void destroy() noexcept
    {
        if (s_ && kb_ctx_destroy(s_->ctx) != 0) {
            std::fprintf(stderr, "kbthreads: kb::context destroyed while in use\n");
            std::terminate();
        }
        s_.reset();
    }

    std::unique_ptr<detail::ctx_state> s_;
};

/** A C engine (a kb_engine: self and hooks, NULL hooks allowed) behind the
 *  C++ interface, to drive an engine written in C from a kb::context. The
 *  hooks get the context's kb_ctx. */
class c_engine final : public engine {
  public:
    /** Wraps a copy of e. */
    explicit c_engine(const kb_engine &e) noexcept : e_(e) {}
    /** e's wait hook (0 without one). */
    int wait(kb_handle h, void *meta, kb_wait_origin origin) override
    {
        return e_.wait ? e_.wait(e_.self, h, meta, origin) : 0;
    }
    /** e's bind hook, if any. */
    void bind(context &ctx, int rank) override
    {
        if (e_.bind)
            e_.bind(e_.self, ctx.native_handle(), rank);
    }
    /** e's abort hook, if any. */
    void abort(context &ctx) override
    {
        if (e_.abort)
            e_.abort(e_.self, ctx.native_handle());
    }

  private:
    kb_engine e_;
};

} // namespace kb

#endif /* KBTHREADS_HPP */
