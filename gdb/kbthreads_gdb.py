# gdb commands for libkbthreads: `kb ranks`, `kb queues`, `kb thread`.
#
# Load by hand with `source gdb/kbthreads_gdb.py`; it also loads by itself
# with the library (the library's .debug_gdb_scripts section, or an
# <objfile>-gdb.py in gdb's auto-load directory) when gdb's auto-load
# safe-path allows it. See docs/debugging.md.
#
# Everything is read from the inferior's memory through gdb.Value, starting
# at the library's registry of live runs (kb_live_runs in src/registry.c, a
# hidden symbol that the debug info still describes). Field names and enum
# values follow src/run.h, src/ctx.h and src/queue.h; keep them in step.
#
# This file must stay self-contained (no imports beyond the standard library
# and gdb, no use of __file__): it is also embedded verbatim in the library.

import gdb

# enum kb_rank_state, enum kb_susp, enum kb_stop (src/run.h)
_KB_RS_NEW, _KB_RS_STARTED, _KB_RS_FINISHED = 0, 1, 2
_KB_SUSP_NONE, _KB_SUSP_YIELD, _KB_SUSP_WAIT, _KB_SUSP_BARRIER = 0, 1, 2, 3
_KB_STOP_FAILED = 2
_KB_DRIVER = -1
_KB_CANCEL_MODES = {0: "UNWIND", 1: "RETURN"}
# How many elements of one queue `kb queues` prints at most.
_KB_QUEUE_PRINT_MAX = 200


class _KbError(Exception):
    """A problem worth one line to the user (not a Python traceback)."""


def _kb_field(value, name, default=None):
    """value[name], or default when this build's struct has no such field."""
    try:
        return value[name]
    except gdb.error:
        return default


def _kb_int(value, name, default=0):
    v = _kb_field(value, name)
    return default if v is None else int(v)


def _kb_registry_values():
    """The kb_live_runs variables of every loaded copy of the library (the
    shared library, or a static copy linked into the program), once each."""
    values, seen = [], set()
    for objfile in gdb.objfiles():
        sym = None
        for lookup in ("lookup_global_symbol", "lookup_static_symbol"):
            fn = getattr(objfile, lookup, None)
            if fn is not None and sym is None:
                try:
                    sym = fn("kb_live_runs")
                except gdb.error:
                    sym = None
        if sym is None:
            continue
        value = sym.value()
        addr = int(value.address)
        if addr not in seen:
            seen.add(addr)
            values.append(value)
    if values:
        return values
    # gdb without Objfile.lookup_*_symbol, or only the minimal (ELF) symbol
    # with the types coming from another compilation unit's debug info.
    sym = gdb.lookup_global_symbol("kb_live_runs") or gdb.lookup_static_symbol("kb_live_runs")
    if sym is not None:
        return [sym.value()]
    try:
        run_ptr = gdb.lookup_type("struct kb_run").pointer()
        return [gdb.parse_and_eval("&'kb_live_runs'").cast(run_ptr.pointer()).dereference()]
    except gdb.error:
        raise _KbError("kb: libkbthreads is not loaded, or it has no debug info "
                       "(kb_live_runs not found)")


def _kb_require_process():
    if gdb.selected_inferior().pid == 0:
        raise _KbError("kb: the program is not running")


def _kb_live_runs():
    """Every struct kb_run (as a pointer Value) in the registries."""
    runs = []
    for head in _kb_registry_values():
        run = head
        guard = 0
        while int(run) != 0:
            runs.append(run)
            run = run["reg_next"]
            guard += 1
            if guard > 100000:
                raise _KbError("kb: the registry of live runs looks corrupt (a cycle?)")
    return runs


class _KbThreads(object):
    """The inferior's threads by LWP and by pthread_t."""

    def __init__(self):
        inferior = gdb.selected_inferior()
        self.by_lwp, self.by_handle = {}, {}
        self.many_inferiors = len(gdb.inferiors()) > 1
        self.inferior_num = inferior.num
        for t in inferior.threads():
            self.by_lwp[t.ptid[1]] = t
            try:
                self.by_handle[int.from_bytes(t.handle(), "little")] = t
            except (AttributeError, gdb.error, TypeError):
                pass
        selected = gdb.selected_thread()
        self.selected = selected.ptid[1] if selected is not None else None

    def find(self, lwp, handle=0):
        """The gdb thread with this LWP (or, before the thread wrote its tid,
        this pthread_t), or None."""
        t = self.by_lwp.get(lwp) if lwp else None
        if t is None and handle:
            t = self.by_handle.get(handle)
        return t

    def label(self, t):
        """What `thread <label>` takes to select t."""
        if t is None:
            return "?"
        if self.many_inferiors:
            return "%d.%d" % (self.inferior_num, t.num)
        return str(t.num)


def _kb_rank_thread_ids(rk):
    """(LWP, pthread_t) of the thread running rank rk, as far as known.

    rk.tid is written by the rank's thread when the rank starts; before
    that the worker's own tid (rk.w->tid) is used. The pthread_t is only a
    fallback for a thread that has not written any tid yet: a thread that
    ended has its tid set but no longer exists, and its pthread_t may have
    been reused by a new thread."""
    tid = _kb_int(rk, "tid")
    handle = 0
    w = _kb_field(rk, "w")
    if w is not None:  # workers (threads reused across spawns)
        if int(w) != 0:
            wv = w.dereference()
            if not tid:
                tid = _kb_int(wv, "tid")
                handle = _kb_int(wv, "thread")
    elif not tid and _kb_int(rk, "has_thread", 1):  # one thread per rank
        handle = _kb_int(rk, "thread")
    return tid, handle


def _kb_pool_threads(ctx, threads):
    """Labels of the idle worker threads parked in ctx's pool."""
    pool = _kb_field(ctx.dereference(), "pool")
    out = []
    if pool is None:
        return out
    w = pool
    while int(w) != 0 and len(out) < 100000:
        wv = w.dereference()
        t = threads.find(_kb_int(wv, "tid"), _kb_int(wv, "thread"))
        if t is not None:
            out.append("%s (%s)" % (threads.label(t), t.name or "-"))
        else:
            out.append("LWP %d" % _kb_int(wv, "tid"))
        w = wv["next"]
    return out


def _kb_string(ptr, limit=200):
    """The NUL-terminated string at ptr, at most limit bytes of it."""
    addr = int(ptr)
    if addr == 0:
        return ""
    inferior = gdb.selected_inferior()
    data = b""
    try:
        while len(data) < limit:
            chunk = bytes(inferior.read_memory(addr + len(data), 16))
            end = chunk.find(b"\0")
            if end >= 0:
                data += chunk[:end]
                break
            data += chunk
    except (gdb.error, gdb.MemoryError):
        if not data:
            return "<unreadable>"
    text = data[:limit].decode("utf-8", "replace")
    return text + ("..." if len(data) >= limit else "")


def _kb_errors(run):
    """rank -> (code, message) of the failures recorded in the run."""
    out = {}
    errors = _kb_field(run, "errors")
    if errors is None or int(errors) == 0:
        return out
    n = min(_kb_int(run, "nerrors"), max(_kb_int(run, "nprocs"), 0))
    for k in range(n):
        e = errors[k]
        out[int(e["rank"])] = (int(e["code"]), _kb_string(e["message"]))
    return out


def _kb_rank_state(run, rk, index, holder, errors):
    """The state column of `kb ranks` for rank `index`."""
    state = _kb_int(rk, "state")
    cancelled = _kb_int(rk, "cancelled")
    unwinding = _kb_int(rk, "unwinding")
    recorded = _kb_int(rk, "recorded")
    susp = _kb_int(rk, "susp")

    def failure():
        code, msg = errors.get(index, (None, ""))
        if code is None:
            return "failed"
        return "failed (code %d%s)" % (code, ": " + msg if msg else "")

    if state == _KB_RS_FINISHED:
        if recorded:
            return failure()
        if cancelled:
            return "cancelled"
        return "finished"
    if holder == index:
        text = "running"
        extra = []
        if state == _KB_RS_NEW:
            extra.append("starting")
        if cancelled:
            extra.append("unwinding after cancel" if unwinding else "cancelled")
        elif unwinding:
            extra.append("unwinding")
        if recorded:
            extra.append(failure())
        return text + (" (" + ", ".join(extra) + ")" if extra else "")
    if state == _KB_RS_NEW:
        return "cancelled" if cancelled else "not started"
    if cancelled:
        return "cancelled (resuming)"
    if recorded:
        prefix = failure() + ", "
    else:
        prefix = ""
    if susp == _KB_SUSP_WAIT:
        return prefix + "waiting on handle %d" % int(rk["susp_handle"])
    if susp == _KB_SUSP_BARRIER:
        return prefix + "in barrier"
    return prefix + "ready"


def _kb_holder_text(run, holder, threads):
    ranks = run["ranks"]
    nprocs = _kb_int(run, "nprocs")
    if holder == _KB_DRIVER:
        tid = _kb_int(run, "driver_tid")
        t = threads.find(tid)
        owner = _kb_field(run["ctx"], "owner")
        if owner is not None and int(owner) == 0:
            last = ("thread %s" % threads.label(t)) if t is not None else ("LWP %d" % tid)
            return "driver side, idle (no thread is in kb_join; last driver: %s)" % last
        if t is None:
            return "driver (LWP %d)" % tid
        return "driver (thread %s, LWP %d)" % (threads.label(t), tid)
    if 0 <= holder < nprocs:
        t = threads.find(*_kb_rank_thread_ids(ranks[holder]))
        return "rank %d (thread %s)" % (holder, threads.label(t))
    return "? (holder %d)" % holder


def _kb_print_run(run, threads):
    nprocs = _kb_int(run, "nprocs")
    holder = _kb_int(run, "holder", _KB_DRIVER)
    ctx = run["ctx"]
    mode = _KB_CANCEL_MODES.get(_kb_int(run, "cancel_mode"), "?")
    flags = []
    if _kb_int(run, "failed"):
        flags.append("failed")
    elif _kb_int(run, "stop") == _KB_STOP_FAILED:
        flags.append("failing")
    if _kb_int(run, "drain_code"):
        flags.append("drain failed with %d on handle %d" % (_kb_int(run, "drain_code"),
                                                             _kb_int(run, "drain_handle")))
    gdb.write("run 0x%x: ctx 0x%x, %d ranks, %d live, cancel mode %s%s\n"
              % (int(run), int(ctx), nprocs, _kb_int(run, "nlive"), mode,
                 ", " + ", ".join(flags) if flags else ""))
    gdb.write("  baton: %s\n" % _kb_holder_text(run, holder, threads))
    if nprocs <= 0:
        return
    errors = _kb_errors(run)
    gdb.write("   %5s  %6s  %8s  %-15s  %s\n" % ("rank", "thread", "LWP", "name", "state"))
    ranks = run["ranks"]
    for i in range(nprocs):
        rk = ranks[i]
        tid, handle = _kb_rank_thread_ids(rk)
        t = threads.find(tid, handle)
        lwp = t.ptid[1] if t is not None else 0
        name = (t.name or "-") if t is not None else "(exited)" if tid else "(no thread)"
        mark = "*" if t is not None and lwp == threads.selected else " "
        gdb.write(" %s %5d  %6s  %8s  %-15s  %s\n"
                  % (mark, i, threads.label(t) if t is not None else "-", lwp or "-", name,
                     _kb_rank_state(run, rk, i, holder, errors)))
    pool = _kb_pool_threads(ctx, threads)
    if pool:
        gdb.write("  idle in the ctx's pool: %d worker thread%s: %s\n"
                  % (len(pool), "" if len(pool) == 1 else "s", ", ".join(pool)))


class _KbPrefix(gdb.Command):
    """libkbthreads commands.

kb ranks           every rank of every live spawn: thread, state, baton holder
kb queues [CTX]    pending worker waits and collectives of CTX (a kb_ctx *
                   expression), or of the ctx of every live spawn
kb thread RANK [RUN]  select the gdb thread of RANK (of RUN, a struct kb_run *
                   expression, when several spawns are live)"""

    def __init__(self):
        super(_KbPrefix, self).__init__("kb", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)


class _KbRanks(gdb.Command):
    """List every rank of every live libkbthreads spawn.

For each live run (spawn or kb_start()ed process context): its ctx, the
number of ranks and live ranks, the cancel mode, and who holds the baton
(a rank, or the driver thread). Then one line per rank: its gdb thread
number (for `thread N`), LWP, thread name and state:

  running              holds the baton (the only rank that can run)
  ready                suspended in kb_yield, runs at its next turn
  waiting on handle H  suspended in kb_wait until a drain completes H
  in barrier           suspended in kb_barrier
  not started          its thread exists; its function has not been called
  finished             its function returned 0
  cancelled            cancelled by the driver after a failure
  failed (code C: M)   a root-cause failure (nonzero return, kb_raise, kb_fail)

A '*' marks the thread gdb has selected."""

    def __init__(self):
        super(_KbRanks, self).__init__("kb ranks", gdb.COMMAND_DATA, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        try:
            _kb_require_process()
            runs = _kb_live_runs()
            if not runs:
                gdb.write("no live libkbthreads spawn\n")
                return
            threads = _KbThreads()
            for run in runs:
                _kb_print_run(run, threads)
        except _KbError as e:
            raise gdb.GdbError(str(e))
        except gdb.MemoryError as e:
            raise gdb.GdbError("kb: cannot read the scheduler state: %s" % e)


def _kb_queue_elements(queue, elem_type):
    """(length, [elements oldest first]) of a struct kb_queue ring."""
    buf = queue["buf"]
    cap = int(queue["cap"])
    head = int(queue["head"])
    length = int(queue["len"])
    elem = int(queue["elem"])
    if length == 0:
        return 0, []
    if cap == 0 or cap & (cap - 1) or length > cap or head >= cap or int(buf) == 0:
        raise _KbError("kb: queue at 0x%x looks corrupt (cap %d, head %d, len %d)"
                       % (int(queue.address), cap, head, length))
    if elem != elem_type.sizeof:
        raise _KbError("kb: queue at 0x%x holds %d-byte elements, expected %d"
                       % (int(queue.address), elem, elem_type.sizeof))
    ring = buf.cast(elem_type.pointer())
    n = min(length, _KB_QUEUE_PRINT_MAX)
    return length, [ring[(head + i) & (cap - 1)] for i in range(n)]


def _kb_types():
    """The kb_handle and kb_collective types."""
    try:
        handle_t = gdb.lookup_type("kb_handle")
    except gdb.error:
        handle_t = gdb.lookup_type("unsigned long")
    try:
        coll_t = gdb.lookup_type("kb_collective")
    except gdb.error:
        coll_t = gdb.lookup_type("struct kb_collective")
    return handle_t, coll_t


def _kb_waiters(runs_for_ctx):
    """handle -> [ranks suspended in kb_wait on it]."""
    out = {}
    for run in runs_for_ctx:
        ranks = run["ranks"]
        for i in range(_kb_int(run, "nprocs")):
            rk = ranks[i]
            if (_kb_int(rk, "state") == _KB_RS_STARTED and _kb_int(rk, "susp") == _KB_SUSP_WAIT
                    and _kb_int(run, "holder") != i):
                out.setdefault(int(rk["susp_handle"]), []).append(i)
    return out


def _kb_print_queues(ctx, runs):
    ctx_runs = [r for r in runs if int(r["ctx"]) == int(ctx)]
    if ctx_runs:
        about = ", ".join("run 0x%x, %d ranks" % (int(r), _kb_int(r, "nprocs")) for r in ctx_runs)
    else:
        about = "no live spawn"
    gdb.write("ctx 0x%x (%s)\n" % (int(ctx), about))
    handle_t, coll_t = _kb_types()
    waiters = _kb_waiters(ctx_runs)

    def who(h):
        ranks = waiters.get(h)
        if not ranks:
            return ""
        return "  <- rank%s %s waiting" % ("s" if len(ranks) > 1 else "", ", ".join(map(str, ranks)))

    n, waits = _kb_queue_elements(ctx["waits"], handle_t)
    gdb.write("  pending worker waits: %d\n" % n)
    for i, h in enumerate(waits):
        gdb.write("    [%d] handle %d%s\n" % (i, int(h), who(int(h))))
    if n > len(waits):
        gdb.write("    ... %d more\n" % (n - len(waits)))
    n, colls = _kb_queue_elements(ctx["colls"], coll_t)
    gdb.write("  pending collectives: %d\n" % n)
    for i, c in enumerate(colls):
        gdb.write("    [%d] handle %d  sip_id %d  meta 0x%x%s\n"
                  % (i, int(c["handle"]), int(c["sip_id"]), int(c["meta"]), who(int(c["handle"]))))
    if n > len(colls):
        gdb.write("    ... %d more\n" % (n - len(colls)))


class _KbQueues(gdb.Command):
    """Show the pending worker waits and collectives of a libkbthreads ctx.

Usage: kb queues [CTX]

CTX is any expression giving a kb_ctx * (a variable, `run->ctx`, or an
address). Without it, the ctx of every live spawn is shown. Elements are
listed oldest first (the order the next drain takes them); a worker wait a
suspended rank is blocked on is marked with that rank."""

    def __init__(self):
        super(_KbQueues, self).__init__("kb queues", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        try:
            _kb_require_process()
            runs = _kb_live_runs()
            ctx_ptr_t = None
            for head in _kb_registry_values():
                ctx_ptr_t = head.type.target()["ctx"].type
                break
            if arg.strip():
                value = gdb.parse_and_eval(arg)
                if ctx_ptr_t is None:
                    ctx_ptr_t = gdb.lookup_type("struct kb_ctx").pointer()
                if value.type.strip_typedefs().code != gdb.TYPE_CODE_PTR:
                    value = value.cast(gdb.lookup_type("unsigned long"))
                ctxs = [value.cast(ctx_ptr_t)]
                if int(ctxs[0]) == 0:
                    raise _KbError("kb: %s is a NULL ctx" % arg.strip())
            else:
                ctxs, seen = [], set()
                for run in runs:
                    c = run["ctx"]
                    if int(c) not in seen:
                        seen.add(int(c))
                        ctxs.append(c)
                if not ctxs:
                    gdb.write("no live libkbthreads spawn (name a ctx: kb queues CTX)\n")
                    return
            for ctx in ctxs:
                _kb_print_queues(ctx, runs)
        except _KbError as e:
            raise gdb.GdbError(str(e))
        except gdb.MemoryError as e:
            raise gdb.GdbError("kb: cannot read the ctx: %s" % e)


class _KbThread(gdb.Command):
    """Select the gdb thread running a libkbthreads rank.

Usage: kb thread RANK [RUN]

RUN (a struct kb_run * expression, as printed by `kb ranks`) is needed only
when several spawns are live."""

    def __init__(self):
        super(_KbThread, self).__init__("kb thread", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        try:
            _kb_require_process()
            words = arg.split(None, 1)
            if not words:
                raise _KbError("usage: kb thread RANK [RUN]")
            rank = int(gdb.parse_and_eval(words[0]))
            runs = _kb_live_runs()
            if len(words) > 1:
                want = int(gdb.parse_and_eval(words[1]))
                runs = [r for r in runs if int(r) == want]
                if not runs:
                    raise _KbError("kb: 0x%x is not a live run" % want)
            elif len(runs) > 1:
                raise _KbError("kb: %d spawns are live; name the run: kb thread RANK RUN" % len(runs))
            if not runs:
                raise _KbError("kb: no live libkbthreads spawn")
            run = runs[0]
            if not 0 <= rank < _kb_int(run, "nprocs"):
                raise _KbError("kb: run 0x%x has no rank %d" % (int(run), rank))
            threads = _KbThreads()
            t = threads.find(*_kb_rank_thread_ids(run["ranks"][rank]))
            if t is None:
                raise _KbError("kb: rank %d has no thread" % rank)
            gdb.execute("thread %s" % threads.label(t), from_tty)
        except _KbError as e:
            raise gdb.GdbError(str(e))


_KbPrefix()
_KbRanks()
_KbQueues()
_KbThread()
