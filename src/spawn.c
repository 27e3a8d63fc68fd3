/* SPDX-License-Identifier: MIT */
/*
 * The driver's entry points: kb_spawn, kb_start, kb_join,
 * kb_process_context_free and kb_process_context_stats. Each checks its
 * caller, takes the ctx (ctx.h) and drives rounds (round_loop.c) of a run
 * created and destroyed by run.c.
 */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "clock.h"
#include "error.h"
#include "rank.h"
#include "round_loop.h"
#include "run.h"
#include "schedule_file.h"
#include "spawn_limits.h"
#include "spawn_options.h"
#include "stats.h"
#include "system.h"

/* The checks every driver entry point makes, in the documented precedence
 * (KB_EINVAL was checked by the caller): KB_EPERM from a rank, KB_EBUSY
 * from an engine hook. */
static int check_driver_thread(void)
{
    if (kb__self())
        return KB_EPERM;
    if (kb_in_hook())
        return KB_EBUSY;
    return 0;
}

/* KB_AFFINITY_ONE_CPU: the driving thread runs on run->opt.cpu while it
 * drives rounds; its own mask is restored afterwards. */
struct driver_pin {
    int on;
    struct kb_cpumask saved;
};

static void pin_driver(const struct kb_run *run, struct driver_pin *p)
{
    p->on = 0;
    if (run->opt.affinity != KB_AFFINITY_ONE_CPU || kb__sys_get_affinity(&p->saved) != 0)
        return;
    p->on = kb__sys_pin_self(run->opt.cpu) == 0;
}

static void unpin_driver(const struct driver_pin *p)
{
    if (p->on)
        kb__sys_set_affinity(&p->saved);
}

int kb_spawn(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
             kb_spawn_error **err)
{
    if (err)
        *err = NULL;
    int rc = kb__spawn_args_check(ctx, fn, nprocs, opts);
    if (rc == 0)
        rc = check_driver_thread();
    if (rc != 0 || (rc = kb__ctx_own_idle(ctx)) != 0)
        return rc;
    struct kb_run *run;
    rc = kb__spawn_room(ctx, nprocs, opts ? opts->stack_size : 0, NULL, 0);
    if (rc == 0)
        rc = kb__run_create(ctx, fn, arg, nprocs, opts, &run);
    if (rc != 0) {
        kb__ctx_disown(ctx);
        return rc;
    }
    kb__ctx_set_run(ctx, run);
    struct driver_pin pin;
    pin_driver(run, &pin);
    while ((rc = kb__sched_round(run)) == 0)
        ;
    unpin_driver(&pin);
    if (rc != 1) { /* KB_ESPAWN, KB_ETIMEDOUT, KB_EDIVERGED, KB_ENOMEM */
        if (err)
            *err = kb__spawn_error_build(run);
    } else {
        rc = 0;
    }
    kb__ctx_set_run(ctx, NULL);
    kb__run_destroy(run);
    kb__ctx_disown(ctx);
    return rc;
}

int kb_start(kb_ctx *ctx, kb_rank_fn fn, void *arg, int nprocs, const kb_spawn_opts *opts,
             kb_process_context **out)
{
    int rc = kb__spawn_args_check(ctx, fn, nprocs, opts);
    if (rc == 0 && !out)
        rc = KB_EINVAL;
    if (rc == 0)
        rc = check_driver_thread();
    if (rc != 0)
        return rc;
    *out = NULL;
    if ((rc = kb__ctx_own_idle(ctx)) != 0)
        return rc;
    if ((rc = kb__spawn_room(ctx, nprocs, opts ? opts->stack_size : 0, NULL, 0)) != 0) {
        kb__ctx_disown(ctx);
        return rc;
    }
    kb_process_context *pc = kb__calloc(1, sizeof *pc);
    if (!pc) {
        kb__ctx_disown(ctx);
        return KB_ENOMEM;
    }
    struct kb_run *run;
    rc = kb__run_create(ctx, fn, arg, nprocs, opts, &run);
    if (rc != 0) {
        free(pc);
        kb__ctx_disown(ctx);
        return rc;
    }
    pc->ctx = ctx;
    pc->run = run;
    kb__ctx_set_run(ctx, run);
    ctx->pc = pc;
    kb__ctx_disown(ctx);
    *out = pc;
    return 0;
}

int kb_spawn_check(const kb_ctx *ctx, int nprocs, const kb_spawn_opts *opts, char *why, size_t why_size)
{
    if (why && why_size)
        why[0] = '\0';
    if (why_size && !why)
        return KB_EINVAL;
    int rc = kb__spawn_opts_check(nprocs, opts); /* kb_spawn's checks of nprocs and opts */
    if (rc == 0)
        rc = check_driver_thread();
    if (rc != 0)
        return rc;
    if (!ctx)
        return kb__spawn_room(NULL, nprocs, opts ? opts->stack_size : 0, why, why_size);
    kb_ctx *owned = (kb_ctx *)ctx; /* ownership is taken through const, as kb__ctx_access_begin does */
    if ((rc = kb__ctx_own_idle(owned)) != 0)
        return rc;
    rc = kb__spawn_room(ctx, nprocs, opts ? opts->stack_size : 0, why, why_size);
    kb__ctx_disown(owned);
    return rc;
}

/* Drive rounds until the run ends (1, or what kb__sched_round stopped it
 * with), or, in a timed kb_join, until a round's drain ends past the
 * deadline (0). A timeout is checked after each round's drain, on the
 * driver. Ranks run round boundaries themselves meanwhile, as in kb_spawn,
 * until the driver raises join.due at the deadline (round_loop.c:
 * driver_wait); a zero timeout raises it at once: exactly one round. */
static int join_rounds(struct kb_run *run, long timeout_ms)
{
    run->join.timed = timeout_ms >= 0;
    if (run->join.timed)
        run->join.deadline = kb__deadline_after_ms(timeout_ms);
    ck_pr_store_int(&run->join.due, timeout_ms == 0);
    kb__wait_resume(run->wait, run->counters.handoffs); /* the time since the last kb_join is no handoff's */
    struct driver_pin pin;
    pin_driver(run, &pin);
    int rc;
    while ((rc = kb__sched_round(run)) == 0 && !(run->join.timed && kb__time_passed(&run->join.deadline)))
        ;
    run->join.timed = 0;
    if (rc == 0)
        kb__wait_pause(run->wait); /* the run waits for the next kb_join */
    unpin_driver(&pin);
    return rc;
}

/* The run of pc has ended with rc: keep its result and totals in pc and
 * free the run. */
static void join_finish(kb_process_context *pc, int rc, kb_spawn_error **err)
{
    struct kb_run *run = pc->run;
    if (rc != 1 && err)
        *err = kb__spawn_error_build(run);
    pc->result = rc; /* 1, or what kb__sched_round stopped the run with */
    kb__stats_fill(run, &pc->final);
    pc->run = NULL;
    kb__ctx_set_run(pc->ctx, NULL);
    kb__run_destroy(run);
}

int kb_join(kb_process_context *pc, long timeout_ms, kb_spawn_error **err)
{
    if (err)
        *err = NULL;
    if (!pc)
        return KB_EINVAL;
    int rc = check_driver_thread();
    if (rc != 0)
        return rc;
    kb_ctx *ctx = pc->ctx;
    if (kb__ctx_own(ctx) != 0)
        return KB_EBUSY;
    struct kb_run *run = pc->run;
    if (!run) { /* finished earlier: the same result again */
        kb__ctx_disown(ctx);
        return pc->result;
    }
    run->driver_tid = kb__sys_tid();
    rc = join_rounds(run, timeout_ms);
    if (rc == 0) { /* the deadline passed, ranks remain */
        if (run->opt.stats)
            kb__stats_fill(run, run->opt.stats);
    } else {
        join_finish(pc, rc, err);
        rc = pc->result;
    }
    kb__ctx_disown(ctx);
    return rc;
}

static _Noreturn void program_error(const char *what)
{
    fprintf(stderr, "kbthreads: %s; aborting\n", what);
    abort();
}

void kb_process_context_free(kb_process_context *pc)
{
    if (!pc)
        return;
    if (kb__self())
        program_error("kb_process_context_free() called from a rank");
    if (kb_in_hook())
        program_error("kb_process_context_free() called from an engine hook");
    kb_ctx *ctx = pc->ctx;
    if (kb__ctx_own(ctx) != 0)
        program_error("kb_process_context_free() called while another thread uses its ctx");
    struct kb_run *run = pc->run;
    if (run) {
        /* Live ranks: cancel them in rank order, abort, clear. A run whose
         * ranks all finished (or nprocs 0) needs none of that. */
        if (run->nlive > 0) {
            if (run->files.record)
                kb__record_end(run->files.record, "freed");
            kb__sched_cancel_all(run);
        }
        kb__ctx_set_run(ctx, NULL);
        kb__run_destroy(run);
    }
    ctx->pc = NULL;
    kb__ctx_disown(ctx);
    free(pc);
}

int kb_process_context_stats(kb_process_context *pc, kb_spawn_stats *stats)
{
    if (!pc || !stats)
        return KB_EINVAL;
    if (kb__ctx_own(pc->ctx) != 0)
        return KB_EBUSY;
    if (pc->run) {
        kb__stats_fill(pc->run, stats);
    } else {
        /* The totals kept when the run ended; the caller's per-rank arrays
         * stay as given (the run that filled them is gone). */
        uint64_t *turns = stats->rank_turns, *cpu = stats->rank_cpu_ns;
        size_t cap = stats->rank_cap;
        *stats = pc->final;
        stats->rank_turns = turns;
        stats->rank_cpu_ns = cpu;
        stats->rank_cap = cap;
    }
    kb__ctx_disown(pc->ctx);
    return 0;
}
