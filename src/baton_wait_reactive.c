/* SPDX-License-Identifier: MIT */
/*
 * The reactive wait policy (baton_wait_reactive.h).
 *
 * What it measures: the wall time per handoff over a window of rounds,
 * read on the holder at round boundaries (one vDSO clock read per window,
 * never one per handoff). Rank code and drains are in the figure; they
 * cost the same whatever the ranks wait in, so within one spawn the
 * figures of two modes differ by what their waiting costs.
 *
 * How it decides (the anchors: Karlin et al., SOSP 1991, adaptive beats
 * static; Lim and Agarwal, ASPLOS 1994, switch protocols by measured
 * cost; glibc's adaptive mutex, a moving average):
 *
 *   - It starts in the static choice (kb__wait_static_mode), which is
 *     what a spawn too short to measure keeps.
 *   - The mode in use (home) is measured over windows of at least
 *     WINDOW_HANDOFFS handoffs and one round; est[home] is their moving
 *     average (a quarter of each new window).
 *   - Now and then it tries another candidate for one window
 *     (PROBE_HANDOFFS), after a settling round (the ranks still waiting the
 *     old way wake as the old mode has them; the next round is clean). A
 *     try running ABORT_FACTOR times slower per handoff than home is
 *     judged at its next round boundary, so a bad mode costs little.
 *   - It switches only to a mode whose try measured more than HYSTERESIS
 *     faster than est[home], and only at a round boundary.
 *   - Tries begin only at the starts of slots of the monotonic clock, the
 *     same clock in every process, (nprocs + 1) * TRY_SLOT_PER_RANK_NS
 *     long (a function of the shape alone), in slots a period apart (a
 *     power of two, try_period). So two processes running simulations of
 *     one shape side by side try at once and measure the state both would
 *     be in (a try by one while the other kept the old mode measured that
 *     mixed state, lost, and left both in the mode slower for both).
 *   - Tries are rationed: the period makes a try at home's cost at most
 *     1/PROBE_SHARE of it, tries that ran longer skip periods until all
 *     of them took at most 1/PROBE_SHARE of the time (and a period), and
 *     a mode that lost waits BACKOFF_GROWTH times more slots before its
 *     next try (its square when it was cut short), up to about
 *     BACKOFF_MAX_NS. So a change of load is noticed within about
 *     BACKOFF_MAX_NS plus a period, and at the next window when home
 *     itself gets DEGRADE slower than when it was chosen (every mode is
 *     then tried again at the next period).
 *   - With more ranks than CPUs, looks after another mode start gathered
 *     on one CPU (rank_seat.c); a try of them that lost gathers on the
 *     next turn, and tries again in the next period for the first
 *     GATHER_TURNS_FREE turns.
 *
 * The order never depends on any of it: a mode only changes how a thread
 * waits for a post that the round's order decided.
 */
#include "baton_wait_reactive.h"

#include <string.h>

#include "baton_wait_policy.h"
#include "baton_wait_reactive_tuning.h"
#include "clock.h"
#include "rank_seat.h"
#include "run.h"

enum phase {
    PH_SETTLE, /* the round after rank_wait changed: not measured */
    PH_HOME,   /* a window of home */
    PH_PROBE   /* a window of another mode, being tried */
};

static void set_mode(struct kb_run *run, int mode)
{
    struct kb_wait_reactive *r = &run->reactive;
    int was = r->mode; /* -1 at the spawn's start */
    r->mode = mode;
    unsigned had_watch = run->rank_wait.watch;
    /* The plain modes: where the static choice's short spin before looking
     * pays (n = c, no drain between turns), the spin candidate shows it. */
    run->rank_wait = kb__wait_mode_budget(mode, r->nprocs, r->ncpu, 0);
    if (run->rank_wait.watch)
        r->nudged = 1;
    /* Every stretch of nudges starts seated (the spawn's start, a try, the
     * end of a try of another mode: unseated, a try of nudges measures a
     * placement that home would not have), and every stretch of another
     * mode after nudges, and of looks after another mode with more ranks
     * than CPUs, starts gathered on one CPU (seated ranks left half on a
     * CPU hog's CPU made the looks that followed 100x slower; two
     * simulations side by side looking ran at 1.1 us per operation each on
     * a CPU of its own, at 3-6 us mixed on both). A spawn's first looks
     * start where the kernel put the threads: gathered there, waits at 8
     * ranks on an idle machine measured 1.85 us against 1.65 us. */
    int gather_looks = mode == KB_WAIT_LOOK && was >= 0 && was != mode && r->nprocs > r->ncpu;
    if (run->rank_wait.watch && !had_watch)
        kb__seat_arm(run);
    else if (!(r->ablate & KB_ABLATE_GATHER) && !run->rank_wait.watch && (had_watch || gather_looks))
        kb__seat_gather(run, r->gather_turn);
}

/* The handoff count at which home's open window is whole. */
static uint64_t window_end(const struct kb_wait_reactive *r)
{
    return r->h0 + (r->bank_h < WINDOW_HANDOFFS ? WINDOW_HANDOFFS - r->bank_h : 1);
}

static void open_window(struct kb_run *run, enum phase ph, uint64_t now, uint64_t h)
{
    struct kb_wait_reactive *r = &run->reactive;
    r->d0 = run->counters.driver_drains;
    if (!r->t_start) {
        r->t_start = now ? now : 1;
        if (r->ablate & KB_ABLATE_SLOTS)
            r->origin = now;
    }
    r->phase = ph;
    r->t0 = now;
    r->h0 = h;
    /* A try is looked at every round (to cut it short); home once per
     * window, of which a part may be banked from before a pause. */
    r->next_check = ph == PH_PROBE || r->try_at ? h + 1 : window_end(r);
}

/* A round's worth of settling: the next round boundary opens a window. */
static void settle(struct kb_wait_reactive *r, uint64_t h)
{
    r->phase = PH_SETTLE;
    r->next_check = h + 1;
}

static uint64_t slot_ns(const struct kb_wait_reactive *r)
{
    return ((uint64_t)r->nprocs + 1) * TRY_SLOT_PER_RANK_NS;
}

static uint64_t slot_of(const struct kb_wait_reactive *r, uint64_t now)
{
    return (now - r->origin) / slot_ns(r);
}

static uint64_t slot_start(const struct kb_wait_reactive *r, uint64_t slot)
{
    return r->origin + slot * slot_ns(r);
}

/* Tries may begin only in slots that are multiples of this many: the
 * power of two that makes a try of home's cost (a settling round and a
 * window) at most 1/PROBE_SHARE of the period. Two processes of one shape
 * whose costs are within 2x of each other mostly get the same period, and
 * then the same slots. */
static uint64_t try_period(const struct kb_wait_reactive *r)
{
    uint64_t try_ns = ((uint64_t)r->nprocs + 1 + PROBE_HANDOFFS) * r->est[r->home] * PROBE_SHARE;
    uint64_t p = 1;
    while (p * slot_ns(r) < try_ns)
        p *= 2;
    return p;
}

/* The candidate to try in slot `slot`, beginning at `at`, or -1: the one
 * due longest ago (the candidates' order breaks ties), unless the tries
 * so far took more than 1/PROBE_SHARE of the time up to a period after
 * `at` (tries that ran longer than home's cost, which the period is
 * made for, skip periods to pay it back), and none beyond TRY_RANKS_MAX
 * ranks. */
static int due_probe(const struct kb_run *run, uint64_t at, uint64_t slot)
{
    const struct kb_wait_reactive *r = &run->reactive;
    uint64_t allowed = at - r->t_start + r->prior_ns + try_period(r) * slot_ns(r);
    if (((unsigned)r->nprocs > TRY_RANKS_MAX && !(r->ablate & KB_ABLATE_CUTOFF)) ||
        r->probe_ns * PROBE_SHARE > allowed)
        return -1;
    /* With as many ranks as CPUs a spinner holds the CPU a draining driver
     * needs: spin is tried only while rounds leave the driver out (it ran
     * no drain in home's last window). Its tries in loops that drain every
     * round lost (30-90 us per handoff) and left the looks that followed
     * in a slower placement: waits at 2 ranks, 1.4x forced look. */
    int spin_ok = r->nprocs < r->ncpu || r->driver_out || (r->ablate & KB_ABLATE_SPIN_RULE);
    int best = -1;
    for (int i = 0; i < r->ncand; i++) {
        int m = r->cand[i];
        if (m != r->home && r->next_probe[m] <= slot && (m != KB_WAIT_SPIN || spin_ok) &&
            (best < 0 || r->next_probe[m] < r->next_probe[best]))
            best = m;
    }
    return best;
}

/* Every mode may be tried again from slot `slot` on. */
static void retry_soon(struct kb_wait_reactive *r, uint64_t slot)
{
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        r->backoff[m] = 1;
        r->next_probe[m] = slot;
    }
}

/* Home's window is whole: fold it into est[home] and open the next. */
static void end_home_window(struct kb_run *run, uint64_t now, uint64_t h)
{
    struct kb_wait_reactive *r = &run->reactive;
    uint64_t per = (now - r->t0 + r->bank_ns) / (h - r->h0 + r->bank_h);
    r->bank_ns = r->bank_h = 0;
    r->driver_out = run->counters.driver_drains == r->d0;
    uint64_t *e = &r->est[r->home];
    *e = *e ? (3 * *e + per) / 4 : per;
    if (!r->est_at_choice || *e * DEGRADE_DEN < r->est_at_choice)
        r->est_at_choice = *e; /* first figure, or home got faster */
    else if (*e * DEGRADE_DEN > r->est_at_choice * DEGRADE_NUM && !(r->ablate & KB_ABLATE_DEGRADE)) {
        r->est_at_choice = *e; /* home got slower: the load changed, try the others again */
        retry_soon(r, slot_of(r, now));
    }
    open_window(run, PH_HOME, now, h);
}

/* A round boundary of home (its window whole, or a try waiting for its
 * slot): fold the window; then pick the slot of the next try, or begin
 * the try when its slot has come; else look again at the window's end,
 * or nearer the slot. */
static void home_boundary(struct kb_run *run, uint64_t now, uint64_t h)
{
    struct kb_wait_reactive *r = &run->reactive;
    if (h - r->h0 + r->bank_h >= WINDOW_HANDOFFS)
        end_home_window(run, now, h);
    r->next_check = window_end(r);
    if (r->try_at && now >= r->try_at + slot_ns(r))
        r->try_at = 0; /* its slot passed in a pause (a timed kb_join returned): the next one */
    if (!r->try_at) {
        /* (The first try of a shape takes the next slot: learning starts
         * as soon as home has a figure.) */
        uint64_t p = r->probe_ns ? try_period(r) : 1, next = (slot_of(r, now) / p + 1) * p;
        if (due_probe(run, slot_start(r, next), next) < 0)
            return;
        r->try_at = slot_start(r, next);
    }
    if (now < r->try_at) {
        /* Every round once the slot is within a window of home's (so the
         * try begins within a round of it), else halfway there. */
        uint64_t per = r->est[r->home] ? r->est[r->home] : 1;
        uint64_t left = (r->try_at - now) / per;
        uint64_t at = left < WINDOW_HANDOFFS ? h + 1 : h + left / 2;
        if (at < r->next_check)
            r->next_check = at;
        return;
    }
    r->try_at = 0;
    int m = due_probe(run, now, slot_of(r, now));
    if (m < 0)
        return; /* (spin, the one candidate, waits for a window without drains) */
    /* A partial window of home is dropped: the try's rounds are not home's. */
    r->bank_ns = r->bank_h = 0;
    r->probes++;
    r->probe_t0 = now;
    set_mode(run, m);
    settle(r, h);
}

/* One round of a try has ended: go on, or judge it. */
static void probe_round(struct kb_run *run, uint64_t now, uint64_t h)
{
    struct kb_wait_reactive *r = &run->reactive;
    uint64_t dh = h - r->h0, dt = now - r->t0;
    uint64_t home_ns = r->est[r->home];
    int losing = dh >= MIN_JUDGE_HANDOFFS && dt > (uint64_t)ABORT_FACTOR * dh * home_ns &&
                 !(r->ablate & KB_ABLATE_EARLY);
    if (dh < PROBE_HANDOFFS && !losing)
        return; /* looked at again next round */
    uint64_t per = dt / dh;
    int m = r->mode;
    r->est[m] = per; /* a fresh figure: an older one may be from another load */
    r->probe_ns += now - r->probe_t0;
    if (per * HYSTERESIS_DEN < home_ns * HYSTERESIS_NUM) {
        r->home = m;
        r->switches++;
        r->est_at_choice = per;
        retry_soon(r, slot_of(r, now) + BACKOFF_GROWTH);
    } else {
        /* A try cut short (twice home's cost or worse) backs off twice as
         * many steps: such a mode is rarely close. */
        uint64_t most = BACKOFF_MAX_NS / slot_ns(r) ? BACKOFF_MAX_NS / slot_ns(r) : 1;
        uint64_t b = (uint64_t)r->backoff[m] * BACKOFF_GROWTH * (losing ? BACKOFF_GROWTH : 1);
        /* A gathered look that lost may have shared its CPU with another
         * process gathered there too: the next gathering takes the next
         * turn (rank_seat.c), and the first GATHER_TURNS_FREE turns are
         * tried at the next slot, where such a process tries again too. */
        if (m == KB_WAIT_LOOK && r->nprocs > r->ncpu && !(r->ablate & KB_ABLATE_GATHER) &&
            ++r->gather_turn <= GATHER_TURNS_FREE)
            b = r->backoff[m];
        if (r->ablate & KB_ABLATE_BACKOFF)
            b = 1;
        r->backoff[m] = (unsigned)(b > most ? most : b);
        r->next_probe[m] = slot_of(r, now) + r->backoff[m];
        set_mode(run, r->home);
    }
    /* The settling round after a try still wakes ranks that waited the
     * tried way: it is the try's cost, and counts against the share. */
    r->probe_t0 = now;
    r->after_probe = 1;
    settle(r, h);
}

void kb__wait_reactive_tick(struct kb_run *run)
{
    kb__wait_reactive_step(run, run->reactive.cycle ? 0 : kb__now_ns());
}

void kb__wait_reactive_step(struct kb_run *run, uint64_t now)
{
    struct kb_wait_reactive *r = &run->reactive;
    uint64_t h = run->counters.handoffs;
    if (r->cycle) {
        int i = 0;
        while (i < r->ncand && r->cand[i] != r->mode)
            i++;
        r->home = r->cand[(i + 1) % r->ncand]; /* each mode is home for its round */
        set_mode(run, r->home);
        r->switches++;
        r->next_check = h + 1;
        return;
    }
    r->t_last = now;
    switch (r->phase) {
    case PH_SETTLE:
        if (r->after_probe) {
            r->probe_ns += now - r->probe_t0;
            r->after_probe = 0;
        }
        open_window(run, r->mode == r->home ? PH_HOME : PH_PROBE, now, h);
        break;
    case PH_HOME:
        home_boundary(run, now, h);
        break;
    default:
        probe_round(run, now, h);
        break;
    }
}

/* The index of mem's record of this shape, or -1. */
static int shape_index(const struct kb_wait_memory *mem, int nprocs, int ncpu)
{
    for (int i = 0; mem && nprocs > 0 && i < KB_WAIT_MEMORY_SHAPES; i++)
        if (mem->shape[i].nprocs == nprocs && mem->shape[i].ncpu == ncpu)
            return i;
    return -1;
}

static int is_candidate(const struct kb_wait_reactive *r, int m)
{
    for (int i = 0; i < r->ncand; i++)
        if (r->cand[i] == m)
            return 1;
    return 0;
}

/* Go on from what the last spawn of this shape learnt: its mode, its
 * estimates (the mode's own is what a slowdown is judged against), its
 * back-offs, and the time share (so a ctx spawning again and again does
 * not try every mode again in every spawn). */
static void resume(struct kb_wait_reactive *r, const struct kb_wait_shape *sh)
{
    r->resumed = 1;
    r->home = sh->home;
    memcpy(r->est, sh->est, sizeof r->est);
    memcpy(r->next_probe, sh->due, sizeof r->next_probe);
    for (int m = 0; m < KB_WAIT_MODES; m++)
        r->backoff[m] = sh->backoff[m] ? sh->backoff[m] : 1;
    r->est_at_choice = sh->est_at_choice;
    r->gather_turn = sh->gather_turn;
    r->prior_ns = sh->elapsed_ns;
    r->probe_ns = sh->probe_ns;
}

void kb__wait_reactive_start(struct kb_run *run, int nprocs, int ncpu, int home, const int *cand, int ncand,
                             int cycle, const struct kb_wait_memory *mem)
{
    struct kb_wait_reactive *r = &run->reactive;
    memset(r, 0, sizeof *r);
    r->active = 1;
    r->nprocs = nprocs;
    r->ncpu = ncpu;
    r->cycle = cycle;
    r->ncand = ncand;
    memcpy(r->cand, cand, (size_t)ncand * sizeof *cand);
    r->home = home;
    retry_soon(r, 0);
    int i = cycle ? -1 : shape_index(mem, nprocs, ncpu);
    if (i >= 0 && is_candidate(r, mem->shape[i].home) && mem->shape[i].est[mem->shape[i].home])
        resume(r, &mem->shape[i]);
    r->mode = -1;
    set_mode(run, r->home);
    /* The first round starts the threads (their first waits are the
     * worker's, not the mode's): settle through it. */
    settle(r, 0);
}

void kb__wait_reactive_save(const struct kb_run *run, struct kb_wait_memory *mem)
{
    const struct kb_wait_reactive *r = &run->reactive;
    if (!mem || !r->active || r->cycle || !r->est[r->home])
        return;
    int i = shape_index(mem, r->nprocs, r->ncpu);
    if (i < 0) /* a new shape: an empty record, else the least recently used */
        for (int j = i = 0; j < KB_WAIT_MEMORY_SHAPES; j++)
            if (mem->shape[j].used < mem->shape[i].used)
                i = j;
    struct kb_wait_shape *sh = &mem->shape[i];
    sh->nprocs = r->nprocs;
    sh->ncpu = r->ncpu;
    sh->used = ++mem->uses;
    sh->home = r->home;
    memcpy(sh->est, r->est, sizeof sh->est);
    /* (A try the run ended in gave no figure: it was due, and is.) */
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        sh->backoff[m] = r->backoff[m];
        sh->due[m] = r->next_probe[m];
    }
    sh->est_at_choice = r->est_at_choice;
    sh->gather_turn = r->gather_turn;
    uint64_t in_try = r->mode != r->home || r->after_probe ? r->t_last - r->probe_t0 : 0;
    sh->elapsed_ns = r->prior_ns + (r->t_start ? r->t_last - r->t_start : 0);
    sh->probe_ns = r->probe_ns + in_try;
}

void kb__wait_reactive_pause(struct kb_run *run)
{
    if (run->reactive.active && !run->reactive.cycle)
        kb__wait_reactive_pause_at(run, kb__now_ns());
}

void kb__wait_reactive_pause_at(struct kb_run *run, uint64_t now)
{
    struct kb_wait_reactive *r = &run->reactive;
    if (!r->active || r->cycle)
        return;
    uint64_t h = run->counters.handoffs;
    r->t_last = now;
    if (r->phase == PH_HOME && h > r->h0 && !(r->ablate & KB_ABLATE_BANK)) {
        r->bank_ns += now - r->t0;
        r->bank_h += h - r->h0;
        r->h0 = h; /* banked: a second pause before the restart adds nothing */
        r->t0 = now;
    }
}

void kb__wait_reactive_restart(struct kb_run *run)
{
    struct kb_wait_reactive *r = &run->reactive;
    if (!r->active || r->cycle)
        return;
    /* A try (or its settling round) cut off by the pause: no figure; its
     * time up to the pause is the tries'. */
    if (r->mode != r->home || r->after_probe)
        r->probe_ns += r->t_last - r->probe_t0;
    r->after_probe = 0;
    if (r->mode != r->home)
        set_mode(run, r->home);
    settle(r, run->counters.handoffs);
}

void kb__wait_reactive_fill(const struct kb_run *run, struct kb_spawn_stats *st)
{
    const struct kb_wait_reactive *r = &run->reactive;
    st->wait_reactive = r->active && !r->cycle;
    st->wait_switches = r->switches;
    st->wait_probes = r->probes;
    for (int m = 0; m < KB_WAIT_MODES; m++)
        st->wait_ns[m] = r->active ? r->est[m] : 0;
    if (r->active) {
        st->wait_mode = r->home;
        return;
    }
    /* A fixed choice: the mode its budget is. */
    const struct kb_wait_budget *b = &run->rank_wait;
    st->wait_mode = b->spin_ns && !b->look_ns ? KB_WAIT_SPIN
                    : b->watch                ? KB_WAIT_NUDGE
                    : b->look_ns              ? KB_WAIT_LOOK
                                              : KB_WAIT_SLEEP;
}
