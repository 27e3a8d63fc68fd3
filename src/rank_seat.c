/* SPDX-License-Identifier: MIT */
/*
 * Seating (rank_seat.h). Why: with nudges, the holder H posts the next
 * rank T and wakes U, the one after it, which should land on H's CPU (H is
 * about to sleep there) and watch while T runs on the other CPU. The
 * kernel wakes a thread on or near the CPU it last ran on, so whether that
 * happens depends on where each thread last ran: threads that alternate
 * CPUs in rank order keep alternating (about 1.3 us per yield at 64 ranks
 * on 2 CPUs), threads that do not keep sharing one CPU while the other
 * idles (3-10 us), and unpinned runs land in either pattern by chance
 * (process to process, and after a stretch of looking, whose yielding
 * threads the kernel moves around). Seating makes the first pattern the
 * start of every stretch of nudging: a rank pins itself to its CPU and at
 * once sets its old mask back (kb__sys_seat_self), so it is there when it
 * sleeps, and it is not confined: the kernel may move it afterwards, and
 * rank code, which never runs in between, never finds its affinity
 * changed (a thread pool it starts is not confined either).
 */
#include "rank_seat.h"

#include <string.h>
#include <unistd.h>

#include "run.h"
#include "system.h"

void kb__seat_resolve(struct kb_run *run)
{
    memset(&run->seat, 0, sizeof run->seat);
    run->seat.cpu[0] = run->seat.cpu[1] = run->seat.gather = -1;
    struct kb_cpumask mask;
    if (run->opt.affinity != 0 || kb__sys_get_affinity(&mask) != 0)
        return;
    int n = kb__sys_mask_count(&mask);
    if (n < 2)
        return;
    int cpus[CPU_SETSIZE];
    n = kb__sys_mask_cpus(&mask, cpus, n);
    int here = kb__sys_current_cpu(), i = 0;
    while (i < n && cpus[i] != here)
        i++;
    if (i == n)
        i = 0; /* running outside its own mask (it changed since): any two */
    /* Rank 0 on the other CPU: the driver's post to it crosses CPUs, and so
     * does every handoff after it. (With the driver in the ring, a round of
     * N ranks is a ring of N + 1 threads, and an odd ring has one handoff
     * per round that cannot alternate.) */
    run->seat.cpu[0] = cpus[(i + 1) % n];
    run->seat.cpu[1] = cpus[i];
}

void kb__seat_arm(struct kb_run *run)
{
    if (run->seat.cpu[0] < 0)
        return;
    run->seat.gather = -1;
    run->seat.epoch++;
}

/* Why gather: a stretch of nudges leaves the ranks half on each CPU, and
 * the kernel keeps a yielding or sleeping thread near where it last ran.
 * Beside a CPU hog that left half the ranks looking on the hog's CPU at
 * 100-400 us per handoff after a try of nudges lost; two simulations side
 * by side, each looking on both CPUs, ran at 3-6 us per operation, and at
 * 1.1 us each gathered on a CPU of its own.
 *
 * Which CPU: the driver's as the spawn began (the kernel starts a new
 * process on an idle CPU, not a hog's, and two processes started together
 * ran their drivers on different CPUs in most runs measured; in ten pairs
 * of Python simulations of 64 ranks, gathering on the holder's CPU instead
 * left them at 6.4 us per operation, forced looks at 2.4 us).
 * Two processes that started on the same CPU both lose the try that
 * gathered them there, and nothing else tells them apart but their pids:
 * turn k > 0 takes the driver's CPU or the other seat by bit k - 1 of the
 * pid, so two processes part at the first turn whose bit differs. */
void kb__seat_gather(struct kb_run *run, unsigned turn)
{
    if (run->seat.cpu[0] < 0)
        return;
    unsigned other = turn ? ((unsigned)getpid() >> ((turn - 1) % 16)) & 1u : 0u;
    run->seat.gather = run->seat.cpu[1 ^ other];
    run->seat.epoch++;
}

void kb__seat_rank(struct kb_rank *rk)
{
    struct kb_run *run = rk->run;
    if (rk->seat_epoch == run->seat.epoch)
        return;
    rk->seat_epoch = run->seat.epoch;
    int cpu = run->seat.gather >= 0 ? run->seat.gather : run->seat.cpu[rk->index & 1];
    if (kb__sys_seat_self(cpu) == 0)
        run->counters.seats++;
}
