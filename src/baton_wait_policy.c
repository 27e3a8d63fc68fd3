/* SPDX-License-Identifier: MIT */
/*
 * The wait policy (baton_wait_policy.h). What it weighs, measured on 2-vCPU KVM
 * guests: docs/design.md ("Waiting for the baton: the wait policy") has the cost model and every
 * lever tried; the figures behind each choice below are in
 * docs/benchmarks.md (make bench-report), not copied here, where they
 * would go stale.
 *
 *   - Waking a sleeping thread costs a futex wake and a context switch,
 *     and, when the kernel puts it on a CPU that went idle, that CPU's exit
 *     from halt, several times a switch on a busy CPU. The kernel prefers an idle CPU for a woken thread, so
 * on an otherwise idle machine most plain sleeps pay the halt.
 *   - A pure spin (pausing between looks) sees a post in well under a
 *     microsecond, but only if the spinner has a CPU of its own: on the
 *     CPU the next holder needs it costs that holder a time slice.
 *   - A yielding look (sched_yield() between looks) never keeps another
 *     thread off its CPU and keeps that CPU from halting, so the next
 *     wake-up that lands there is cheap; it pays while the baton comes
 *     back within the look, and costs CPU time that nobody else wanted.
 *
 * So the static choice, with the default affinity and n ranks on c CPUs
 * (the calling thread's affinity mask, read at every spawn), is the one
 * below. It is what KB_WAIT_POLICY=static keeps for the whole spawn, and
 * where the reactive default (baton_wait_reactive.c) starts before it has
 * measured anything; counts alone cannot tell an idle machine from a busy
 * one, nor rank code that works between suspensions from code that does
 * not, which is why the default then measures:
 *
 *   c = 1          yielding looks (the CPU never halts between turns)
 *   n < c          yielding looks: a rank looks while the driver drains; on
 *                  an idle machine a yield returns at once, so this costs
 *                  little more than a spin, and with two simulations side
 *                  by side a spinning rank held the CPU its driver needed
 *                  (an order of magnitude slower)
 *   n = c          a short spin, then yielding looks (the driver, draining,
 *                  may need a rank's CPU)
 *   n <= 4c        yielding looks (a round is shorter than the look)
 *   n > 4c         nudges: a rank sleeps at once after its turn and wakes
 *                  the holder after next, which watches its slot with
 *                  yielding looks; the CPU it wakes on is busy, so the
 *                  wake-up costs no halt, and only two threads are awake
 *
 * KB_WAIT_POLICY=spin|look|nudge|sleep fixes one mode for spawns with the
 * default affinity, =static the choice above, =cycle (a test mode) moves
 * to the next mode every round, and unset or =auto is the reactive
 * default. The affinity options keep their own:
 * KB_AFFINITY_ONE_CPU sleeps at once (the next holder needs the one CPU);
 * KB_AFFINITY_SPREAD spins when every rank has a CPU and nudges with
 * pausing watches (the nudged rank is pinned to another CPU than the
 * holder). Under Valgrind, which runs one thread at a time, nothing
 * looks: every wait sleeps at once (except under =cycle, which is
 * there to be checked by Valgrind's tools too).
 */
#include "baton_wait_policy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton_wait_reactive.h"
#include "ctx.h"
#include "rank_seat.h"
#include "run.h"
#include "system.h"
#ifdef KB_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

/* How long a look lasts: longer than a wake-up from halt costs, short
 * enough that a turn that runs long costs its looker little. 20 us
 * measured slower at every rank count (docs/design.md). */
#define LOOK_NS 50000u
/* KB_WAIT_POLICY=spin: a spin as long as a look. */
#define SPIN_NS 50000u
/* The short spin with as many ranks as CPUs: a turn with nothing to
 * drain comes back within it when the other rank has a CPU. */
#define SHORT_SPIN_NS 2000u
/* KB_AFFINITY_SPREAD's spin when every rank has a CPU (it was 200 pauses,
 * a few microseconds). */
#define SPREAD_SPIN_NS 5000u
/* Yielding looks up to this many ranks per CPU; nudges beyond. */
#define LOOK_RANKS_PER_CPU 4
/* KB_AFFINITY_ONE_CPU: the driver's and parked workers' looks, only up
 * to PARK_MAX_RANKS_PINNED ranks (beyond that they measured slower than
 * sleeping at once); every extra yielder on the one CPU is a switch in
 * the way of the next holder. */
#define PARK_LOOK_NS_PINNED   20000u
#define PARK_MAX_RANKS_PINNED 512

/* What KB_WAIT_POLICY asks for. */
enum policy {
    POLICY_REACTIVE, /* unset, "auto": baton_wait_reactive.c */
    POLICY_STATIC,   /* the choice from the counts alone, fixed for the spawn */
    POLICY_CYCLE,    /* a test mode: the next mode every round */
    POLICY_FIXED     /* one kb_wait_mode for the whole spawn */
};

static int under_valgrind(void)
{
#ifdef KB_HAVE_VALGRIND_H
    return RUNNING_ON_VALGRIND != 0;
#else
    return 0;
#endif
}

/* The online CPUs, read once per process: glibc's sysconf opens and
 * parses /sys/devices/system/cpu/online at every call, which costs more
 * than a handoff. */
static pthread_once_t online_once = PTHREAD_ONCE_INIT;
static int online_n;

static void read_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    online_n = n > 0 ? (int)n : 1;
}

/* KB_TEST_CPUS=n, for tests only: the policy counts n CPUs, whatever the
 * machine has, so that the suite checks the choices for 1, 2, 4 or 64
 * CPUs on any machine and passes on every one. Only the policy's count
 * changes: seating and the affinity options still use the real mask.
 * 0 when unset or not a count from 1 to 65536 (then ignored). */
static int test_cpus(void)
{
    const char *v = getenv("KB_TEST_CPUS");
    if (!v || !*v)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    return *end == '\0' && n >= 1 && n <= 65536 ? (int)n : 0;
}

/* The CPUs the calling thread may run on: its affinity mask (a process
 * started under taskset, or in a cpuset, has fewer than are online; one
 * system call per spawn), else, where there is no affinity to read, the
 * online CPUs; KB_TEST_CPUS instead when set. */
static int usable_cpus(void)
{
    int n = test_cpus();
    if (n > 0)
        return n;
    struct kb_cpumask mask;
    n = kb__sys_get_affinity(&mask) == 0 ? kb__sys_mask_count(&mask) : 0;
    if (n > 0)
        return n;
    pthread_once(&online_once, read_online);
    return online_n;
}

static const char *const mode_names[KB_WAIT_MODES] = {"sleep", "look", "nudge", "spin"};

const char *kb_wait_mode_name(int mode)
{
    return mode >= 0 && mode < KB_WAIT_MODES ? mode_names[mode] : "unknown";
}

/* KB_WAIT_POLICY, or POLICY_REACTIVE when unset or malformed (with a
 * warning); a fixed mode in *mode. */
static enum policy policy_from_env(int *mode)
{
    const char *v = getenv("KB_WAIT_POLICY");
    if (!v || !*v || strcmp(v, "auto") == 0)
        return POLICY_REACTIVE;
    if (strcmp(v, "static") == 0)
        return POLICY_STATIC;
    if (strcmp(v, "cycle") == 0)
        return POLICY_CYCLE;
    for (int m = 0; m < KB_WAIT_MODES; m++)
        if (strcmp(v, mode_names[m]) == 0) {
            *mode = m;
            return POLICY_FIXED;
        }
    fprintf(stderr,
            "kbthreads: ignoring KB_WAIT_POLICY=%s (not auto, static, cycle, spin, look, nudge or sleep)\n",
            v);
    return POLICY_REACTIVE;
}

/* KB_WAIT_ABLATE=name,name,...: the reactive policy's mechanisms to
 * switch off (baton_wait_reactive.h's KB_ABLATE_*), for issue 45's
 * ablation (bench/jobs_policy.py --ablate); unknown names are ignored. */
static unsigned ablate_from_env(void)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"slots", KB_ABLATE_SLOTS},         {"gather", KB_ABLATE_GATHER},
                 {"seat", KB_ABLATE_SEAT},           {"memory", KB_ABLATE_MEMORY},
                 {"early", KB_ABLATE_EARLY},         {"backoff", KB_ABLATE_BACKOFF},
                 {"spin_rule", KB_ABLATE_SPIN_RULE}, {"cutoff", KB_ABLATE_CUTOFF},
                 {"bank", KB_ABLATE_BANK},           {"degrade", KB_ABLATE_DEGRADE}};
    const char *v = getenv("KB_WAIT_ABLATE");
    unsigned bits = 0;
    for (size_t i = 0; v && i < sizeof names / sizeof names[0]; i++)
        if (strstr(v, names[i].name))
            bits |= names[i].bit;
    return bits;
}

int kb__wait_static_mode(int nprocs, int ncpu)
{
    if (ncpu < 2 || nprocs <= LOOK_RANKS_PER_CPU * ncpu)
        return KB_WAIT_LOOK;
    return KB_WAIT_NUDGE;
}

struct kb_wait_budget kb__wait_mode_budget(int mode, int nprocs, int ncpu, int counted)
{
    struct kb_wait_budget b = {0};
    switch (mode) {
    case KB_WAIT_SPIN:
        b.spin_ns = SPIN_NS;
        break;
    case KB_WAIT_LOOK:
        if (counted && nprocs == ncpu && ncpu >= 2)
            b.spin_ns = SHORT_SPIN_NS;
        b.look_ns = LOOK_NS;
        break;
    case KB_WAIT_NUDGE:
        b.watch = ncpu >= 2 ? LOOK_NS | KB_WATCH_YIELD : 0;
        break;
    default:
        break;
    }
    return b;
}

/* The reactive policy's candidates for n ranks on c CPUs, in the order
 * they are first tried (the likelier winners on an idle machine first):
 *   - looking;
 *   - spinning, only where every rank can have a CPU (a spinner on the CPU
 *     the next holder needs costs it a time slice). With as many ranks as
 *     CPUs the driver has none, which costs a loop that drains every round
 *     but not one whose rounds leave the driver out: there the spin is
 *     what the static choice's short spin was for, and it is tried only
 *     there (baton_wait_reactive.c: due_probe);
 *   - nudges, where the ranks outnumber the CPUs and there is a second CPU
 *     to wake on (with fewer ranks the rank after next has a CPU of its
 *     own, or is the waker itself);
 *   - sleeping, last, and only where the ranks outnumber the CPUs: the
 *     best only on a busy machine, and with no more ranks than CPUs it
 *     lost to looking in every condition the bench measures (idle, beside
 *     a CPU hog, beside another simulation), while its tries left the
 *     looks that followed in a slower placement (docs/design.md).
 */
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

static void default_affinity(struct kb_run *run, int valgrind)
{
    int ncpu = usable_cpus();
    int mode = KB_WAIT_SLEEP;
    enum policy p = policy_from_env(&mode);
    run->park_look_ns = valgrind ? 0 : LOOK_NS;
    if (p == POLICY_CYCLE) {
        /* Every mode, whatever the counts, Valgrind included: the test of
         * "the order never depends on the mode" (docs/reliability.md). */
        static const int all[KB_WAIT_MODES] = {KB_WAIT_SLEEP, KB_WAIT_LOOK, KB_WAIT_NUDGE, KB_WAIT_SPIN};
        kb__wait_reactive_start(run, run->nprocs, ncpu, KB_WAIT_SLEEP, all, KB_WAIT_MODES, 1, NULL);
        return;
    }
    if (valgrind)
        return; /* one thread runs at a time: every look is wasted, sleep at once */
    if (p == POLICY_FIXED) {
        run->rank_wait = kb__wait_mode_budget(mode, run->nprocs, ncpu, 0);
        return;
    }
    int home = kb__wait_static_mode(run->nprocs, ncpu);
    if (p == POLICY_STATIC) {
        run->rank_wait = kb__wait_mode_budget(home, run->nprocs, ncpu, 1);
        return;
    }
    int cand[KB_WAIT_MODES];
    int ncand = candidates(run->nprocs, ncpu, cand);
    unsigned ablate = ablate_from_env();
    if (ablate & KB_ABLATE_SEAT)
        run->seat.cpu[0] = run->seat.cpu[1] = -1;
    kb__wait_reactive_start(run, run->nprocs, ncpu, home, cand, ncand, 0,
                            run->ctx && !(ablate & KB_ABLATE_MEMORY) ? &run->ctx->wait_memory : NULL);
    run->reactive.ablate = ablate;
}

void kb__wait_policy_resolve(struct kb_run *run)
{
    kb__seat_resolve(run);
    memset(&run->rank_wait, 0, sizeof run->rank_wait);
    memset(&run->reactive, 0, sizeof run->reactive);
    run->park_look_ns = 0;
    int valgrind = under_valgrind();
    switch (run->opt.affinity) {
    case KB_AFFINITY_ONE_CPU:
        if (!valgrind)
            run->park_look_ns = run->nprocs <= PARK_MAX_RANKS_PINNED ? PARK_LOOK_NS_PINNED : 0;
        break;
    case KB_AFFINITY_SPREAD:
        if (valgrind)
            break;
        /* A spin when every rank has a CPU of its own among those the
         * ranks are pinned to (opt.cpus: the driver's real mask, which
         * KB_TEST_CPUS does not change). */
        if (run->nprocs >= 2 && run->nprocs <= run->opt.ncpus)
            run->rank_wait.spin_ns = SPREAD_SPIN_NS;
        run->rank_wait.watch = run->opt.ncpus >= 2 ? KB_NUDGE_WATCH_NS : 0;
        run->park_look_ns = LOOK_NS;
        break;
    default:
        default_affinity(run, valgrind);
        break;
    }
    if (run->rank_wait.watch)
        run->reactive.nudged = 1;
    /* A fixed choice with nudges seats its ranks once (the reactive policy
     * asks whenever it moves to nudges: baton_wait_reactive.c). */
    if (run->rank_wait.watch && !run->reactive.active)
        kb__seat_arm(run);
}
