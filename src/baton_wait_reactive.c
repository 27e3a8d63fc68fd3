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
 *   - Tries are rationed: all of them together take at most 1/PROBE_SHARE
 *     of the spawn's time so far (plus one try), and a mode that lost
 *     waits BACKOFF_GROWTH times longer before its next try (its square
 *     when it was cut short), up to BACKOFF_MAX windows. So a change of
 *     load is noticed within BACKOFF_MAX windows of home, and at the next
 *     window when home itself gets DEGRADE slower than when it was chosen
 *     (every mode is then tried again soon).
 *
 * The order never depends on any of it: a mode only changes how a thread
 * waits for a post that the round's order decided.
 */
#include "baton_wait_reactive.h"

#include <string.h>

#include "baton_wait_policy.h"
#include "clock.h"
#include "rank_seat.h"
#include "run.h"

#define WINDOW_HANDOFFS 256u
/* A try is as long as a window: some modes (unpinned nudges) settle into
 * a fast or a slow pattern of CPU placement over hundreds of handoffs, and
 * 64-handoff tries measured them in neither. */
#define PROBE_HANDOFFS 256u
/* Tries take at most 1/32 of the spawn's time, plus one (the measuring
 * is to cost at most a few percent). */
#define PROBE_SHARE 32u
/* A try running this many times slower per handoff than home is judged
 * at once, once it has MIN_JUDGE_HANDOFFS handoffs and a whole round. */
#define ABORT_FACTOR       2u
#define MIN_JUDGE_HANDOFFS 8u
/* A try must beat home by more than 1/8 (noise between windows of one
 * process is of that order on the machines measured). */
#define HYSTERESIS_NUM 7u
#define HYSTERESIS_DEN 8u
/* est[home] grown by half since it was chosen: the load changed. */
#define DEGRADE_NUM 3u
#define DEGRADE_DEN 2u
/* No mode is tried where a round has more handoffs than a try (more
 * than PROBE_HANDOFFS - 1 ranks): a try then lasts at least a round, and
 * at 512 ranks on 2 CPUs a single round of looking or of sleeping was
 * measured to leave nudges 4-8x slower for the rest of the process,
 * seated or not. Such spawns keep the static choice. (A bound on a
 * round's time instead kept 64 ranks beside another simulation, whose
 * rounds are long because the machine is busy, from ever leaving nudges.) */
#define TRY_RANKS_MAX  (PROBE_HANDOFFS - 1u)
#define BACKOFF_GROWTH 4u
#define BACKOFF_MAX    1024u

enum phase {
    PH_SETTLE, /* the round after rank_wait changed: not measured */
    PH_HOME,   /* a window of home */
    PH_PROBE   /* a window of another mode, being tried */
};

static void set_mode(struct kb_run *run, int mode)
{
    struct kb_wait_reactive *r = &run->reactive;
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
     * mode after nudges starts gathered on one CPU (seated ranks left half
     * on a CPU hog's CPU made the looks that followed 100x slower). */
    if (run->rank_wait.watch && !had_watch)
        kb__seat_arm(run);
    else if (!run->rank_wait.watch && had_watch)
        kb__seat_gather(run);
}

static void open_window(struct kb_run *run, enum phase ph, uint64_t now, uint64_t h)
{
    struct kb_wait_reactive *r = &run->reactive;
    r->d0 = run->counters.driver_drains;
    if (!r->t_start)
        r->t_start = now ? now : 1;
    r->phase = ph;
    r->t0 = now;
    r->h0 = h;
    /* A try is looked at every round (to cut it short); home once per
     * window, of which a part may be banked from before a pause. */
    r->next_check =
        ph == PH_PROBE ? h + 1 : h + (r->bank_h < WINDOW_HANDOFFS ? WINDOW_HANDOFFS - r->bank_h : 1);
}

/* A round's worth of settling: the next round boundary opens a window. */
static void settle(struct kb_wait_reactive *r, uint64_t h)
{
    r->phase = PH_SETTLE;
    r->next_check = h + 1;
}

/* The candidate to try now, or -1: the one due longest ago (the
 * candidates' order breaks ties), if the tries so far and this one's two
 * rounds (the settling one and at least one measured), at home's cost, are
 * within their share of the time. So tries take at most 1/PROBE_SHARE of
 * the time, plus what one try exceeds two rounds of home by; with many
 * ranks, where a round is long, the first comes later, and there is none
 * beyond TRY_RANKS_MAX ranks. */
static int due_probe(const struct kb_run *run, uint64_t now, uint64_t h)
{
    const struct kb_wait_reactive *r = &run->reactive;
    uint64_t round = ((uint64_t)run->nlive + 1) * r->est[r->home];
    if ((unsigned)r->nprocs > TRY_RANKS_MAX ||
        (r->probe_ns + 2 * round) * PROBE_SHARE > now - r->t_start + r->prior_ns)
        return -1;
    /* With as many ranks as CPUs a spinner holds the CPU a draining driver
     * needs: spin is tried only while rounds leave the driver out (it ran
     * no drain in home's last window). Its tries in loops that drain every
     * round lost (30-90 us per handoff) and left the looks that followed
     * in a slower placement: waits at 2 ranks, 1.4x forced look. */
    int spin_ok = r->nprocs < r->ncpu || run->counters.driver_drains == r->d0;
    int best = -1;
    for (int i = 0; i < r->ncand; i++) {
        int m = r->cand[i];
        if (m != r->home && r->next_probe[m] <= h && (m != KB_WAIT_SPIN || spin_ok) &&
            (best < 0 || r->next_probe[m] < r->next_probe[best]))
            best = m;
    }
    return best;
}

static void retry_soon(struct kb_wait_reactive *r, uint64_t h)
{
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        r->backoff[m] = 1;
        r->next_probe[m] = h;
    }
}

static void end_home_window(struct kb_run *run, uint64_t now, uint64_t h)
{
    struct kb_wait_reactive *r = &run->reactive;
    uint64_t per = (now - r->t0 + r->bank_ns) / (h - r->h0 + r->bank_h);
    r->bank_ns = r->bank_h = 0;
    uint64_t *e = &r->est[r->home];
    *e = *e ? (3 * *e + per) / 4 : per;
    if (!r->est_at_choice || *e * DEGRADE_DEN < r->est_at_choice)
        r->est_at_choice = *e; /* first figure, or home got faster */
    else if (*e * DEGRADE_DEN > r->est_at_choice * DEGRADE_NUM) {
        r->est_at_choice = *e; /* home got slower: the load changed, try the others again */
        retry_soon(r, h);
    }
    int m = due_probe(run, now, h);
    if (m < 0) {
        open_window(run, PH_HOME, now, h);
        return;
    }
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
    int losing = dh >= MIN_JUDGE_HANDOFFS && dt > (uint64_t)ABORT_FACTOR * dh * home_ns;
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
        retry_soon(r, h + (uint64_t)BACKOFF_GROWTH * WINDOW_HANDOFFS);
    } else {
        /* A try cut short (twice home's cost or worse) backs off twice as
         * many steps: such a mode is rarely close. */
        unsigned b = r->backoff[m] * BACKOFF_GROWTH * (losing ? BACKOFF_GROWTH : 1);
        r->backoff[m] = b > BACKOFF_MAX ? BACKOFF_MAX : b;
        r->next_probe[m] = h + (uint64_t)r->backoff[m] * WINDOW_HANDOFFS;
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
        end_home_window(run, now, h);
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
    uint64_t h = run->counters.handoffs;
    sh->nprocs = r->nprocs;
    sh->ncpu = r->ncpu;
    sh->used = ++mem->uses;
    sh->home = r->home;
    memcpy(sh->est, r->est, sizeof sh->est);
    for (int m = 0; m < KB_WAIT_MODES; m++) {
        sh->backoff[m] = r->backoff[m];
        /* (A try the run ended in gave no figure: it was due, and is.) */
        sh->due[m] = r->next_probe[m] > h ? r->next_probe[m] - h : 0;
    }
    sh->est_at_choice = r->est_at_choice;
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
    if (r->phase == PH_HOME && h > r->h0) {
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
