/* SPDX-License-Identifier: MIT */
/* A run's counters and turn accounting (stats.h). */
#include "alloc.h"
#include "clock.h"
#include "run.h"
#include "timeline.h"

int kb__counters_init(struct kb_run *run)
{
    run->counters.start_ns = kb__now_ns();
    if (!run->opt.stats || run->nprocs == 0)
        return 0;
    run->counters.rank_turns = kb__calloc((size_t)run->nprocs, sizeof *run->counters.rank_turns);
    run->counters.rank_cpu_ns = kb__calloc((size_t)run->nprocs, sizeof *run->counters.rank_cpu_ns);
    return run->counters.rank_turns && run->counters.rank_cpu_ns ? 0 : KB_ENOMEM;
}

void kb__turn_begin(struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    if (!run->opt.observe)
        return;
    rk->turn_start_ns = kb__now_ns();
    if (run->counters.rank_cpu_ns)
        rk->turn_cpu_ns = kb__thread_cpu_ns();
}

void kb__turn_end(struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    if (!run->opt.observe)
        return;
    if (run->counters.rank_cpu_ns)
        run->counters.rank_cpu_ns[rk->index] += kb__thread_cpu_ns() - rk->turn_cpu_ns;
    if (run->files.tl)
        kb__tl_slice(run, rk->index, KB_TL_TURN, rk->turn_start_ns, kb__now_ns(), 0,
                     (int64_t)run->counters.rounds);
}

void kb__stats_fill(const struct kb_run *run, kb_spawn_stats *st)
{
    st->rounds = run->counters.rounds;
    st->turns = run->counters.turns;
    st->handoffs = run->counters.handoffs;
    st->drains = run->counters.drains;
    st->engine_waits = run->counters.engine_waits;
    st->collectives = run->counters.collectives;
    st->wall_ns = kb__now_ns() - run->counters.start_ns;
    kb__wait_report(run->wait, st);
    for (size_t i = 0; i < st->rank_cap && i < (size_t)run->nprocs; i++) {
        if (st->rank_turns)
            st->rank_turns[i] = run->counters.rank_turns ? run->counters.rank_turns[i] : 0;
        if (st->rank_cpu_ns)
            st->rank_cpu_ns[i] = run->counters.rank_cpu_ns ? run->counters.rank_cpu_ns[i] : 0;
    }
}
