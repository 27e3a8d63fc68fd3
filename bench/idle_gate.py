# SPDX-License-Identifier: MIT
"""Issue 20's parts of bench/run.py: the idle gate before every job, and
the jobs it added (the library's best configuration beside its default, the
simulation-shaped job, a CPU hog on the other CPU, two simulations side by
side, each against an older build with --baseline-bindir).

The idle gate. The 1-minute load average is what a user reads, but this
suite raises it itself (a spawn of 4096 yield-looking ranks takes it to 15
within a minute, and it decays with a 60 s time constant), so waiting for it
alone would stall the run for minutes after every big job. Before each job
the gate reads both the load average and procs_running of /proc/stat (the
runnable tasks right now: the median of 5 samples 10 ms apart, less this
script itself), and lets the job start when the load is at most
IDLE_LOAD_PER_CPU per CPU or nothing else is runnable; otherwise it waits,
up to IDLE_MAX_WAIT seconds per job and IDLE_BUDGET seconds per run. The
job records both. A job that started with the load above the limit while
other tasks were runnable is flagged and measured again, like one during
which other processes took more than BUSY_SHARE of the CPUs (bench_shared.py).
"""
import math
import os
import signal
import statistics
import subprocess
import time

IDLE_LOAD_PER_CPU = 0.3
IDLE_MAX_WAIT = 30  # seconds one job may wait for an idle machine
IDLE_BUDGET = 300  # seconds the whole run may spend waiting
# The Ns of the best-of-configurations comparison (every N of the run), of
# the simulation-shaped job and of the deliberately loaded sections.
SIM_NS_FULL = [1, 2, 8, 64, 512]
SIM_NS_SMOKE = [1, 8]
LOADED_NS_FULL = [1, 2, 8, 64]
LOADED_NS_SMOKE = [8]
# Operations (waits + collectives + yields) per repetition of the sim job.
SIM_OPS_FULL = 12000
SIM_OPS_SMOKE = 600
SIM_OPS_PER_STEP = 6


def loadavg1() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def procs_running() -> int:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 1


def others_runnable(samples: int = 5, gap: float = 0.01) -> int:
    """Runnable tasks other than this script (median of a few samples)."""
    seen = []
    for i in range(samples):
        if i:
            time.sleep(gap)
        seen.append(procs_running() - 1)
    return max(0, int(statistics.median(seen)))


class IdleGate:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.ncpu = os.cpu_count() or 1
        self.limit = IDLE_LOAD_PER_CPU * self.ncpu
        self.spent = 0.0

    def before_job(self, wait: bool = True) -> dict:
        """Wait (bounded) for an idle machine; return what the job started on."""
        waited = 0.0  # seconds slept (the sampling itself takes ~40 ms a job)
        while True:
            load, others = loadavg1(), others_runnable(5 if self.enabled else 1)
            idle = load <= self.limit or others == 0
            if (idle or not wait or not self.enabled or waited >= IDLE_MAX_WAIT
                    or self.spent + waited >= IDLE_BUDGET):
                break
            time.sleep(2)
            waited += 2
        self.spent += waited
        return {"load1": round(load, 2), "others_runnable": others, "waited_s": round(waited, 1),
                "started_busy": not idle}


def sim_m(plan, n: int) -> int:
    """Steps per repetition of the sim job at N (the same for C, Python and
    greenlet: the checksum covers the whole repetition)."""
    ops = SIM_OPS_SMOKE if plan.smoke else SIM_OPS_FULL
    return max(4, math.ceil(ops / (SIM_OPS_PER_STEP * n)))


def sim_ns(plan) -> list:
    return SIM_NS_SMOKE if plan.smoke else SIM_NS_FULL


def loaded_ns(plan) -> list:
    return LOADED_NS_SMOKE if plan.smoke else LOADED_NS_FULL


def pin_cpu0() -> None:
    """preexec_fn of the taskset jobs: the whole process on the first CPU it
    may use (as `taskset -c 0` does)."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def other_cpu() -> int:
    """The CPU the hog runs on: the last one this process may use (the
    taskset jobs use the first)."""
    return max(os.sched_getaffinity(0))


class Hog:
    """A busy loop (/bin/sh `while :; do :; done`) pinned to other_cpu(),
    started before a job and stopped (by its pid) after it."""

    def __init__(self) -> None:
        self.cpu = other_cpu()
        self.p = None

    def __enter__(self) -> "Hog":
        cpu = self.cpu
        self.p = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"],
                                  preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        time.sleep(0.3)  # let it take its CPU before the job starts
        return self

    def __exit__(self, *exc) -> bool:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        return False


def baseline_python(runner):
    """(library, accel or None, binding folder) of the --baseline-bindir build, or None."""
    if not runner.baseline_bindir:
        return None
    paths = {}
    try:
        with open(os.path.join(runner.baseline_bindir, "kb_python_paths.txt")) as f:
            paths = dict(line.strip().split("=", 1) for line in f if "=" in line)
    except OSError:
        return None
    if not paths.get("library") or not paths.get("binding"):
        return None
    return paths["library"], paths.get("accel"), paths["binding"]


# -- the jobs --------------------------------------------------------------

def taskset_job(runner, mode: str, n: int, argv: list) -> None:
    """The default options with the whole process on one CPU (impl kbthreads_taskset)."""
    if runner.want("kbthreads", "taskset", mode):
        runner.run("kbthreads %s N=%d taskset" % (mode, n), argv, preexec_fn=pin_cpu0,
                   rename={"kbthreads": "kbthreads_taskset"})


def pinned_wait_job(runner, n: int, argv: list) -> None:
    """--pin for the wait loop (the yield loop has had it all along)."""
    if runner.want("kbthreads", "pin", "wait"):
        runner.run("kbthreads wait N=%d pinned" % n, argv + ["--pin"])


def best_of_ns(runner) -> list:
    """The Ns of the taskset and pinned-wait jobs: every N of a full run, the spread N of a smoke run."""
    return runner.plan.spread_ns


def sim_argv(runner, prog_dir: str, n: int, m: int, extra: tuple = ()) -> list:
    return [os.path.join(prog_dir, "kb_bench"), "sim", "--n", str(n), "--m", str(m),
            "--reps", str(runner.plan.reps)] + list(extra)


def py_sim_argv(runner, n: int, m: int, lib: str, accel, binding=None, impl=None) -> list:
    argv = [runner.python, os.path.join(runner.here, "py_bench.py"), "sim", "--n", str(n), "--m", str(m),
            "--reps", str(runner.plan.reps), "--lib", lib]
    argv += ["--accel", accel] if accel else ["--ctypes"]
    if binding:
        argv += ["--binding", binding, "--impl", impl]
    return argv


def record_checksum(runner, impl: str, n: int, kbi: list) -> None:
    for key, value in kbi:
        if key == "sim_checksum":
            runner.sim_checksums.setdefault(str(n), {})[impl] = value


def sim_family(runner, n: int) -> None:
    """The simulation-shaped job at N: C (default options; the baseline
    build's), Python through the binding (the baseline's binding too), the
    greenlet peer; the same M for all, so the checksums compare."""
    if not runner.want("sim"):
        return
    m = sim_m(runner.plan, n)
    _, kbi = runner.run("sim N=%d C" % n, sim_argv(runner, runner.bindir, n, m))
    record_checksum(runner, "kbthreads", n, kbi)
    if runner.baseline_bindir:
        _, kbi = runner.run("sim N=%d C baseline" % n, sim_argv(runner, runner.baseline_bindir, n, m),
                            rename={"kbthreads": "kbthreads_baseline"}, quiet_fail=True)
        record_checksum(runner, "kbthreads_baseline", n, kbi)
    lib = runner.py_paths.get("library")
    if lib:
        impl = "kbthreads_py" if runner.py_paths.get("accel") else "kbthreads_py_ctypes"
        _, kbi = runner.run("sim N=%d python" % n, py_sim_argv(runner, n, m, lib, runner.py_paths.get("accel")))
        record_checksum(runner, impl, n, kbi)
    base = baseline_python(runner)
    if base:
        _, kbi = runner.run("sim N=%d python baseline" % n,
                            py_sim_argv(runner, n, m, base[0], base[1], base[2], "kbthreads_py_baseline"),
                            quiet_fail=True)
        record_checksum(runner, "kbthreads_py_baseline", n, kbi)
    if runner.greenlet_ok:
        _, kbi = runner.run("sim N=%d greenlet" % n,
                            [runner.python, os.path.join(runner.here, "peer_greenlet.py"), "sim", "--n", str(n),
                             "--m", str(m), "--reps", str(runner.plan.reps)])
        record_checksum(runner, "greenlet", n, kbi)


def check_checksums(runner) -> list:
    """Every scheduler must have seen the same event order at each N."""
    bad = []
    for n, by_impl in sorted(runner.sim_checksums.items(), key=lambda kv: int(kv[0])):
        if len(set(by_impl.values())) > 1:
            bad.append(int(n))
            runner.failures.append("sim N=%s: the event order differs between schedulers: %s" % (
                n, ", ".join("%s %s" % kv for kv in sorted(by_impl.items()))))
    return bad


def hog_section(runner) -> None:
    """Default yield and wait jobs with a busy loop pinned to the other CPU,
    the baseline build's beside them (impls kbthreads_hog, kbthreads_baseline_hog)."""
    if not runner.want("hog"):
        return
    p = runner.plan
    builds = [(runner.bindir, "kbthreads_hog", "")]
    if runner.baseline_bindir:
        builds.append((runner.baseline_bindir, "kbthreads_baseline_hog", " baseline"))
    runner.gate.before_job()  # an idle machine before the hog starts
    with Hog():
        for n in loaded_ns(p):
            for mode in ("yield", "wait"):
                m = p.m_for(p.kb_ops, n)
                for prog_dir, impl, tag in builds:
                    runner.run("hog: kbthreads %s N=%d%s" % (mode, n, tag),
                               [os.path.join(prog_dir, "kb_bench"), mode, "--n", str(n), "--m", str(m),
                                "--reps", str(p.reps)],
                               rename={"kbthreads": impl}, deliberate="hog", quiet_fail=bool(tag))


def pair_section(runner) -> None:
    """Two copies of the sim job started together (C; Python through the
    binding), the baseline build's beside them (impls *_pair)."""
    if not runner.want("pair"):
        return
    p = runner.plan
    jobs = []
    for n in loaded_ns(p):
        m = sim_m(p, n)
        jobs.append(("C sim N=%d" % n, sim_argv(runner, runner.bindir, n, m), {"kbthreads": "kbthreads_pair"}))
        if runner.baseline_bindir:
            jobs.append(("C sim N=%d baseline" % n, sim_argv(runner, runner.baseline_bindir, n, m),
                         {"kbthreads": "kbthreads_baseline_pair"}))
        lib = runner.py_paths.get("library")
        if lib:
            impl = "kbthreads_py" if runner.py_paths.get("accel") else "kbthreads_py_ctypes"
            jobs.append(("python sim N=%d" % n, py_sim_argv(runner, n, m, lib, runner.py_paths.get("accel")),
                         {impl: impl + "_pair"}))
        base = baseline_python(runner)
        if base:
            jobs.append(("python sim N=%d baseline" % n,
                         py_sim_argv(runner, n, m, base[0], base[1], base[2], "kbthreads_py_baseline"),
                         {"kbthreads_py_baseline": "kbthreads_py_baseline_pair"}))
    for label, argv, rename in jobs:
        runner.run("pair: " + label, argv, copies=2, rename=rename, deliberate="pair",
                   quiet_fail="baseline" in label)
