/* SPDX-License-Identifier: MIT */
/*
 * The wait policy (wait_policy.h; docs/design.md, "the wait policy"; Karlin
 * et al., SOSP 1991, and Lim and Agarwal, ASPLOS 1994: adapt by measured
 * cost). What each part buys: docs/benchmarks-history.md (the ablation) and
 * docs/benchmarks.md. Every field is the holder's: a change of mode is
 * ordered with the handoffs.
 */
#include "wait_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "kbthreads.h"
#include "system.h"
#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND 0
#endif

/* Up to this many ranks per CPU a round comes back within a look; nudges beyond. */
#define LOOK_RANKS_PER_CPU 4
/* KB_AFFINITY_ONE_CPU: beyond this many ranks parked looks measured slower than sleeping. */
#define PINNED_LOOK_RANKS_MAX 512
/* Looks with as many ranks as CPUs, rounds leaving the driver out, spin this long first. */
#define SHORT_SPIN_NS 2000u
/* Handoffs per window and per try: unpinned nudges settle into a placement over hundreds. */
#define WINDOW 256u
/* Tries take at most 1/TRY_SHARE of the time; a mode that lost waits at most TRY_SHARE periods. */
#define TRY_SHARE 32u
/* A try must beat home by more than 1/MARGIN: windows of one process differ by about that. */
#define MARGIN 8u
/* Home's figure moves 1/SMOOTH of the way to each window's: one slow window is no change of load. */
#define SMOOTH 4u
/* A mode that lost waits BACKOFF times longer for its next try. */
#define BACKOFF 4u
/* A try is judged far slower only after this many handoffs: its first ones pay the moves to seats. */
#define FAR_AFTER 16u
/* Tries begin at slots of the clock (nprocs + 1) * this long: side by side, two spawns try at once. */
#define SLOT_NS_PER_RANK (1ull << 19)

/* What adapting learns; a ctx keeps it for its next spawn of the shape. */
struct kb_wait_memory {
    int nprocs, ncpu, home, turn;    /* the shape; the mode chosen; the gathering's turn */
    uint64_t est[KB_WAIT_MODES];     /* ns per handoff; 0 = not measured */
    uint64_t due[KB_WAIT_MODES];     /* the time from which the mode may be tried */
    unsigned backoff[KB_WAIT_MODES]; /* periods before a mode that lost is tried again */
    uint64_t try_ns, elapsed_ns;     /* time in tries, and measured, by earlier spawns too */
};

struct kb_wait_policy {
    struct kb_wait_budget rank; /* how a suspended rank waits now */
    unsigned park_ns;
    int nprocs, ncpu, mode; /* mode: the kb_wait_mode `rank` is (-1 before the first) */
    int short_spin;         /* as many ranks as CPUs, auto or static: looks may spin first */
    uint64_t (*clock)(void);
    struct kb_wait_memory **memory;
    int adaptive, cycle;                              /* both 0: `rank` is fixed */
    struct kb_wait_memory l;                          /* mode differs from l.home while another is tried */
    int ncand, cand[KB_WAIT_MODES], phase, after_try; /* after_try: settling after a try */
    uint64_t next_check; /* the handoff count at which a round boundary next looks */
    /* the starts of the open window, the first one and the try (with its settling
     * round), the last clock reading, and the slot a due try waits for (0: none) */
    uint64_t t0, h0, t_start, try_t0, t_last, try_at, switches;
    /* Seating: CPUs by parity (-1: none) or one for all (-1: by parity); a rank
     * whose rank_epoch is not epoch moves at its next suspension. */
    int seat_cpu[2], gather_cpu;
    unsigned epoch, *rank_epoch;
};

static const char *const mode_names[KB_WAIT_MODES] = {"sleep", "look", "nudge", "spin"};

const char *kb_wait_mode_name(int mode)
{
    return mode >= 0 && mode < KB_WAIT_MODES ? mode_names[mode] : "unknown";
}

/* A mode's budget (unpinned, a nudged rank may share the holder's CPU: it yields). */
static struct kb_wait_budget budget_of(int mode, int ncpu)
{
    return (struct kb_wait_budget){
        .spin_ns = mode == KB_WAIT_SPIN ? KB_WAIT_LOOK_NS : 0,
        .look_ns = mode == KB_WAIT_LOOK ? KB_WAIT_LOOK_NS : 0,
        .watch = mode == KB_WAIT_NUDGE && ncpu >= 2 ? KB_WAIT_LOOK_NS | KB_WATCH_YIELD : 0};
}

/* The choice from the counts (docs/design.md has why). */
static int static_mode(int nprocs, int ncpu)
{
    return ncpu < 2 || nprocs <= LOOK_RANKS_PER_CPU * ncpu ? KB_WAIT_LOOK : KB_WAIT_NUDGE;
}

/* The modes tried, likelier winners first: spin where every rank can have a CPU;
 * nudges (with 2 CPUs) and sleep (it lost elsewhere) where ranks outnumber CPUs. */
static int candidates(int nprocs, int ncpu, int *cand)
{
    int n = 0;
    cand[n++] = KB_WAIT_LOOK;
    if (ncpu >= 2 && nprocs <= ncpu)
        cand[n++] = KB_WAIT_SPIN;
    if (ncpu >= 2 && nprocs > ncpu)
        cand[n++] = KB_WAIT_NUDGE;
    if (nprocs > ncpu)
        cand[n++] = KB_WAIT_SLEEP;
    return n;
}

/* The CPUs counted: KB_TEST_CPUS=n (tests), else the thread's mask, else the online ones. */
static int usable_cpus(void)
{
    const char *v = getenv("KB_TEST_CPUS");
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : 0;
    if (n >= 1 && n <= 65536 && *end == '\0')
        return (int)n;
    struct kb_cpumask mask;
    n = kb__sys_get_affinity(&mask) == 0 ? kb__sys_mask_count(&mask) : 0;
    n = n > 0 ? n : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

enum { POLICY_AUTO, POLICY_STATIC, POLICY_CYCLE, POLICY_FIXED };

/* KB_WAIT_POLICY: "auto" (or unset), "static", "cycle" or a mode (*mode); else a warning. */
static int policy_from_env(int *mode)
{
    static const char *const names[POLICY_FIXED] = {"auto", "static", "cycle"};
    const char *v = getenv("KB_WAIT_POLICY");
    for (int i = 0; v && *v && i < POLICY_FIXED + KB_WAIT_MODES; i++)
        if (strcmp(v, i < POLICY_FIXED ? names[i] : mode_names[i - POLICY_FIXED]) == 0) {
            *mode = i - POLICY_FIXED;
            return i < POLICY_FIXED ? i : POLICY_FIXED;
        }
    if (v && *v)
        fprintf(stderr, "kbthreads: ignoring KB_WAIT_POLICY=%s (not auto, static, cycle or a mode)\n", v);
    return POLICY_AUTO;
}

/* Seating (docs/design.md): odd ranks on the driver's CPU, even ones on the next. */
static void seat_resolve(struct kb_wait_policy *p)
{
    struct kb_cpumask mask;
    int n = kb__sys_get_affinity(&mask) == 0 ? kb__sys_mask_count(&mask) : 0;
    if (n < 2)
        return;
    int cpus[CPU_SETSIZE];
    n = kb__sys_mask_cpus(&mask, cpus, n);
    int here = kb__sys_current_cpu(), i = 0;
    while (i < n && cpus[i] != here)
        i++;
    i = i < n ? i : 0;
    p->seat_cpu[0] = cpus[(i + 1) % n];
    p->seat_cpu[1] = cpus[i];
}

static void set_mode(struct kb_wait_policy *p, int mode)
{
    int was = p->mode, had_watch = p->rank.watch != 0;
    p->rank = budget_of(mode, p->ncpu);
    p->mode = mode == KB_WAIT_NUDGE && !p->rank.watch ? KB_WAIT_SLEEP : mode; /* one CPU: no watch */
    /* Nudges start seated (the woken rank lands on the CPU its waker leaves);
     * looks after nudges, or after another mode with more ranks than CPUs,
     * gathered (left half on a hog's CPU, looks are far slower: docs/benchmarks-history.md):
     * turn 0 on the driver's CPU, turn k by bit k - 1 of the pid, so that two
     * processes gathered on one CPU part where their pids differ. */
    unsigned t = (unsigned)p->l.turn, other = t ? ((unsigned)getpid() >> ((t - 1) % 16)) & 1u : 0u;
    int gather = !p->rank.watch &&
                 (had_watch || (mode == KB_WAIT_LOOK && was >= 0 && was != mode && p->nprocs > p->ncpu));
    /* Spins start seated too: a spinner left by looks on the CPU the holder needs costs its whole spin. */
    int seat = (p->rank.watch && !had_watch) || (mode == KB_WAIT_SPIN && was != mode);
    if (p->seat_cpu[0] >= 0 && (gather || seat)) {
        p->gather_cpu = gather ? p->seat_cpu[1 ^ other] : -1; /* -1: by parity */
        p->epoch++;                                           /* every rank moves at its next suspension */
    }
}

enum phase { SETTLE, HOME, TRY };

/* A round of settling (ranks waiting the old way wake the old way), then a window. */
static void settle(struct kb_wait_policy *p, uint64_t h)
{
    p->phase = SETTLE;
    p->next_check = h + 1;
}

static void open_window(struct kb_wait_policy *p, uint64_t now, uint64_t h)
{
    if (!p->t_start)
        p->t_start = now;
    p->phase = p->mode == p->l.home ? HOME : TRY;
    p->t0 = now;
    p->h0 = h;
    p->next_check = p->phase == TRY ? h + 1 : h + WINDOW; /* a try is looked at every round */
}

/* The mode to try now, or -1: the one due longest ago, unless tries had their share. */
static int due_try(const struct kb_wait_policy *p, uint64_t now)
{
    if (p->l.try_ns * TRY_SHARE > now - p->t_start + p->l.elapsed_ns)
        return -1;
    int best = -1;
    for (int i = 0; i < p->ncand; i++) {
        int m = p->cand[i];
        if (m != p->l.home && p->l.due[m] <= now && (best < 0 || p->l.due[m] < p->l.due[best]))
            best = m;
    }
    return best;
}

/* Home's round: a whole window updates its figure; a due try waits for a slot's start. */
static void home_round(struct kb_wait_policy *p, uint64_t now, uint64_t h)
{
    uint64_t slot = ((uint64_t)p->nprocs + 1) * SLOT_NS_PER_RANK;
    if (h - p->h0 >= WINDOW) {
        uint64_t w = (now - p->t0) / (h - p->h0), *e = &p->l.est[p->l.home];
        *e = *e ? (*e * (SMOOTH - 1) + w) / SMOOTH : w;
        for (int k = 0; k < KB_WAIT_MODES; k++) /* home got slower than a mode measured: try it now */
            p->l.due[k] = p->l.est[k] && p->l.est[k] * MARGIN < *e * (MARGIN - 1) ? 0 : p->l.due[k];
        p->t0 = now;
        p->h0 = h;
    }
    if (!p->try_at && p->l.est[p->l.home] && due_try(p, now) >= 0)
        p->try_at = (now / slot + 1) * slot;
    int m = p->try_at && now >= p->try_at ? due_try(p, now) : -1;
    if (p->try_at && now >= p->try_at)
        p->try_at = 0;
    if (m < 0) {
        p->next_check = p->try_at ? h + 1 : p->h0 + WINDOW;
        return;
    }
    p->try_t0 = now;
    set_mode(p, m);
    settle(p, h);
}

static void try_round(struct kb_wait_policy *p, uint64_t now, uint64_t h)
{
    int m = p->mode;
    uint64_t dt = now - p->t0, dh = h - p->h0, home = p->l.est[p->l.home];
    int far = dh >= FAR_AFTER && dt > BACKOFF * dh * home; /* BACKOFF times slower: cut, wait longer */
    uint64_t grow = far ? BACKOFF * BACKOFF : BACKOFF;
    /* A try ends with its window, once far worse, or once it took a window of home's time. */
    if (dh < WINDOW && !far && dt <= WINDOW * home) {
        p->next_check = h + 1;
        return;
    }
    p->l.est[m] = dt / dh; /* fresh: an older figure may be from another load */
    int lost = p->l.est[m] * MARGIN >= p->l.est[p->l.home] * (MARGIN - 1);
    if (!lost) {
        p->l.home = m;
        p->switches++;
        for (int k = 0; k < KB_WAIT_MODES; k++) { /* the others may now be faster: soon again */
            p->l.backoff[k] = 1;
            p->l.due[k] = now;
        }
    } else {
        /* A period: the time in which a try at home's cost is its share. */
        uint64_t period = ((uint64_t)p->nprocs + WINDOW) * p->l.est[p->l.home] * TRY_SHARE;
        /* gathered looks take the next turn; the first BACKOFF turns do not back off */
        if (m == KB_WAIT_LOOK && p->nprocs > p->ncpu && ++p->l.turn <= (int)BACKOFF)
            grow = 1;
        p->l.backoff[m] = p->l.backoff[m] * grow < TRY_SHARE ? p->l.backoff[m] * grow : TRY_SHARE;
        p->l.due[m] = now + p->l.backoff[m] * period;
        set_mode(p, p->l.home);
    }
    p->after_try = lost; /* a try that won was home's time well spent: not the tries' share */
    settle(p, h);
}

static void adapt_start(struct kb_wait_policy *p, int home, int cycle)
{
    const struct kb_wait_memory *m = p->memory && !cycle ? *p->memory : NULL;
    p->adaptive = !cycle;
    p->cycle = cycle;
    p->l.home = home;
    for (int k = 0; k < KB_WAIT_MODES; k++)
        p->l.backoff[k] = 1;
    for (int i = 0; m && m->nprocs == p->nprocs && m->ncpu == p->ncpu && i < p->ncand; i++)
        if (p->cand[i] == m->home)
            p->l = *m;
    set_mode(p, p->l.home);
    settle(p, 0); /* the first round starts the threads: their first waits are not the mode's */
}

static void adapt_save(const struct kb_wait_policy *p)
{
    if (!p->adaptive || !p->memory || !p->l.est[p->l.home])
        return;
    struct kb_wait_memory *m = *p->memory ? *p->memory : kb__calloc(1, sizeof *m);
    if (!m)
        return; /* the next spawn learns again */
    *m = p->l;
    m->nprocs = p->nprocs;
    m->ncpu = p->ncpu;
    m->elapsed_ns += p->t_start ? p->t_last - p->t_start : 0;
    *p->memory = m;
}

void kb__wait_round(struct kb_wait_policy *p, uint64_t h, int driver)
{
    /* A turn often comes back within 2 us, and two ranks the kernel left on
     * one CPU then lose 2 us, not a time slice; while the driver drains
     * between rounds the spinners would keep it off the CPUs. */
    if (p->short_spin && p->mode == KB_WAIT_LOOK)
        p->rank.spin_ns = driver ? 0 : SHORT_SPIN_NS;
    if (h < p->next_check || !(p->adaptive || p->cycle))
        return;
    if (p->cycle) {
        int i = 0;
        while (i < p->ncand && p->cand[i] != p->l.home) /* (mode: nudge is a sleep on one CPU) */
            i++;
        p->l.home = p->cand[(i + 1) % p->ncand];
        set_mode(p, p->l.home);
        p->switches++;
        p->next_check = h + 1;
        return;
    }
    uint64_t now = p->t_last = p->clock();
    if (p->phase == SETTLE) {
        if (p->after_try) /* the settling round after a try is the try's time */
            p->l.try_ns += now - p->try_t0;
        p->after_try = 0;
        open_window(p, now, h);
    } else if (p->phase == HOME) {
        home_round(p, now, h);
    } else {
        try_round(p, now, h);
    }
}

void kb__wait_pause(struct kb_wait_policy *p)
{
    p->t_last = p->adaptive ? p->clock() : 0;
}

/* Home's window goes on without the pause (slices beside a hog must still fill
 * windows); a try cut off gives no figure, only its time up to the pause. */
void kb__wait_resume(struct kb_wait_policy *p, uint64_t h)
{
    if (!p->adaptive || !p->t_last)
        return;
    if (p->phase == HOME) {
        p->t0 += p->clock() - p->t_last;
        return;
    }
    if (p->mode != p->l.home || p->after_try)
        p->l.try_ns += p->t_last - p->try_t0;
    p->after_try = 0;
    if (p->mode != p->l.home)
        set_mode(p, p->l.home);
    settle(p, h);
}

/* The choices of the default affinity. */
static void default_affinity(struct kb_wait_policy *p, int valgrind)
{
    int forced = KB_WAIT_SLEEP, pol = policy_from_env(&forced);
    p->park_ns = valgrind ? 0 : KB_WAIT_LOOK_NS;
    p->short_spin =
        !valgrind && (pol == POLICY_AUTO || pol == POLICY_STATIC) && p->ncpu >= 2 && p->nprocs == p->ncpu;
    seat_resolve(p);
    if (pol == POLICY_CYCLE) { /* every mode, Valgrind included: the order never depends on it */
        for (int m = 0; m < KB_WAIT_MODES; m++)
            p->cand[p->ncand++] = m;
        adapt_start(p, KB_WAIT_SLEEP, 1);
    } else if (valgrind) {
        p->mode = KB_WAIT_SLEEP; /* one thread runs at a time: every look is wasted */
    } else if (pol == POLICY_FIXED) {
        set_mode(p, forced);
    } else if (pol == POLICY_STATIC) {
        set_mode(p, static_mode(p->nprocs, p->ncpu));
    } else {
        p->ncand = candidates(p->nprocs, p->ncpu, p->cand);
        adapt_start(p, static_mode(p->nprocs, p->ncpu), 0);
    }
}

int kb__wait_policy_create(const struct kb_wait_setup *s, struct kb_wait_policy **out)
{
    struct kb_wait_policy *p = kb__calloc(1, sizeof *p);
    unsigned *epochs = kb__calloc((size_t)(s->nprocs > 0 ? s->nprocs : 1), sizeof *epochs);
    if (!p || !epochs) {
        free(p);
        free(epochs);
        return KB_ENOMEM;
    }
    p->rank_epoch = epochs;
    p->nprocs = s->nprocs;
    p->ncpu = s->ncpu > 0 ? s->ncpu : usable_cpus();
    p->clock = s->clock ? s->clock : kb__now_ns;
    p->memory = s->memory;
    p->mode = -1;
    p->seat_cpu[0] = p->seat_cpu[1] = p->gather_cpu = -1;
    int valgrind = UNDER_VALGRIND;
    if (s->affinity == KB_AFFINITY_ONE_CPU) {
        /* The next holder needs the one CPU: ranks sleep at once. */
        p->mode = KB_WAIT_SLEEP;
        p->park_ns = !valgrind && s->nprocs <= PINNED_LOOK_RANKS_MAX ? KB_WAIT_LOOK_NS : 0;
    } else if (s->affinity == KB_AFFINITY_SPREAD) {
        /* Pinned apart: spin with a CPU per rank; nudged ranks watch pausing. */
        int spin = !valgrind && s->nprocs >= 2 && s->nprocs <= s->spread_ncpus;
        p->rank.spin_ns = spin ? KB_WAIT_LOOK_NS : 0;
        p->rank.watch = !valgrind && s->spread_ncpus >= 2 ? KB_WAIT_LOOK_NS : 0;
        p->park_ns = valgrind ? 0 : KB_WAIT_LOOK_NS;
        p->mode = spin ? KB_WAIT_SPIN : p->rank.watch ? KB_WAIT_NUDGE : KB_WAIT_SLEEP;
    } else {
        default_affinity(p, valgrind);
    }
    *out = p;
    return 0;
}

void kb__wait_policy_destroy(struct kb_wait_policy *p)
{
    if (!p)
        return;
    adapt_save(p);
    free(p->rank_epoch);
    free(p);
}

int kb__wait_next_turn(struct kb_wait_policy *p, int rank, struct kb_wait_budget *out)
{
    *out = p->rank;
    if (p->rank_epoch[rank] == p->epoch)
        return -1; /* the usual case: one compare */
    p->rank_epoch[rank] = p->epoch;
    int cpu = p->gather_cpu >= 0 ? p->gather_cpu : p->seat_cpu[rank & 1];
    return kb__sys_seat_self(cpu) == 0 ? cpu : -1;
}

int kb__wait_nudging(const struct kb_wait_policy *p)
{
    return p->rank.watch != 0;
}

unsigned kb__wait_park_ns(const struct kb_wait_policy *p)
{
    return p->park_ns;
}

void kb__wait_report(const struct kb_wait_policy *p, struct kb_spawn_stats *st)
{
    st->wait_reactive = p->adaptive;
    st->wait_switches = p->switches;
    for (int m = 0; m < KB_WAIT_MODES; m++)
        st->wait_ns[m] = p->adaptive ? p->l.est[m] : 0;
    st->wait_mode = p->adaptive ? p->l.home : p->mode;
}
