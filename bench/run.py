#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run the libkbthreads benchmarks, the floors and the peers; print a table;
write the results under bench/results/.

    run.py --bindir BUILD [--results DIR] [--smoke] [--reps R] [--only WORD ...]
           [--quiet-wait SECONDS] [--no-maxn] [--condvar-bindir DIR] [--baseline-bindir DIR]
           [--no-idle-wait]

The programs (built by bench/CMakeLists.txt into BUILD) print one KBR line
per measured repetition (see bench_common.h); this script plans the runs
(M scaled per N to keep the full run within ~15 minutes on 2 CPUs), runs
them in an order that keeps the figures compared with each other close in
time (for each N: libkbthreads, then the floors, then the peers), and
aggregates every figure to median, min and max of its repetitions.

libkbthreads runs unpinned (default options), with --spread (the
KB_AFFINITY_SPREAD spawn option, impl kbthreads_spread, compared with the
unpinned floors) right after each unpinned yield, wait, collective and spawn
job, and with --pin (KB_AFFINITY_ONE_CPU). The smoke run takes the spread
jobs at one N only (SPREAD_SMOKE_N).

With --condvar-bindir (a build of the benchmarks against a library built
with KB_BATON=condvar, bench/bench.mk's build-bench-condvar), every yield,
wait and spawn job of kb_bench (unpinned, spread, pinned) runs again right
after the futex one from that build: impl kbthreads_condvar[_spread]
(kb_bench names its figures for its library's kb_baton_name()).

Issue 20 (bench/run_idle.py): every job first waits (bounded) for an idle
machine and records the 1-minute load and the other runnable tasks at its
start and its CPU time; the default options run also under one CPU
(kbthreads_taskset) and the wait loop pinned, beside --pin and --spread;
the simulation-shaped job runs in C, in Python and on greenlet (checksums
compared); a CPU hog section and a two-side-by-side section follow, each
against --baseline-bindir (a build of these programs against an older
library) when given.

Output: bench/results/<kind>-<UTC stamp>.json (everything: machine,
parameters, notes, every sample and the summary) and .csv (the summary),
copied to <kind>-latest.json / .csv (kind: bench or smoke). Exit status 1
if any benchmark failed (peers that are not installed are skipped with a
note, not failed).
"""
import argparse
import csv
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_idle  # noqa: E402  (issue 20: the idle gate and the jobs it added)
# The busy threshold, the join slice and the number formatting, shared with the report.
from bench_shared import BUSY_SHARE, JOIN_SLICE_MS, fmt_val  # noqa: E402

NS_FULL = [1, 2, 8, 64, 512, 4096]
NS_SMOKE = [1, 8, 64]
# The smoke run exercises --spread at this N only (every mode once): more
# ranks than CPUs, so handoffs cross CPUs and the holder after next is woken.
SPREAD_SMOKE_N = 8
SMALL_STACK = 64 * 1024
GREENLET_PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))


def ceil_div(a, b):
    return -(-a // b)


class Plan:
    """How much work each repetition does (ops per repetition)."""

    def __init__(self, smoke, reps):
        self.smoke = smoke
        self.reps = reps if reps else (2 if smoke else 7)
        self.ns = NS_SMOKE if smoke else NS_FULL
        # The Ns of the --spread jobs (the same repetitions and work as the unpinned ones).
        self.spread_ns = [SPREAD_SMOKE_N] if smoke else list(self.ns)
        s = 0.05 if smoke else 1.0  # scale of every budget
        self.kb_ops = max(200, int(40000 * s))  # yields per repetition (~5 us each)
        self.ring_ops = max(200, int(40000 * s))  # handoffs per repetition
        self.cond_budget = max(400, int(60000 * s))  # cond handoffs x ring size
        self.swap_ops = max(1000, int(500000 * s))
        self.greenlet_ops = max(500, int(100000 * s))
        self.simgrid_ops = {"thread": max(200, int(20000 * s)), "raw": max(2000, int(200000 * s))}
        self.spawn_budget = max(64, int(4000 * s))  # rank spawns per repetition
        self.mem_n = 256 if smoke else 4096
        self.timeout = 120 if smoke else 600

    def m_for(self, ops, n, floor=4):
        return max(floor, ceil_div(ops, n))

    def cond_handoffs(self, n):
        return max(16 if not self.smoke else 4, min(self.ring_ops, self.cond_budget // max(n, 2)))


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def read_first(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def loadavg():
    try:
        return [float(x) for x in read_first("/proc/loadavg").split()[:3]]
    except ValueError:
        return []


def machine_info():
    lscpu = {}
    for line in sh("LC_ALL=C lscpu").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            lscpu[k.strip()] = v.strip()
    keep = ["Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
            "Hypervisor vendor", "Virtualization type", "L1d cache", "L2 cache", "L3 cache", "CPU max MHz",
            "BogoMIPS"]
    root = os.path.dirname(HERE)
    commit = sh("git -C '%s' rev-parse --short HEAD" % root)
    dirty = sh("git -C '%s' status --porcelain --untracked-files=no -- src include" % root)
    return {
        "lscpu": {k: lscpu[k] for k in keep if k in lscpu},
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "os": read_first("/etc/debian_version") and "Debian " + read_first("/etc/debian_version"),
        "glibc": " ".join(platform.libc_ver()),
        "cc": sh("cc --version | head -1"),
        "memory": sh("free -h | awk '/^Mem:/ {print $2}'"),
        "pid_max": read_first("/proc/sys/kernel/pid_max"),
        "threads_max": read_first("/proc/sys/kernel/threads-max"),
        "max_map_count": read_first("/proc/sys/vm/max_map_count"),
        "git_commit": commit + (" (src/ or include/ modified)" if dirty else ""),
    }


def build_type(bindir):
    """CMAKE_BUILD_TYPE of the build holding the programs."""
    d = bindir
    for _ in range(3):
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            with open(cache) as f:
                for line in f:
                    if line.startswith("CMAKE_BUILD_TYPE:"):
                        return line.split("=", 1)[1].strip() or "(none)"
            return "(none)"
        d = os.path.dirname(d)
    return "?"


def cpu_times():
    """(busy seconds of the whole machine, steal seconds, CPU seconds of this
    process and its waited-for children)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    tck = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return (user + nice + system + irq + softirq) / tck, steal / tck, mine


def others_share(before, after, elapsed):
    """The share of the machine's CPU time that other processes (or the
    hypervisor, as steal) took while a job ran: 0 = a quiet machine."""
    busy = (after[0] - before[0]) - (after[2] - before[2])
    steal = after[1] - before[1]
    total = elapsed * (os.cpu_count() or 1)
    return max(0.0, min(1.0, (busy + steal) / total)) if total > 0 else 0.0


def system_threads():
    """Threads alive on the whole machine (each uses a pid)."""
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/status" % d) as f:
                    for line in f:
                        if line.startswith("Threads:"):
                            n += int(line.split()[1])
                            break
            except OSError:
                pass
    return n


class Runner:
    def __init__(self, args):
        self.args = args
        self.plan = Plan(args.smoke, args.reps)
        self.bindir = os.path.abspath(args.bindir)
        self.samples = []  # dicts: bench impl pin n value unit ops
        self.info = {}
        self.notes = []
        self.failures = []
        self.jobs = []  # (label, elapsed seconds)
        self.only = args.only
        self.condvar_bindir = os.path.abspath(args.condvar_bindir) if args.condvar_bindir else None
        self.retry_spent = 0.0  # seconds spent re-running jobs measured on a busy machine
        self.baseline_bindir = os.path.abspath(args.baseline_bindir) if args.baseline_bindir else None
        # Smoke runs record the load but never wait for it (CI).
        self.gate = run_idle.IdleGate(enabled=not args.smoke and not args.no_idle_wait)
        self.sim_checksums = {}  # str(N) -> {impl: "N:M:checksum:events"}
        self.python = GREENLET_PYTHON
        self.here = HERE

    def want(self, *words):
        return not self.only or any(w in self.only for w in words)

    def want_spread(self, n, *words):
        """Run the --spread job of this family at this N? (--only spread: every spread job.)"""
        return n in self.plan.spread_ns and self.want("kbthreads", "spread", *words)

    def prog(self, name):
        return os.path.join(self.bindir, name)

    def have(self, name):
        return os.access(self.prog(name), os.X_OK)

    def run_kb(self, label, argv):
        """A kb_bench job, then (--condvar-bindir) the same job on the condvar baton."""
        self.run(label, argv)
        if self.condvar_bindir:
            self.run(label + " condvar", [os.path.join(self.condvar_bindir, "kb_bench")] + argv[1:])

    def run(self, label, argv, ok_codes=(0,), quiet_fail=False, timing=True, rename=None, preexec_fn=None,
            copies=1, deliberate=None):
        """Run one program (copies > 1: that many started together); collect
        its KBR/KBI lines. Returns (rc, kbi list).

        Before a timing job the idle gate (run_idle.IdleGate) waits, bounded,
        for an idle machine and records the 1-minute load and the other
        runnable tasks at the start. While it runs, the share of the
        machine's CPU used by other processes is measured, and the CPU time
        of the job's processes (getrusage of the waited-for children). A
        timing job measured on a busy machine (above BUSY_SHARE) or started
        on one (load above run_idle.IDLE_LOAD_PER_CPU per CPU with other
        tasks runnable) is run again, up to --retry-busy times after a pause,
        and the attempt on the quietest machine is kept. rename: impl names
        of its figures to change (e.g. kbthreads -> kbthreads_taskset).
        deliberate ("hog" or "pair"): a section that loads the machine on
        purpose: no retry; "hog" also starts without waiting."""
        best = None
        attempts = 0
        while True:
            attempts += 1
            start = self.gate.before_job(wait=timing and deliberate != "hog")
            before = cpu_times()
            t0 = time.monotonic()
            outs = self.launch(argv, copies, preexec_fn)
            elapsed = time.monotonic() - t0
            after = cpu_times()
            share = others_share(before, after, elapsed)
            rc = next((r for r, _, _ in outs if r not in ok_codes), outs[0][0])
            flags = []
            if timing and share > BUSY_SHARE:
                flags.append("others used %.0f%% of the CPUs" % (100 * share))
            if timing and start["started_busy"]:
                flags.append("started at load %.2f with %d other task(s) runnable"
                             % (start["load1"], start["others_runnable"]))
            score = share + (1.0 if start["started_busy"] else 0.0)
            if best is None or (rc in ok_codes and score < best["score"]):
                best = {"rc": rc, "outs": outs, "elapsed": elapsed, "share": share, "score": score,
                        "start": start, "cpu_s": after[2] - before[2], "flags": flags}
            if (not timing or deliberate or rc not in ok_codes or not flags or attempts > self.args.retry_busy
                    or elapsed > 30 or self.retry_spent > self.args.retry_budget):
                break
            print("  (busy machine: %s during %s; again in 5 s)" % ("; ".join(flags), label), flush=True)
            time.sleep(5)
            self.retry_spent += 5 + elapsed
        rc, elapsed, share, start = best["rc"], best["elapsed"], best["share"], best["start"]
        flag = "" if deliberate else "; ".join(best["flags"])
        self.jobs.append({"label": label, "seconds": round(elapsed, 2), "others_cpu": round(share, 3),
                          "attempts": attempts, "load1": start["load1"],
                          "others_runnable": start["others_runnable"], "waited_s": start["waited_s"],
                          "cpu_s": round(best["cpu_s"], 3), "copies": copies, "deliberate": deliberate,
                          "flag": flag})
        kbi = []
        for _, out, _ in best["outs"]:
            for line in out.splitlines():
                parts = line.strip().split(",")
                if parts[0] == "KBR" and len(parts) == 9:
                    impl = (rename or {}).get(parts[2], parts[2])
                    self.samples.append({
                        "bench": parts[1], "impl": impl, "pin": int(parts[3]), "n": int(parts[4]),
                        "value": float(parts[6]), "unit": parts[7], "ops": int(parts[8]),
                        "others_cpu": round(share, 3), "load1": start["load1"], "flagged": bool(flag),
                    })
                elif parts[0] == "KBI" and len(parts) >= 3:
                    key, value = parts[1], ",".join(parts[2:])
                    kbi.append((key, value))
                    # Facts of the run come from its own programs, not a renamed (baseline) job's.
                    if key not in ("maxn_try", "sim_checksum") and not rename:
                        self.info[key] = value
        if rc not in ok_codes:
            err = next((e for r, _, e in best["outs"] if r not in ok_codes), "")
            tail = " | ".join(err.strip().splitlines()[-3:])
            if not quiet_fail:
                self.failures.append("%s: exit %s: %s" % (label, rc, tail))
            print("  FAILED %s (exit %s) %s" % (label, rc, tail), flush=True)
        else:
            print("  %-48s %6.2fs  others %3.0f%%  load %.2f  cpu %.2fs%s" % (
                label, elapsed, 100 * share, start["load1"], best["cpu_s"], "  FLAGGED: " + flag if flag else ""),
                flush=True)
        return rc, kbi

    def launch(self, argv, copies, preexec_fn):
        """Start copies of argv together; [(rc, stdout, stderr)] once all ended."""
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=preexec_fn) for _ in range(copies)]
        deadline = time.monotonic() + self.plan.timeout
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
                outs.append((p.returncode, out, err))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                outs.append(("timeout", out or "", "timed out after %ss" % self.plan.timeout))
        return outs

    # -- the benchmark families --------------------------------------------

    def yield_family(self, n):
        p = self.plan
        reps = ["--reps", str(p.reps)]
        for pin in (0, 1):
            pin_arg = ["--pin"] if pin else []
            tag = " pinned" if pin else ""
            if self.want("kbthreads", "yield"):
                m = p.m_for(p.kb_ops, n)
                self.run_kb("kbthreads yield N=%d%s" % (n, tag),
                            [self.prog("kb_bench"), "yield", "--n", str(n), "--m", str(m)] + reps + pin_arg)
            if not pin:
                self.python_jobs("yield", n)
            if not pin and self.want_spread(n, "yield"):
                m = p.m_for(p.kb_ops, n)
                self.run_kb("kbthreads yield N=%d spread" % n,
                            [self.prog("kb_bench"), "yield", "--n", str(n), "--m", str(m)] + reps + ["--spread"])
            if not pin and n in run_idle.best_of_ns(self):
                run_idle.taskset_job(self, "yield", n, [self.prog("kb_bench"), "yield", "--n", str(n), "--m",
                                                        str(p.m_for(p.kb_ops, n))] + reps)
            if self.want("floors", "futex"):
                self.run("futex ring N=%d%s" % (n, tag),
                         [self.prog("kb_floor_ring"), "futex", "--n", str(n), "--m", str(p.ring_ops)] + reps + pin_arg)
            if self.want("floors", "sem"):
                self.run("semaphore ring N=%d%s" % (n, tag),
                         [self.prog("kb_floor_ring"), "sem", "--n", str(n), "--m", str(p.ring_ops)] + reps + pin_arg)
            if self.want("floors", "cond"):
                self.run("condvar broadcast N=%d%s" % (n, tag),
                         [self.prog("kb_floor_ring"), "cond", "--n", str(n), "--m", str(p.cond_handoffs(n))]
                         + reps + pin_arg)
        if self.want("peers", "greenlet") and self.greenlet_ok:
            m = p.m_for(p.greenlet_ops, n)
            self.run("greenlet yield N=%d" % n,
                     [GREENLET_PYTHON, os.path.join(HERE, "peer_greenlet.py"), "yield", "--n", str(n), "--m", str(m)]
                     + reps)
        if self.want("peers", "simgrid") and self.have("kb_peer_simgrid"):
            for factory in ("thread", "raw"):
                m = p.m_for(p.simgrid_ops[factory], n)
                for rep in range(p.reps):
                    self.run("simgrid %s yield N=%d (%d/%d)" % (factory, n, rep + 1, p.reps),
                             [self.prog("kb_peer_simgrid"), "--cfg=contexts/factory:" + factory,
                              "--log=root.thres:warning", "--n", str(n), "--m", str(m)])

    def drain_family(self, n):
        p = self.plan
        m = p.m_for(p.kb_ops, n)
        for mode in ("wait", "collective"):
            argv = [self.prog("kb_bench"), mode, "--n", str(n), "--m", str(m), "--reps", str(p.reps)]
            # The condvar baton is measured on yield, wait and spawn.
            run = self.run_kb if mode == "wait" else self.run
            if self.want("kbthreads", mode):
                run("kbthreads %s N=%d" % (mode, n), argv)
            self.python_jobs(mode, n)
            if self.want_spread(n, mode):
                run("kbthreads %s N=%d spread" % (mode, n), argv + ["--spread"])
            if mode == "wait" and n in run_idle.best_of_ns(self):
                run_idle.pinned_wait_job(self, n, argv)
                run_idle.taskset_job(self, mode, n, argv)
        if self.want("peers", "greenlet", "wait") and self.greenlet_ok:
            m = p.m_for(p.greenlet_ops, n)
            for mode in ("wait", "collective"):
                self.run("greenlet %s N=%d" % (mode, n),
                         [GREENLET_PYTHON, os.path.join(HERE, "peer_greenlet.py"), mode, "--n", str(n), "--m",
                          str(m), "--reps", str(p.reps)])

    def python_jobs(self, mode, n):
        """Issue 12's figures beside the kb_spawn job of the same mode and N:
        the C loop driven by timed kb_join slices (kbthreads_join), then the
        same loop in Python through the binding, with its compiled part
        (kbthreads_py; the binding has no pure-ctypes path any more)."""
        p = self.plan
        m = p.m_for(p.kb_ops, n)
        reps = ["--reps", str(p.reps)]
        if self.want("kbthreads", "join", mode):
            self.run("kbthreads %s N=%d join" % (mode, n),
                     [self.prog("kb_bench"), mode, "--n", str(n), "--m", str(m), "--join", str(JOIN_SLICE_MS)] + reps)
        if not self.want("python", mode) or not self.py_paths.get("library"):
            return
        base = [GREENLET_PYTHON, os.path.join(HERE, "py_bench.py"), mode, "--n", str(n), "--m", str(m),
                "--lib", self.py_paths["library"]] + reps
        if self.py_paths.get("accel"):
            self.run("python %s N=%d" % (mode, n), base + ["--accel", self.py_paths["accel"]])

    def spawn_family(self, n):
        p = self.plan
        k = max(1, p.spawn_budget // n)
        argv = [self.prog("kb_bench"), "spawn", "--n", str(n), "--k", str(k), "--reps", str(p.reps)]
        # Unpinned, then the spread option, then pinned (cold and repeated in each job).
        for tag, extra in (("", []), (" spread", ["--spread"]), (" pinned", ["--pin"])):
            wanted = self.want_spread(n, "spawn") if tag == " spread" else self.want("kbthreads", "spawn")
            if wanted:
                self.run_kb("kbthreads spawn N=%d (K=%d)%s" % (n, k, tag), argv + extra)

    def memory(self):
        p = self.plan
        if not self.want("kbthreads", "mem"):
            return
        for stack in (0, SMALL_STACK):
            for rep in range(p.reps):
                self.run("kbthreads memory N=%d stack=%s (%d/%d)" % (p.mem_n, stack or "default", rep + 1, p.reps),
                         [self.prog("kb_bench"), "mem", "--n", str(p.mem_n), "--stack", str(stack)])

    def maxn(self):
        """The largest N whose spawn runs (every rank yields once), searched
        by doubling from 4096 then bisecting, up to a cap that leaves pids
        for the rest of the machine (the kernel's pid_max is the usual limit
        here: every rank is a thread)."""
        if not self.want("kbthreads", "maxn") or self.args.no_maxn:
            return
        try:
            pid_max = int(read_first("/proc/sys/kernel/pid_max"))
            threads_max = int(read_first("/proc/sys/kernel/threads-max"))
            maps = int(read_first("/proc/sys/vm/max_map_count"))
        except ValueError:
            pid_max = threads_max = maps = 1 << 22
        headroom = 2048
        os_cap = min(pid_max, threads_max, maps // 2) - system_threads() - headroom
        cap = max(4096, min(self.args.maxn_cap, os_cap))
        result = {"cap": cap, "os_limit": min(pid_max, threads_max, maps // 2), "headroom": headroom, "by_stack": {}}
        for stack in (0, SMALL_STACK):
            impl = "kbthreads" if stack == 0 else "kbthreads-stack%dk" % (stack // 1024)
            tried = []

            def attempt(n):
                rc, kbi = self.run("kbthreads maxn try N=%d stack=%s" % (n, stack or "default"),
                                   [self.prog("kb_bench"), "maxn", "--n", str(n), "--stack", str(stack)],
                                   ok_codes=(0, 3), timing=False)
                detail = next((v for k, v in kbi if k == "maxn_try"), "exit %s" % rc)
                tried.append({"n": n, "ok": rc == 0, "detail": detail})
                return rc == 0

            if self.plan.smoke:
                lo, hi = (1024, None) if attempt(1024) else (0, 1024)
            else:
                lo, hi, n = 0, None, 4096
                while True:
                    if attempt(n):
                        lo = n
                        if n >= cap:
                            break
                        n = min(cap, n * 2)
                    else:
                        hi = n
                        break
                while hi is not None and hi - lo > 1024:
                    mid = (lo + hi) // 2 // 256 * 256
                    if attempt(mid):
                        lo = mid
                    else:
                        hi = mid
            result["by_stack"][impl] = {"largest_ok": lo, "first_failed": hi, "tries": tried,
                                        "capped": hi is None and not self.plan.smoke}
            if lo:
                self.samples.append({"bench": "maxn", "impl": impl, "pin": 0, "n": lo, "value": float(lo),
                                     "unit": "ranks", "ops": 1})
        self.maxn_result = result

    def swapcontext(self):
        if self.want("floors", "swapcontext"):
            self.run("swapcontext",
                     [self.prog("kb_floor_swapcontext"), "--m", str(self.plan.swap_ops), "--reps", str(self.plan.reps)])

    # -- driver ---------------------------------------------------------------

    def detect_peers(self):
        self.py_paths = {}
        try:
            with open(self.prog("kb_python_paths.txt")) as f:
                self.py_paths = dict(line.strip().split("=", 1) for line in f if "=" in line)
        except OSError:
            self.notes.append("Python binding figures skipped: %s not found (build with bench/CMakeLists.txt)"
                              % self.prog("kb_python_paths.txt"))
        if self.py_paths and not self.py_paths.get("accel"):
            self.notes.append("the Python binding's compiled part was not built (python3-dev missing): "
                              "no Python figures")
        self.greenlet_ok = False
        if not os.access(GREENLET_PYTHON, os.X_OK):
            self.notes.append("greenlet peer skipped: %s not found" % GREENLET_PYTHON)
        elif subprocess.run([GREENLET_PYTHON, "-c", "import greenlet"], capture_output=True).returncode != 0:
            self.notes.append("greenlet peer skipped: python3-greenlet is not installed for %s "
                              "(apt-get install python3-greenlet)" % GREENLET_PYTHON)
        else:
            self.greenlet_ok = True
        if not self.have("kb_peer_simgrid"):
            self.notes.append("SimGrid peer skipped: kb_peer_simgrid was not built (libsimgrid-dev or a C++ "
                              "compiler missing at configure time: apt-get install libsimgrid-dev g++)")

    def wait_quiet(self):
        limit = self.args.quiet_wait
        if limit <= 0:
            return
        threshold = max(0.5, 0.5 * (os.cpu_count() or 1))
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            la = loadavg()
            if la and la[0] <= threshold:
                return
            print("  waiting for a quiet machine (load %.2f > %.2f)..." % (la[0], threshold), flush=True)
            time.sleep(15)
        self.notes.append("the machine did not get quiet within %ds (1-min load %.2f): figures are noisy"
                          % (limit, loadavg()[0]))

    def go(self):
        for name in ("kb_bench", "kb_floor_ring", "kb_floor_swapcontext"):
            if not self.have(name):
                sys.exit("run.py: %s not found in %s: build first (make -f bench/bench.mk bench-build)"
                         % (name, self.bindir))
        if self.condvar_bindir and not os.access(os.path.join(self.condvar_bindir, "kb_bench"), os.X_OK):
            sys.exit("run.py: kb_bench not found in %s (--condvar-bindir)" % self.condvar_bindir)
        if self.baseline_bindir and not os.access(os.path.join(self.baseline_bindir, "kb_bench"), os.X_OK):
            sys.exit("run.py: kb_bench not found in %s (--baseline-bindir)" % self.baseline_bindir)
        self.detect_peers()
        self.maxn_result = None
        self.wait_quiet()
        started = datetime.datetime.now(datetime.timezone.utc)
        load_start = loadavg()
        machine = machine_info()  # before the jobs: the commit that was built
        t0 = time.monotonic()
        print("libkbthreads benchmarks (%s, %d repetitions per figure)" %
              ("smoke" if self.plan.smoke else "full", self.plan.reps), flush=True)
        for note in self.notes:
            print("  note: " + note)
        self.swapcontext()
        for n in self.plan.ns:
            self.yield_family(n)
        for n in self.plan.ns:
            self.drain_family(n)
        for n in self.plan.ns:
            self.spawn_family(n)
        for n in run_idle.sim_ns(self.plan):
            run_idle.sim_family(self, n)
        sim_mismatch = run_idle.check_checksums(self)
        run_idle.hog_section(self)
        run_idle.pair_section(self)
        self.memory()
        self.maxn()
        duration = time.monotonic() - t0
        self.result = {
            "kind": "smoke" if self.plan.smoke else "bench",
            "started": started.isoformat(timespec="seconds"),
            "duration_s": round(duration, 1),
            "load_start": load_start,
            "load_end": loadavg(),
            "machine": machine,
            "build_type": build_type(self.bindir),
            "condvar_bindir": self.condvar_bindir,
            "baseline_bindir": self.baseline_bindir,
            "idle": {"load_per_cpu": run_idle.IDLE_LOAD_PER_CPU, "max_wait_s": run_idle.IDLE_MAX_WAIT,
                     "budget_s": run_idle.IDLE_BUDGET, "waited_s": round(self.gate.spent, 1),
                     "waiting": self.gate.enabled, "hog_cpu": run_idle.other_cpu(),
                     "taskset_cpu": min(os.sched_getaffinity(0))},
            "sim": {"ns": run_idle.sim_ns(self.plan), "loaded_ns": run_idle.loaded_ns(self.plan),
                    "m": {str(n): run_idle.sim_m(self.plan, n) for n in run_idle.sim_ns(self.plan)},
                    "ops_per_step": run_idle.SIM_OPS_PER_STEP,
                    "checksums": self.sim_checksums, "mismatch": sim_mismatch},
            "params": {
                "reps": self.plan.reps, "ns": self.plan.ns, "spread_ns": self.plan.spread_ns,
                "kb_ops": self.plan.kb_ops,
                "ring_ops": self.plan.ring_ops, "cond_budget": self.plan.cond_budget,
                "greenlet_ops": self.plan.greenlet_ops, "simgrid_ops": self.plan.simgrid_ops,
                "spawn_budget": self.plan.spawn_budget, "mem_n": self.plan.mem_n, "small_stack": SMALL_STACK,
                "swap_ops": self.plan.swap_ops, "retry_busy": self.args.retry_busy,
                "retry_budget": self.args.retry_budget,
            },
            "info": self.info,
            "notes": self.notes,
            "failures": self.failures,
            "maxn": self.maxn_result,
            "jobs": self.jobs,
            "busy_share": BUSY_SHARE,
            "retry_seconds": round(self.retry_spent, 1),
            "summary": summarize(self.samples),
            "samples": self.samples,
        }
        return self.result


def summarize(samples):
    groups = {}
    for s in samples:
        key = (s["bench"], s["impl"], s["pin"], s["n"], s["unit"])
        groups.setdefault(key, []).append(s)
    out = []
    for (bench, impl, pin, n, unit), ss in sorted(groups.items()):
        values = [s["value"] for s in ss]
        out.append({"bench": bench, "impl": impl, "pin": pin, "n": n, "unit": unit,
                    "median": statistics.median(values), "min": min(values), "max": max(values),
                    "count": len(values), "values": values,
                    "others_cpu": max(s.get("others_cpu", 0.0) for s in ss),
                    "load1": max(s.get("load1", 0.0) for s in ss),
                    "flagged": any(s.get("flagged") for s in ss)})
    return out


def print_table(result):
    rows = result["summary"]
    print()
    print("%-13s %-22s %3s %6s %12s %12s %12s %4s %7s" % ("bench", "impl", "pin", "N", "median", "min", "max",
                                                          "runs", "others"))
    print("-" * 100)
    for r in rows:
        med, lo, hi = (fmt_val(r[k], r["unit"], terminal=True) for k in ("median", "min", "max"))
        print("%-13s %-22s %3d %6d %12s %12s %12s %4d %6.0f%%" % (
            r["bench"], r["impl"], r["pin"], r["n"], med, lo, hi, r["count"], 100 * r.get("others_cpu", 0)))
    # The headline: ns per yield / handoff against N.
    ns = result["params"]["ns"]
    series = {}
    for r in rows:
        if r["bench"] in ("yield", "handoff"):
            series.setdefault((r["bench"], r["impl"], r["pin"]), {})[r["n"]] = r["median"]
    if series:
        print()
        print("median ns per yield (kbthreads, greenlet, simgrid) or per handoff (floors), by N")
        print("%-34s" % "" + "".join("%10d" % n for n in ns))
        for (bench, impl, pin), by_n in sorted(series.items(), key=lambda kv: (kv[0][0] != "yield", kv[0])):
            label = "%s %s%s" % (impl, bench, " pinned" if pin else "")
            print("%-34s" % label + "".join("%10s" % ("%.0f" % by_n[n] if n in by_n else "-") for n in ns))
    if result.get("maxn"):
        for impl, r in result["maxn"]["by_stack"].items():
            if r["capped"]:
                how = " (search capped at %d to leave pids for the machine)" % result["maxn"]["cap"]
            elif r["first_failed"]:
                failed = [t for t in r["tries"] if t["n"] == r["first_failed"]]
                how = ", N=%s failed: %s" % (r["first_failed"], failed[-1]["detail"] if failed else "")
            else:
                how = " (smoke: one try)"
            print("largest N that ran (%s): %d%s" % (impl, r["largest_ok"], how))
    for note in result["notes"]:
        print("note: " + note)
    for f in result["failures"]:
        print("FAILED: " + f)
    flagged = [j for j in result["jobs"] if j.get("flag")]
    print("%d job(s) flagged (started on or shared a busy machine, after retries); the idle gate waited %.0f s"
          % (len(flagged), result["idle"]["waited_s"]))
    for j in flagged:
        print("  flagged: %s: %s" % (j["label"], j["flag"]))
    busy = [j for j in result["jobs"] if j["others_cpu"] > result["busy_share"] and not j.get("deliberate")]
    print("duration %.0f s, load average %s -> %s; %d of %d jobs ran while other processes used more than %d%% "
          "of the CPUs (column 'others')" % (result["duration_s"], result["load_start"], result["load_end"],
                                              len(busy), len(result["jobs"]), 100 * result["busy_share"]))


def write_results(result, outdir):
    os.makedirs(outdir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.join(outdir, "%s-%s" % (result["kind"], stamp))
    result["file"] = os.path.basename(base) + ".json"
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(base + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "impl", "pin", "n", "unit", "median", "min", "max", "runs"])
        for r in result["summary"]:
            w.writerow([r["bench"], r["impl"], r["pin"], r["n"], r["unit"], "%.3f" % r["median"], "%.3f" % r["min"],
                        "%.3f" % r["max"], r["count"]])
    for ext in (".json", ".csv"):
        shutil.copyfile(base + ext, os.path.join(outdir, "%s-latest%s" % (result["kind"], ext)))
    print("results: %s.json, %s.csv (and %s-latest.*)" % (base, base, result["kind"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bindir", required=True, help="the build folder holding kb_bench and friends")
    ap.add_argument("--condvar-bindir", default=None,
                    help="a build of kb_bench against the KB_BATON=condvar library: its yield, wait and "
                         "spawn jobs run beside the futex ones (impl kbthreads_condvar)")
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--smoke", action="store_true", help="a seconds-long run proving every benchmark runs")
    ap.add_argument("--reps", type=int, default=0, help="repetitions per figure (default 7, smoke 2)")
    ap.add_argument("--only", nargs="*", default=None,
                    help="run only these families: kbthreads floors peers yield wait collective spawn mem maxn "
                         "futex sem cond swapcontext greenlet simgrid spread (the --spread jobs) join (timed "
                         "kb_join) python (the binding) taskset pin (the best-of-configurations jobs) sim (the "
                         "simulation-shaped job) hog pair (the loaded sections); the condvar baton's jobs go "
                         "with the futex ones")
    ap.add_argument("--quiet-wait", type=int, default=0,
                    help="first wait up to this many seconds for the 1-minute load to drop")
    ap.add_argument("--no-maxn", action="store_true", help="skip the largest-N search")
    ap.add_argument("--retry-budget", type=int, default=240,
                    help="seconds the whole run may spend on such re-runs (default 240)")
    ap.add_argument("--retry-busy", type=int, default=None,
                    help="measure a job again up to this many times when other processes used more than "
                         "%d%%%% of the CPUs during it (default 2, smoke 0)" % (100 * BUSY_SHARE))
    ap.add_argument("--maxn-cap", type=int, default=65536)
    ap.add_argument("--baseline-bindir", default=None,
                    help="a build of kb_bench (and kb_python_paths.txt) against an older library, e.g. main's "
                         "(bench/bench.mk BENCH_BASELINE_SRC): its sim jobs and the hog and pair sections run "
                         "beside the new ones (impls kbthreads_baseline*, kbthreads_py_baseline*)")
    ap.add_argument("--no-idle-wait", action="store_true",
                    help="record the load at each job's start but never wait for an idle machine")
    args = ap.parse_args()
    if args.retry_busy is None:
        args.retry_busy = 0 if args.smoke else 2
    if args.reps and not args.smoke and args.reps < 5:
        print("run.py: note: fewer than 5 repetitions per figure", file=sys.stderr)
    runner = Runner(args)
    result = runner.go()
    print_table(result)
    write_results(result, args.results)
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
