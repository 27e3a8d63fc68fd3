#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kbthreads-dump tests: one behaviour per --case.

Usage: dump_test.py --dump tools/kbthreads-dump --case CASE [--program kb_dump_target]
                    [--thread-fallbacks]

  stopped-program    kb_dump_target stopped at its known point (see
                     kb_dump_target.c): spawn A with a rank holding the baton
                     and the others in kb_wait, kb_barrier and kb_yield, and
                     a process context idle between joins; every row right.
                     --strip-all runs a copy of the program with every symbol
                     stripped (the descriptor is found by its section).
  no-such-process    a PID above the kernel's pid_max: a clear error.
  not-a-pid          "abc", "0", "-5": a usage error.
  without-library    a process that does not use libkbthreads: a clear error.
  permission-refused a process the dump may not read (root: the dump runs as
                     nobody; otherwise PID 1 if another user owns it).
  runs-change        the registry of live runs changes between the dump's
                     read and its check (a spawn runs on another thread of
                     the program at that moment): with --retries 0 it says so
                     and prints no run; with --retries 1 it reads again and
                     prints the right runs.

--thread-fallbacks: the library was built with src/system_posix.c
(KB_PORTABLE=ON, or not Linux) and records no kernel thread id (0), which is
all the dump has to find a rank's thread (/proc/PID/task/TID): each rank's
row then shows no thread ("-", "(no thread)") but its right state, and the
baton lines LWP 0. stopped-program and runs-change check that instead.

Exit 0 = pass, 1 = fail, 77 = cannot be run here (only permission-refused
when neither way to be refused exists).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdb_test import SKIP, Failure, check  # noqa: E402  (the same helpers as the gdb test)


class Target(object):
    """kb_dump_target, running, stopped at its known point."""

    def __init__(self, program):
        self.p = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if line != "ready\n":
            self.p.kill()
            raise Failure("kb_dump_target did not get ready (said %r)" % line)
        self.pid = self.p.pid

    def command(self, cmd, answer=None):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        if answer is not None:
            line = self.p.stdout.readline()
            check(line == answer + "\n", "kb_dump_target answered %r to %r" % (line, cmd))

    def finish(self):
        self.command("go")
        out, _ = self.p.communicate(timeout=120)
        check(self.p.returncode == 0 and "kb_dump_target: ok" in out,
              "kb_dump_target failed (exit %d)" % self.p.returncode, out)


def run_dump(dump, args, python=sys.executable, **kw):
    p = subprocess.run([python, dump] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120, **kw)
    return p.returncode, p.stdout, p.stderr


RUN_RE = re.compile(r"^run (0x[0-9a-f]+): ctx (0x[0-9a-f]+), (\d+) ranks, (\d+) live, cancel mode (\w+)(.*)$")
ROW_RE = re.compile(r"^   +(\d+)  +(\S+)  (\(no thread\)|\(exited\)|\S+) +(.*)$")


def parse(out):
    """[{header fields, baton, pending, ranks: {rank: (lwp, name, state)}}]"""
    runs = []
    for line in out.splitlines():
        m = RUN_RE.match(line)
        if m:
            runs.append({"nprocs": int(m.group(3)), "nlive": int(m.group(4)), "mode": m.group(5),
                         "flags": m.group(6), "ranks": {}, "baton": None, "pending": None})
        elif runs and line.startswith("  baton: "):
            runs[-1]["baton"] = line[len("  baton: "):]
        elif runs and line.startswith("  pending: "):
            runs[-1]["pending"] = line[len("  pending: "):]
        elif runs:
            m = ROW_RE.match(line)
            if m:
                runs[-1]["ranks"][int(m.group(1))] = (m.group(2), m.group(3), m.group(4))
    return runs


def thread_names(pid):
    """LWP -> name of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            out[tid] = f.read().strip()
    return out


def rank_thread_ok(row, rank, names, fallbacks):
    """Rank rank's row (lwp, name, state) names its thread: the live thread of
    that LWP, named kb-rank-<rank>; without thread ids, no thread at all."""
    lwp, name, _ = row
    if fallbacks:
        return lwp == "-" and name == "(no thread)"
    return names.get(lwp) == "kb-rank-%d" % rank == name


def check_stopped_dump(rc, out, err, pid, program, fallbacks):
    check(rc == 0, "kbthreads-dump exited %d: %s" % (rc, err), out)
    check(err == "", "kbthreads-dump wrote to stderr: %s" % err, out)
    first = out.splitlines()[0] if out else ""
    check(re.match(r"^process %d \(%s\): libkbthreads /\S+$" % (pid, re.escape(os.path.basename(program)[:15])),
                   first), "first line %r does not name the process and where libkbthreads is" % first, out)
    runs = parse(out)
    check(len(runs) == 2, "%d runs listed, expected spawn A and the process context" % len(runs), out)
    a = [r for r in runs if r["nprocs"] == 4]
    p = [r for r in runs if r["nprocs"] == 2]
    check(len(a) == 1 and len(p) == 1, "expected one 4-rank and one 2-rank run", out)
    a, p = a[0], p[0]
    names = thread_names(pid)
    check(a["nlive"] == 4 and a["mode"] == "UNWIND" and a["flags"] == "", "spawn A's header is wrong", out)
    want = {0: "waiting on handle 7", 1: "in barrier", 2: "ready", 3: "running"}
    for rank, state in want.items():
        check(rank in a["ranks"], "spawn A has no row for rank %d" % rank, out)
        lwp, name, got = a["ranks"][rank]
        check(got == state, "spawn A rank %d: state %r, expected %r" % (rank, got, state), out)
        check(rank_thread_ok(a["ranks"][rank], rank, names, fallbacks),
              "spawn A rank %d: LWP %s named %r, the process says %r" % (rank, lwp, name, names.get(lwp)), out)
    holder_lwp = "0" if fallbacks else a["ranks"][3][0]
    check(a["baton"] == "rank 3 (LWP %s)" % holder_lwp, "spawn A's baton line %r" % a["baton"], out)
    check(a["pending"] == "1 worker wait, 0 collectives", "spawn A's pending line %r" % a["pending"], out)
    for rank in (0, 1):
        lwp, name, got = p["ranks"][rank]
        check(got == "ready" and rank_thread_ok(p["ranks"][rank], rank, names, fallbacks),
              "process context rank %d: %r" % (rank, p["ranks"][rank]), out)
    driver_lwp = 0 if fallbacks else pid
    check(p["baton"].startswith("driver side, idle (no thread is in kb_join; last driver: LWP %d)" % driver_lwp),
          "the process context's baton line %r" % p["baton"], out)
    check(p["pending"] == "0 worker waits, 0 collectives", "the process context's pending line", out)
    check("moved" not in out, "the baton did not move, yet the dump says it did", out)


def case_stopped_program(args, tmp):
    program = args.program
    if args.strip_all:
        program = os.path.join(tmp, os.path.basename(args.program))
        shutil.copyfile(args.program, program)
        os.chmod(program, 0o755)
        subprocess.run([args.strip_tool, "--strip-all", program], check=True)
        syms = subprocess.run(["nm", program], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        check("kb_debug_offsets" not in syms, "the stripped copy still has its symbol table", syms)
    t = Target(program)
    try:
        rc, out, err = run_dump(args.dump, [str(t.pid)])
        check_stopped_dump(rc, out, err, t.pid, program, args.thread_fallbacks)
        # twice: reading does not disturb the process
        rc, out, err = run_dump(args.dump, [str(t.pid)])
        check_stopped_dump(rc, out, err, t.pid, program, args.thread_fallbacks)
    finally:
        t.finish()


def expect_error(rc, out, err, code, pattern):
    check(rc == code, "exit status %d, expected %d (stderr: %s)" % (rc, code, err), out)
    check(out == "", "printed something on stdout although it failed", out)
    check(re.search(pattern, err), "stderr %r does not match %r" % (err, pattern))
    check("Traceback" not in err, "a Python traceback escaped", err)


def case_no_such_process(args, tmp):
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) + 1
    rc, out, err = run_dump(args.dump, [str(pid)])
    expect_error(rc, out, err, 1, r"^kbthreads-dump: no process with PID %d\n$" % pid)


def case_not_a_pid(args, tmp):
    for bad in ("abc", "0", "-5", "12x"):
        rc, out, err = run_dump(args.dump, ["--", bad])
        expect_error(rc, out, err, 2, r"^kbthreads-dump: '%s' is not a process ID\n$" % re.escape(bad))
    rc, out, err = run_dump(args.dump, [])
    check(rc == 2 and "usage: kbthreads-dump" in err, "no argument: exit %d, %r" % (rc, err))


def case_without_library(args, tmp):
    p = subprocess.Popen(["sleep", "60"])
    try:
        rc, out, err = run_dump(args.dump, [str(p.pid)])
        expect_error(rc, out, err, 1, r"^kbthreads-dump: process %d \(sleep\) does not use libkbthreads" % p.pid)
    finally:
        p.kill()
        p.wait()


def case_permission_refused(args, tmp):
    if os.geteuid() == 0:
        # the tool and the module it imports, where nobody can read them
        os.chmod(tmp, 0o755)
        for sub, src in (("tools", args.dump), ("gdb", args.layout_module)):
            os.mkdir(os.path.join(tmp, sub))
            dst = os.path.join(tmp, sub, os.path.basename(src))
            shutil.copyfile(src, dst)
            os.chmod(os.path.join(tmp, sub), 0o755)
            os.chmod(dst, 0o755)
        # the package the launcher runs, beside it as in the source tree
        shutil.copytree(os.path.join(os.path.dirname(args.dump), "kbthreads_tools"),
                        os.path.join(tmp, "tools", "kbthreads_tools"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        dump = os.path.join(tmp, "tools", os.path.basename(args.dump))
        t = Target(args.program)
        try:
            # (the system's python3: another one may live where nobody cannot read)
            rc, out, err = run_dump(dump, [str(t.pid)], python="/usr/bin/python3",
                                    preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
        finally:
            t.finish()
        pid = t.pid
    else:
        st = os.stat("/proc/1")
        if st.st_uid == os.geteuid():
            print("SKIP: not root, and PID 1 is this user's: no process to be refused")
            return SKIP
        pid = 1
        rc, out, err = run_dump(args.dump, [str(pid)])
    expect_error(rc, out, err, 1, r"^kbthreads-dump: permission denied reading the memory map of process %d: "
                 r"run it as the process's user, or as root" % pid)


def case_runs_change(args, tmp):
    t = Target(args.program)
    try:
        for retries, changes in ((0, 1), (1, 1)):
            r_to_dump, w_to_dump = os.pipe()
            r_from_dump, w_from_dump = os.pipe()
            env = dict(os.environ, KBTHREADS_DUMP_TEST_SYNC="%d,%d" % (r_to_dump, w_from_dump))
            p = subprocess.Popen([sys.executable, args.dump, "--retries", str(retries), str(t.pid)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 pass_fds=(r_to_dump, w_from_dump))
            os.close(r_to_dump)
            os.close(w_from_dump)
            passes = 0
            while os.read(r_from_dump, 1) == b"r":
                # the dump has read the runs: change them now, the first `changes` times
                if passes < changes:
                    t.command("spawn", "spawned")
                passes += 1
                os.write(w_to_dump, b"g")
            out, err = p.communicate(timeout=120)
            os.close(r_from_dump)
            os.close(w_to_dump)
            if retries == 0:
                expect_error(p.returncode, out, err, 3,
                             r"^kbthreads-dump: the live runs of process %d changed while they were read, 1 time;"
                             r" try again, or stop the process first" % t.pid)
                check(passes == 1, "with --retries 0 the dump read %d times" % passes)
            else:
                check(passes == 2, "with --retries 1 and one change the dump read %d times, expected 2" % passes)
                check_stopped_dump(p.returncode, out, err, t.pid, args.program, args.thread_fallbacks)
    finally:
        t.finish()


CASES = {
    "stopped-program": case_stopped_program,
    "no-such-process": case_no_such_process,
    "not-a-pid": case_not_a_pid,
    "without-library": case_without_library,
    "permission-refused": case_permission_refused,
    "runs-change": case_runs_change,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--layout-module", help="gdb/kbthreads_gdb.py (permission-refused copies it)")
    ap.add_argument("--program")
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--strip-all", action="store_true")
    ap.add_argument("--strip-tool", default="strip")
    ap.add_argument("--thread-fallbacks", action="store_true",
                    help="the library records no thread id (src/system_posix.c)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb-dump-test-") as tmp:
        try:
            rc = CASES[args.case](args, tmp)
        except Failure as e:
            print("FAIL: %s: %s" % (args.case, e))
            return 1
    if rc == SKIP:
        return SKIP
    print("PASS: %s" % args.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
