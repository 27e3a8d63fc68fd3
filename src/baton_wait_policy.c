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
 * So, with the default affinity and n ranks on c CPUs (the calling
 * thread's affinity mask, read at every spawn):
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
 * KB_WAIT_POLICY=spin|look|nudge|sleep (or auto) overrides the choice for
 * spawns with the default affinity. The affinity options keep their own:
 * KB_AFFINITY_ONE_CPU sleeps at once (the next holder needs the one CPU);
 * KB_AFFINITY_SPREAD spins when every rank has a CPU and nudges with
 * pausing watches (the nudged rank is pinned to another CPU than the
 * holder). Under Valgrind, which runs one thread at a time, nothing
 * looks: every wait sleeps at once.
 */
#include "baton_wait_policy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

enum policy { POLICY_AUTO, POLICY_SPIN, POLICY_LOOK, POLICY_NUDGE, POLICY_SLEEP };

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

/* The CPUs the calling thread may run on: its affinity mask (a process
 * started under taskset, or in a cpuset, has fewer than are online; one
 * system call per spawn), else, where there is no affinity to read, the
 * online CPUs. */
static int usable_cpus(void)
{
    struct kb_cpumask mask;
    int n = kb__sys_get_affinity(&mask) == 0 ? kb__sys_mask_count(&mask) : 0;
    if (n > 0)
        return n;
    pthread_once(&online_once, read_online);
    return online_n;
}

/* KB_WAIT_POLICY, or POLICY_AUTO when unset or malformed (with a
 * warning). */
static enum policy policy_from_env(void)
{
    static const char *const names[] = {"auto", "spin", "look", "nudge", "sleep"};
    const char *v = getenv("KB_WAIT_POLICY");
    if (!v || !*v)
        return POLICY_AUTO;
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(v, names[i]) == 0)
            return (enum policy)i;
    fprintf(stderr, "kbthreads: ignoring KB_WAIT_POLICY=%s (not auto, spin, look, nudge or sleep)\n", v);
    return POLICY_AUTO;
}

static enum policy auto_policy(int nprocs, int ncpu)
{
    if (ncpu < 2 || nprocs <= LOOK_RANKS_PER_CPU * ncpu)
        return POLICY_LOOK;
    return POLICY_NUDGE;
}

static void default_affinity(struct kb_run *run)
{
    int ncpu = usable_cpus();
    enum policy p = policy_from_env();
    int forced = p != POLICY_AUTO;
    if (!forced)
        p = auto_policy(run->nprocs, ncpu);
    struct kb_wait_budget *b = &run->rank_wait;
    switch (p) {
    case POLICY_SPIN:
        b->spin_ns = SPIN_NS;
        break;
    case POLICY_LOOK:
        if (run->nprocs == ncpu && ncpu >= 2 && !forced)
            b->spin_ns = SHORT_SPIN_NS;
        b->look_ns = LOOK_NS;
        break;
    case POLICY_NUDGE:
        b->watch = ncpu >= 2 ? LOOK_NS | KB_WATCH_YIELD : 0;
        break;
    default:
        break;
    }
    run->park_look_ns = LOOK_NS;
}

void kb__wait_policy_resolve(struct kb_run *run)
{
    memset(&run->rank_wait, 0, sizeof run->rank_wait);
    run->park_look_ns = 0;
    if (under_valgrind())
        return;
    switch (run->opt.affinity) {
    case KB_AFFINITY_ONE_CPU:
        run->park_look_ns = run->nprocs <= PARK_MAX_RANKS_PINNED ? PARK_LOOK_NS_PINNED : 0;
        break;
    case KB_AFFINITY_SPREAD:
        if (run->nprocs >= 2 && run->nprocs <= usable_cpus())
            run->rank_wait.spin_ns = SPREAD_SPIN_NS;
        run->rank_wait.watch = run->opt.ncpus >= 2 ? KB_NUDGE_WATCH_NS : 0;
        run->park_look_ns = LOOK_NS;
        break;
    default:
        default_affinity(run);
        break;
    }
}
