# SPDX-License-Identifier: MIT
"""Helpers for the project's own oracle scenarios (tests/oracle/sem_*.py).

The reference harness (fakectx.py and the unchanged reference module) lives in
../shared/reference/oracle/ref and is only read, never copied: this file adds
scenario actions and a normaliser that turns an oracle trace into the trace the
C tests (tests/support/fake_engine.c) produce. The C tests keep the normalised
traces inline; nothing here is needed to build or run the C test suite.

A sem_*.py file defines functions named s_<name>(ctx); running it prints, for
each scenario, "### <name>" followed by its trace:

    /usr/bin/python3 tests/oracle/sem_drain.py          # normalised (C form)
    /usr/bin/python3 tests/oracle/sem_drain.py --raw    # the oracle's own lines
    /usr/bin/python3 tests/oracle/sem_drain.py --c      # as C string literals
    /usr/bin/python3 tests/oracle/sem_drain.py NAME ... # only these scenarios

Normalisation (the same mapping fake_engine.h documents):
  teardown .. teardown_done          dropped (Python garbage collection)
  error_cause ...                    dropped (Python exception chaining)
  wait_done R H switches=K           wait_done R H   (C cannot count switches)
  wait_fast main H                   dropped unless the line before is
                                     'driver_wait H' (the drain's phase (b)
                                     fast path happens inside the library, out
                                     of the fake engine's sight)
  unwind R SystemExit                unwind R cancel
  unwind R <other exception type>    unwind R raise
  spawn_return None                  spawn_return 0
  spawn_raised SpawnException        spawn_raised KB_ESPAWN
  error ranks=.. first=F type=T      error ranks=.. first=F code=C
  error_entry R T T('msg')           error_entry R code=C msg=msg
  error_msg ...: rank R raised T('msg')
                                     error_msg ...: rank R raised code C: msg
Exception type T -> code C: E<n> -> n (classes made by E(n) below),
ValueError -> 1, RuntimeError -> 2; None -> None.
"""
from __future__ import annotations

import os
import re
import sys

# The reference oracle: $KB_ORACLE_DIR, else ../shared/reference/oracle beside
# the repository.
ORACLE = os.environ.get("KB_ORACLE_DIR") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "reference", "oracle"))
REF = os.path.join(ORACLE, "ref")
sys.path.insert(0, REF)
import fakectx  # noqa: E402
from fakectx import TRACE, FakeRuntimeContext, rec, teardown, format_event  # noqa: E402,F401
from fakectx import do_spawn, plan_body, traced, ar  # noqa: E402,F401

TYPE_CODES = {"ValueError": 1, "RuntimeError": 2}
_E = {}


def E(code: int):
    """An Exception subclass named E<code>: normalised to 'code <code>'."""
    if code not in _E:
        _E[code] = type(f"E{code}", (Exception,), {})
    return _E[code]


def H(name: str):
    """Handle from its trace name: 'h:40' -> ('h', '40') (prints as h:40)."""
    return tuple(name.split(":"))


def type_code(t: str) -> str:
    if t == "None":
        return "None"
    m = re.fullmatch(r"E(\d+)", t)
    if m:
        return m.group(1)
    return str(TYPE_CODES[t])


_REPR = re.compile(r"(\w+)\('(.*)'\)$")


def norm_repr(r: str) -> str:
    m = _REPR.match(r)
    if not m:
        raise ValueError(f"cannot normalise repr {r!r}")
    return f"code {type_code(m.group(1))}: {m.group(2)}"


def normalise(lines: list) -> list:
    out = []
    skipping = False
    for ln in lines:
        tok = ln.split(" ")
        ev = tok[0]
        if ev == "teardown":
            skipping = True
            continue
        if ev == "teardown_done":
            skipping = False
            continue
        if skipping or ev == "error_cause":
            continue
        if ev == "wait_done":
            ln = " ".join(t for t in tok if not t.startswith("switches="))
        elif ev == "wait_fast" and tok[1] == "main":
            if not (out and out[-1] == f"driver_wait {tok[2]}"):
                continue
        elif ev == "unwind":
            ln = f"unwind {tok[1]} " + ("cancel" if tok[2] == "SystemExit" else "raise")
        elif ln == "spawn_return None":
            ln = "spawn_return 0"
        elif ln == "spawn_raised SpawnException":
            ln = "spawn_raised KB_ESPAWN"
        elif ev == "error":
            ln = " ".join(tok[:3]) + " code=" + type_code(tok[3][len("type="):])
        elif ev == "error_entry":
            rep = ln.split(" ", 3)[3]
            m = _REPR.match(rep)
            ln = f"error_entry {tok[1]} code={type_code(tok[2])} msg={m.group(2)}"
        elif ev == "error_msg":
            m = re.match(r"(error_msg spawn failed on ranks \[[0-9, ]*\])(: rank (\d+) raised (.*))?$", ln)
            ln = m.group(1)
            if m.group(2):
                ln += f": rank {m.group(3)} raised " + norm_repr(m.group(4))
        out.append(ln)
    return out


# --------------------------------------------------------------------------
# extra scenario actions (callables for plan_body)
# --------------------------------------------------------------------------
def enq(ctx, name):
    """Action: append a handle to the pending worker waits, no trace line
    (C: kb_enqueue_wait)."""

    def act(r):
        ctx._pending_worker_waits.append(H(name))

    return act


def submit(ctx, name, sip, meta):
    """Action: append a collective (C: kb_collective_submit), no trace line."""

    def act(r):
        ctx.distributed._backend._pending_collective_handles.append((H(name), sip, meta))

    return act


def complete(ctx, name):
    """Action: mark a handle completed (C: kb_complete), no trace line."""

    def act(r):
        ctx._completed.add(H(name))

    return act


def mark(text):
    """Action: record a line (C: tr_add)."""

    def act(r):
        rec(*text.format(r=r).split(" "))

    return act


def driver_wait(ctx, name, meta=None):
    """Driver-side wait with the marker line the C helper fe_driver_wait
    records first."""
    rec("driver_wait", H(name))
    ctx.wait(H(name), _meta=meta)


def yield_absorb(ctx):
    """Action: yield; a cancellation is absorbed and the body returns
    normally (C, RETURN mode: kb_yield gives KB_ECANCELED, return 0)."""

    def act(r):
        try:
            ctx.yield_()
        except SystemExit:
            rec("absorbed", r)
            raise _Absorbed()

    return act


class _Absorbed(Exception):
    pass


def absorbing(body):
    """Wrap a plan body so that _Absorbed ends it normally (what C does with
    'return 0' after KB_ECANCELED)."""

    def fn(r, *args):
        try:
            body(r, *args)
        except _Absorbed:
            return

    return fn


def yield_convert(ctx, code, msg):
    """Action: yield; a cancellation is turned into E<code>(msg)."""

    def act(r):
        try:
            ctx.yield_()
        except SystemExit:
            raise E(code)(msg)

    return act


# --------------------------------------------------------------------------
# runner
# --------------------------------------------------------------------------
def run_one(fn) -> list:
    TRACE.clear()
    ctx = FakeRuntimeContext()
    fn(ctx)
    teardown(ctx)
    return [format_event(ev) for ev in TRACE]


def c_literal(lines: list) -> str:
    out = []
    for ln in lines:
        esc = ln.replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'    "{esc}\\n"')
    return "\n".join(out)


def main(mod) -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    raw = "--raw" in sys.argv
    as_c = "--c" in sys.argv
    names = [n[2:] for n in dir(mod) if n.startswith("s_") and callable(getattr(mod, n))]
    # keep definition order
    names.sort(key=lambda n: getattr(mod, "s_" + n).__code__.co_firstlineno)
    for n in names:
        if args and n not in args:
            continue
        lines = run_one(getattr(mod, "s_" + n))
        if not raw:
            lines = normalise(lines)
        sys.stdout.write(f"### {os.path.basename(mod.__file__)}::s_{n}\n")
        if as_c:
            sys.stdout.write(c_literal(lines) + "\n")
        else:
            sys.stdout.write("".join(ln + "\n" for ln in lines))
