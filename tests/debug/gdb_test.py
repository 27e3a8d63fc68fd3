#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The gdb test: debug kb_gdb_target under `gdb -batch` and check what gdb shows.

Usage: gdb_test.py --gdb GDB --program kb_gdb_target --script gdb/kbthreads_gdb.py
                   --library libkbthreads.so [--require-section]
                   [--strip debug|unneeded --soname libkbthreads.so.N] [--layout descriptor]
                   [--thread-fallbacks]

--library is the file that holds the library: the shared library, or the
program itself when it is linked with the static library. With --strip,
the session runs against a copy of the shared library stripped with
`strip --strip-debug` or `strip --strip-unneeded` (found through
LD_LIBRARY_PATH under its SONAME); strip drops the .debug_gdb_scripts
section, so the embedded-script mode does not apply there.

--layout descriptor says the library has no debug info, so the commands
must read the debug descriptor (kb_debug_offsets); then the session also
checks that a descriptor of another version is refused with a clear
message. Without it, the library's own sections decide.

--thread-fallbacks says the library was built with src/system_posix.c
(KB_PORTABLE=ON, or not Linux): it names no thread and records no kernel
thread id (0). Rank threads then carry the program's name, `kb ranks` finds
each rank's thread by its pthread_t, and the driver, having no id, is shown
as "driver (LWP 0)". Each gdb run checks that instead of the kb-rank-<n>
names and the driver's thread.

The same session (three breakpoint stops, see kb_gdb_target.c) runs once for
each way the extension can be loaded:

  source       `source gdb/kbthreads_gdb.py`, with auto-loading off;
  auto-load    gdb's own auto-load of <realpath of the library>-gdb.py from a
               scripts directory (the layout libstdc++ and glib install), with
               `set auto-load safe-path /`;
  section      auto-load of the script embedded in the library's
               .debug_gdb_scripts section (nothing else to load). Checked when
               the library has that section; --require-section makes its
               absence a failure.

Each session must show: `info threads` naming every rank thread kb-rank-<n>,
`kb ranks` mapping each rank to the gdb thread of that name and LWP with the
expected state and baton holder, `kb queues` listing the expected pending
waits and collectives, `kb thread` selecting a rank's thread, and the
program exiting normally. Exit 0 = pass, 1 = fail, 77 = gdb missing (skip).
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

SKIP = 77


class Failure(Exception):
    pass


def check(cond, what, context=""):
    if not cond:
        raise Failure(what + ("\n--- relevant output ---\n" + context if context else ""))


def elf_section_names(path):
    """Section names of an ELF64 little-endian file (enough for x86-64/arm64)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return set()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    names = set()
    for i in range(shnum):
        name_off = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\0", strtab_off + name_off)
        names.add(data[strtab_off + name_off:end].decode("ascii", "replace"))
    return names


# The session. Markers split the output into one part per command.
# Where the descriptor's version is (src/debug_offsets.h: after the 8-byte magic).
POKE_VERSION = "set var *(unsigned int *)((char *)&kb_debug_offsets + 8) = %d"
# The version the library has and the script reads (src/debug_offsets.h), put back after the poke.
DESCRIPTOR_VERSION = 2
# A constant the script copied by hand from src/run.h, changed in the loaded
# script as if it had drifted from the library (KB_SUSP_WAIT is 2).
DRIFT_VALUE = "python _KB_VALUES['KB_SUSP_WAIT'] = %d"


def session_commands(extra_load):
    cmds = ["set pagination off", "set width 0", "set confirm off", "set print thread-events off"]
    cmds += extra_load
    cmds += ["break kbt_gdb_stop", "run"]
    for stop in (1, 2, 3):
        cmds += [
            "echo @@stop%d info-threads\\n" % stop, "info threads",
            "echo @@stop%d kb-ranks\\n" % stop, "kb ranks",
            "echo @@stop%d kb-queues\\n" % stop, "kb queues",
        ]
        if stop == 1:
            cmds += ["echo @@stop1 meta\\n", "print/x (unsigned long)&kbt_gdb_meta",
                     "echo @@stop1 kb-thread-ambiguous\\n", "kb thread 0"]
        if stop == 2:
            cmds += ["echo @@stop2 kb-queues-explicit\\n", "kb queues kbt_gdb_ctx",
                     "echo @@stop2 kb-queues-null\\n", "kb queues 0"]
        if stop == 3:
            cmds += ["echo @@stop3 kb-thread\\n", "kb thread 2 kb_live_runs", "thread",
                     "echo @@stop3 auto-load\\n", "info auto-load python-scripts",
                     "echo @@stop3 shared\\n", "info sharedlibrary",
                     "echo @@stop3 version-mismatch\\n", POKE_VERSION % 99, "kb ranks", POKE_VERSION % DESCRIPTOR_VERSION,
                     "echo @@stop3 value-drift\\n", DRIFT_VALUE % 7, "kb ranks", DRIFT_VALUE % 2]
        cmds += ["echo @@stop%d end\\n" % stop, "continue"]
    cmds += ["echo @@after-exit\\n", "kb ranks", "echo @@done\\n"]
    return cmds


def run_gdb(gdb, program, init_cmds, load_cmds, env):
    argv = [gdb, "-nx", "-batch"]
    for c in init_cmds:
        argv += ["-iex", c]
    for c in session_commands(load_cmds):
        argv += ["-ex", c]
    argv.append(program)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=240)
    return p.returncode, p.stdout.decode("utf-8", "replace"), argv


def run_library_paths(out):
    """The libkbthreads files `info sharedlibrary` listed."""
    return re.findall(r"(/\S*libkbthreads\.so\S*)", out)


def split_parts(out):
    parts, key = {}, "preamble"
    for line in out.splitlines():
        m = re.match(r"^@@(\S+(?: \S+)?)$", line)
        if m:
            key = m.group(1)
            parts.setdefault(key, [])
            continue
        parts.setdefault(key, []).append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


THREAD_RE = re.compile(r'^(\*?)\s+(\d+)\s+Thread 0x[0-9a-f]+ \(LWP (\d+)\) "([^"]*)"', re.M)
RUN_RE = re.compile(r"^run (0x[0-9a-f]+): ctx (0x[0-9a-f]+), (\d+) ranks, (\d+) live, cancel mode (\w+)(.*)$")
ROW_RE = re.compile(r"^ ([ *]) +(\d+) +(\S+) +(\S+) +(\(no thread\)|\S+) +(.*)$")


def parse_threads(text):
    """gdb thread number -> (selected, lwp, name)."""
    return {int(m.group(2)): (m.group(1) == "*", int(m.group(3)), m.group(4))
            for m in THREAD_RE.finditer(text)}


def parse_ranks(text):
    """[{run, ctx, nprocs, nlive, mode, flags, baton, ranks: {rank: row}}]"""
    runs = []
    for line in text.splitlines():
        m = RUN_RE.match(line)
        if m:
            runs.append({"run": m.group(1), "ctx": m.group(2), "nprocs": int(m.group(3)),
                         "nlive": int(m.group(4)), "mode": m.group(5), "flags": m.group(6),
                         "baton": None, "ranks": {}, "pool": [], "pool_len": 0})
            continue
        if not runs:
            continue
        if line.startswith("  baton: "):
            runs[-1]["baton"] = line[len("  baton: "):]
            continue
        m = re.match(r"^  idle in the ctx's pool: (\d+) worker threads?: (.*)$", line)
        if m:
            runs[-1]["pool"] = [int(x) for x in re.findall(r"(?:^|, )(\d+) \(", m.group(2))]
            runs[-1]["pool_len"] = int(m.group(1))
            continue
        m = ROW_RE.match(line)
        if m:
            runs[-1]["ranks"][int(m.group(2))] = {
                "selected": m.group(1) == "*", "thread": m.group(3), "lwp": m.group(4),
                "name": m.group(5), "state": m.group(6)}
    return runs


def parse_queues(text):
    """[(ctx, about, [(handle, note)], [(handle, sip, meta, note)])]"""
    out = []
    section = None
    for line in text.splitlines():
        m = re.match(r"^ctx (0x[0-9a-f]+) \((.*)\)$", line)
        if m:
            out.append((m.group(1), m.group(2), [], []))
            continue
        if line.startswith("  pending worker waits:"):
            section = 2
            continue
        if line.startswith("  pending collectives:"):
            section = 3
            continue
        m = re.match(r"^    \[\d+\] handle (\d+)(?:  sip_id (-?\d+)  meta (0x[0-9a-f]+))?(.*)$", line)
        if m and out:
            if section == 2:
                out[-1][2].append((int(m.group(1)), m.group(4).strip()))
            else:
                out[-1][3].append((int(m.group(1)), int(m.group(2)), m.group(3), m.group(4).strip()))
    return out


def check_thread_names(threads, nranks_min, ctx, fallbacks):
    names = sorted(n for (_, _, n) in threads.values() if n.startswith("kb-rank-"))
    if fallbacks:
        check(names == [], "the library names no thread (--thread-fallbacks), yet info threads shows %r"
              % names, ctx)
        return
    for r in range(nranks_min):
        check("kb-rank-%d" % r in names, "info threads shows no thread named kb-rank-%d" % r, ctx)


def check_rank_threads(run, threads, ctx, fallbacks):
    """Every rank with a thread maps to its own gdb thread, of that name (kb-rank-<n>
    unless the library names none) and LWP."""
    nums = [row["thread"] for row in run["ranks"].values() if row["thread"] != "-"]
    check(len(set(nums)) == len(nums), "kb ranks maps two ranks to one gdb thread: %r" % nums, ctx)
    for r, row in run["ranks"].items():
        if row["thread"] == "-":
            continue
        num = int(row["thread"])
        check(num in threads, "kb ranks names gdb thread %d for rank %d; info threads has no such thread"
              % (num, r), ctx)
        _, lwp, name = threads[num]
        check(fallbacks or name == "kb-rank-%d" % r, "rank %d maps to gdb thread %d named %r, not kb-rank-%d"
              % (r, num, name, r), ctx)
        check(row["name"] == name, "kb ranks shows name %r for thread %d, info threads %r"
              % (row["name"], num, name), ctx)
        check(row["lwp"] == str(lwp), "kb ranks shows LWP %s for thread %d, info threads %d"
              % (row["lwp"], num, lwp), ctx)


def check_pool(run, threads, ctx):
    """Idle pooled workers (if the library pools threads) are live threads
    that run no rank of the run."""
    check(len(run["pool"]) == run["pool_len"], "the pool line lists %d threads but counts %d"
          % (len(run["pool"]), run["pool_len"]), ctx)
    rank_threads = set(row["thread"] for row in run["ranks"].values())
    for num in run["pool"]:
        check(num in threads, "pooled worker thread %d is not in info threads" % num, ctx)
        check(str(num) not in rank_threads, "pooled worker thread %d also runs a rank" % num, ctx)


def expect_states(run, want, ctx):
    for r, state in want.items():
        check(r in run["ranks"], "kb ranks has no row for rank %d" % r, ctx)
        got = run["ranks"][r]["state"]
        check(got == state, "rank %d: state %r, expected %r" % (r, got, state), ctx)


def thread_of(threads, name):
    for num, (_, _, n) in threads.items():
        if n == name:
            return num
    return None


def check_value_drift_refused(text, mode, descriptor):
    """A library whose constants differ from the script's copies is refused
    with the name, both values and where the library's came from, whether
    the layout came from the descriptor or from the debug info."""
    source = r"debug descriptor at 0x[0-9a-f]+" if descriptor else r"debug info"
    check(re.search(r"kb: the libkbthreads %s gives KB_SUSP_WAIT = 2, but this reader expects 7; use the "
                    r"gdb/kbthreads_gdb.py and kbthreads-dump that came with that library" % source, text)
          and "run 0x" not in text,
          "[%s] kb ranks read a library whose KB_SUSP_WAIT differs from the script's instead of refusing it"
          % mode, text)


def check_session(out, mode, descriptor, fallbacks):
    parts = split_parts(out)
    for key in ("stop1 kb-ranks", "stop2 kb-ranks", "stop3 kb-ranks", "done"):
        check(key in parts, "[%s] the session did not reach @@%s" % (mode, key), out)

    # Stop 1: inside rank 4 of spawn A; the process context idle beside it.
    ctx = parts["stop1 info-threads"] + "\n" + parts["stop1 kb-ranks"]
    threads = parse_threads(parts["stop1 info-threads"])
    check_thread_names(threads, 6, ctx, fallbacks)
    selected = [num for num, (sel, _, _) in threads.items() if sel]
    check(len(selected) == 1 and (fallbacks or threads[selected[0]][2] == "kb-rank-4"),
          "stop 1: gdb did not stop in the thread kb-rank-4", ctx)
    runs = parse_ranks(parts["stop1 kb-ranks"])
    check(len(runs) == 2, "stop 1: kb ranks shows %d runs, expected 2 (spawn A and the process context)"
          % len(runs), ctx)
    a = [r for r in runs if r["nprocs"] == 6]
    p = [r for r in runs if r["nprocs"] == 2]
    check(len(a) == 1 and len(p) == 1, "stop 1: expected one 6-rank and one 2-rank run", ctx)
    a, p = a[0], p[0]
    check(a["nlive"] == 5 and a["mode"] == "UNWIND", "stop 1: spawn A header wrong", ctx)
    expect_states(a, {0: "waiting on handle 7", 1: "in barrier", 2: "finished", 3: "ready",
                      4: "running", 5: "not started"}, ctx)
    check_rank_threads(a, threads, ctx, fallbacks)
    check_pool(a, threads, ctx)
    check(a["ranks"][4]["selected"], "stop 1: rank 4 is not marked as the selected thread", ctx)
    check(a["ranks"][4]["thread"] == str(selected[0]),
          "stop 1: rank 4 maps to gdb thread %s, but gdb stopped in thread %d" % (a["ranks"][4]["thread"], selected[0]),
          ctx)
    check(a["baton"] == "rank 4 (thread %s)" % thread_of(threads, "kb-rank-4")
          or a["baton"] == "rank 4 (thread %s)" % a["ranks"][4]["thread"],
          "stop 1: baton line %r, expected rank 4 and its thread" % a["baton"], ctx)
    check(a["baton"] == "rank 4 (thread %s)" % a["ranks"][4]["thread"],
          "stop 1: the baton holder's thread differs from rank 4's row", ctx)
    expect_states(p, {0: "ready", 1: "ready"}, ctx)
    check_rank_threads(p, threads, ctx, fallbacks)
    check(p["baton"] is not None and p["baton"].startswith("driver side, idle"),
          "stop 1: the process context's baton line %r, expected the idle driver side" % p["baton"], ctx)

    qctx = parts["stop1 kb-queues"]
    queues = parse_queues(qctx)
    check(len(queues) == 2, "stop 1: kb queues shows %d ctxs, expected 2" % len(queues), qctx)
    qa = [q for q in queues if q[0] == a["ctx"]]
    qp = [q for q in queues if q[0] == p["ctx"]]
    check(len(qa) == 1 and len(qp) == 1, "stop 1: kb queues does not show both runs' ctxs", qctx)
    qa, qp = qa[0], qp[0]
    check(qa[2] == [(7, "<- rank 0 waiting"), (9, "")],
          "stop 1: pending waits %r, expected 7 (rank 0 waiting) then 9" % (qa[2],), qctx)
    m = re.search(r"= (0x[0-9a-f]+)", parts.get("stop1 meta", ""))
    check(m is not None, "stop 1: could not print &kbt_gdb_meta", parts.get("stop1 meta", ""))
    check(qa[3] == [(11, 3, m.group(1), "")],
          "stop 1: pending collectives %r, expected handle 11, sip_id 3, meta %s" % (qa[3], m.group(1)), qctx)
    check(qp[2] == [] and qp[3] == [], "stop 1: the process context's queues are not empty", qctx)
    check("2 spawns are live" in parts.get("stop1 kb-thread-ambiguous", ""),
          "stop 1: `kb thread 0` with two live runs did not ask for the run",
          parts.get("stop1 kb-thread-ambiguous", ""))

    # Stop 2: the driver, inside the engine's wait for handle 7.
    ctx = parts["stop2 info-threads"] + "\n" + parts["stop2 kb-ranks"]
    threads = parse_threads(parts["stop2 info-threads"])
    selected = [num for num, (sel, _, _) in threads.items() if sel]
    check(len(selected) == 1 and not threads[selected[0]][2].startswith("kb-rank-"),
          "stop 2: gdb did not stop on the driver thread", ctx)
    runs = parse_ranks(parts["stop2 kb-ranks"])
    a = [r for r in runs if r["nprocs"] == 6]
    check(len(a) == 1, "stop 2: spawn A is not listed", ctx)
    a = a[0]
    expect_states(a, {0: "waiting on handle 7", 1: "in barrier", 2: "finished", 3: "ready", 4: "ready",
                      5: "ready"}, ctx)
    check_rank_threads(a, threads, ctx, fallbacks)
    drv = selected[0]
    check(str(drv) not in [row["thread"] for row in a["ranks"].values()],
          "stop 2: gdb stopped on the driver, thread %d, yet kb ranks gives it a rank" % drv, ctx)
    # The driver is found by its kernel thread id only: without one, its LWP is 0.
    want_baton = "driver (LWP 0)" if fallbacks else "driver (thread %d, LWP %d)" % (drv, threads[drv][1])
    check(a["baton"] is not None and a["baton"].startswith(want_baton),
          "stop 2: baton line %r, expected the driver (thread %d)" % (a["baton"], drv), ctx)
    for key in ("stop2 kb-queues", "stop2 kb-queues-explicit"):
        queues = [q for q in parse_queues(parts[key]) if q[0] == a["ctx"]]
        check(len(queues) == 1, "stop 2: %s does not show spawn A's ctx" % key, parts[key])
        check(queues[0][2] == [(9, "")], "stop 2: %s: pending waits %r, expected [9] (7 was popped)"
              % (key, queues[0][2]), parts[key])
        check([c[:2] for c in queues[0][3]] == [(11, 3)], "stop 2: %s: collectives %r" % (key, queues[0][3]),
              parts[key])
    check("kb: 0 is a NULL ctx" in parts.get("stop2 kb-queues-null", ""),
          "stop 2: `kb queues 0` did not refuse the NULL ctx", parts.get("stop2 kb-queues-null", ""))

    # Stop 3: rank 1's cleanup handler while spawn B is being cancelled.
    ctx = parts["stop3 info-threads"] + "\n" + parts["stop3 kb-ranks"]
    threads = parse_threads(parts["stop3 info-threads"])
    runs = parse_ranks(parts["stop3 kb-ranks"])
    b = [r for r in runs if r["nprocs"] == 4]
    check(len(b) == 1, "stop 3: spawn B is not listed", ctx)
    b = b[0]
    expect_states(b, {0: "cancelled", 1: "running (unwinding after cancel)", 2: "waiting on handle 21",
                      3: "failed (code 5: boom)"}, ctx)
    check(b["ranks"][0]["thread"] == "-" and b["ranks"][3]["thread"] == "-",
          "stop 3: ranks 0 and 3 unwound and were joined; they should have no thread", ctx)
    check_rank_threads(b, threads, ctx, fallbacks)
    check_pool(b, threads, ctx)
    check(b["baton"] == "rank 1 (thread %s)" % b["ranks"][1]["thread"],
          "stop 3: baton line %r" % b["baton"], ctx)
    queues = [q for q in parse_queues(parts["stop3 kb-queues"]) if q[0] == b["ctx"]]
    check(len(queues) == 1 and queues[0][2] == [(21, "<- rank 2 waiting")] and queues[0][3] == [],
          "stop 3: queues wrong (expected wait 21 with rank 2 waiting, no collectives)",
          parts["stop3 kb-queues"])
    kt = parts.get("stop3 kb-thread", "")
    want = b["ranks"][2]["thread"]
    current = r"Current thread is %s \(Thread 0x[0-9a-f]+ \(LWP %s\)\)" % (want, b["ranks"][2]["lwp"])
    check(re.search(current, kt),
          "stop 3: `kb thread 2 kb_live_runs` (the newest run: spawn B) did not select gdb thread %s" % want,
          kt)

    mismatch = parts.get("stop3 version-mismatch", "")
    if descriptor:
        check(re.search(r"kb: the libkbthreads debug descriptor at 0x[0-9a-f]+ is version 99, but this reader "
                        r"knows version %d only" % DESCRIPTOR_VERSION, mismatch) and "run 0x" not in mismatch,
              "[%s] kb ranks read a descriptor of version 99 instead of refusing it" % mode, mismatch)
    else:
        check(len(parse_ranks(mismatch)) == 2,
              "[%s] with debug info, kb ranks should not depend on the descriptor" % mode, mismatch)

    check_value_drift_refused(parts.get("stop3 value-drift", ""), mode, descriptor)

    check("kb_gdb_target: ok" in out, "[%s] the program did not finish its own checks" % mode, out)
    check(re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out),
          "[%s] the program did not exit normally" % mode, out)
    check("kb: the program is not running" in parts.get("after-exit", ""),
          "[%s] kb ranks after exit did not say the program is not running" % mode,
          parts.get("after-exit", ""))
    check("Traceback" not in out and "Python Exception" not in out,
          "[%s] a Python exception escaped the extension" % mode, out)
    return parts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gdb", default="")
    ap.add_argument("--program", required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--require-section", action="store_true")
    ap.add_argument("--strip", choices=["debug", "unneeded"])
    ap.add_argument("--soname", help="with --strip: the name the program looks for")
    ap.add_argument("--strip-tool", default="strip")
    ap.add_argument("--layout", choices=["auto", "descriptor"], default="auto")
    ap.add_argument("--keep", help="directory to write each session's output to")
    ap.add_argument("--thread-fallbacks", action="store_true",
                    help="the library names no thread and records no thread id (src/system_posix.c)")
    args = ap.parse_args()

    gdb = args.gdb or shutil.which("gdb")
    if not gdb or not os.access(gdb, os.X_OK):
        print("SKIP: gdb not found; install it (Debian: apt-get install gdb) to run the gdb test")
        return SKIP
    probe = subprocess.run([gdb, "-nx", "-batch", "-ex", "python print('kb-python-ok')"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if b"kb-python-ok" not in probe.stdout:
        print("FAIL: %s has no Python support; the kb commands need it" % gdb)
        return 1

    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kb-gdb-test-") as tmp:
        library = os.path.realpath(args.library)
        if args.strip:
            libdir = os.path.join(tmp, "lib")
            os.mkdir(libdir)
            copy = os.path.join(libdir, args.soname or os.path.basename(library))
            shutil.copyfile(library, copy)
            subprocess.run([args.strip_tool, "--strip-" + args.strip, copy], check=True)
            library = copy
            env["LD_LIBRARY_PATH"] = libdir
        sections = elf_section_names(library)
        has_section = ".debug_gdb_scripts" in sections
        descriptor = args.layout == "descriptor" or ".debug_info" not in sections
        check_sections = args.strip is not None and (".debug_info" in sections or ".kb_debug" not in sections)
        if check_sections:
            print("FAIL: the stripped copy still has debug info, or lost the .kb_debug section")
            return 1
        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        autodir = os.path.join(tmp, "auto-load")
        target = autodir + library + "-gdb.py"
        os.makedirs(os.path.dirname(target))
        shutil.copyfile(args.script, target)

        modes = [
            ("source", ["set auto-load python-scripts off"], ["source " + os.path.abspath(args.script)]),
            ("auto-load", ["set auto-load safe-path /", "set auto-load scripts-directory " + autodir], []),
        ]
        if has_section:
            modes.append(("section", ["set auto-load safe-path /",
                                      "set auto-load scripts-directory " + empty], []))
        elif args.strip:
            print("NOTE: strip --strip-%s drops .debug_gdb_scripts; the embedded-script mode does not apply"
                  % args.strip)
        elif args.require_section:
            print("FAIL: %s has no .debug_gdb_scripts section (--require-section)" % library)
            failed = 1
        else:
            print("NOTE: %s has no .debug_gdb_scripts section yet; the embedded-script check is skipped"
                  % library)

        for mode, init, load in modes:
            rc, out, argv = run_gdb(gdb, args.program, init, load, env)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                with open(os.path.join(args.keep, "gdb-%s.txt" % mode), "w") as f:
                    f.write(out)
            try:
                check(rc == 0, "[%s] gdb exited with %d" % (mode, rc), out)
                parts = check_session(out, mode, descriptor, args.thread_fallbacks)
                loaded = parts.get("stop3 auto-load", "")
                if mode == "source":
                    check("kbthreads_gdb" not in loaded,
                          "[source] a kbthreads script was auto-loaded although auto-load was off", loaded)
                elif mode == "auto-load":
                    check(re.search(r"^Yes\s+\S*" + re.escape(library) + r"-gdb\.py", loaded, re.M),
                          "[auto-load] info auto-load python-scripts does not show %s-gdb.py loaded"
                          % library,
                          loaded)
                else:
                    check(re.search(r"^Yes\s+\S*kbthreads", loaded, re.M),
                          "[section] info auto-load python-scripts does not show the embedded script loaded",
                          loaded)
                if args.strip:
                    shared = parts.get("stop3 shared", "")
                    check(library in run_library_paths(shared),
                          "[%s] the program did not load the stripped copy %s" % (mode, library), shared)
                print("PASS: %s (%s)" % (mode, "debug descriptor" if descriptor else "debug info"))
            except Failure as e:
                failed = 1
                print("FAIL: %s\ncommand: %s" % (e, " ".join(repr(a) for a in argv)))
    return failed


if __name__ == "__main__":
    sys.exit(main())
