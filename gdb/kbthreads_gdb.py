# SPDX-License-Identifier: MIT
# gdb commands for libkbthreads: `kb ranks`, `kb queues`, `kb thread`.
#
# Load by hand with `source gdb/kbthreads_gdb.py`; it also loads by itself
# with the library (the library's .debug_gdb_scripts section, or an
# <objfile>-gdb.py in gdb's auto-load directory) when gdb's auto-load
# safe-path allows it. See docs/debugging.md.
#
# Everything is read as raw memory, starting at the library's registry of
# live runs (kb_live_runs in src/registry.c), with a layout (where each field
# is, and its size) taken from one of two places:
#   - the debug info, when the library has it (struct kb_run and friends);
#   - otherwise the library's debug descriptor, kb_debug_offsets
#     (src/debug_offsets.h), an exported table that survives stripping.
# Both go through the same code, so the commands print the same thing either
# way. Field names and enum values follow src/run.h, src/ctx.h, src/queue.h
# and src/worker.h; a descriptor of another version is refused.
#
# This file must stay self-contained (no imports beyond the standard library
# and gdb, no use of __file__): it is also embedded verbatim in the library.
# Outside gdb (no `gdb` module) it defines only the part that reads memory
# through a function given to it: tools/kbthreads-dump imports it for that.
# What the dump may use is the part without a leading underscore: KbError,
# KbReader, kb_parse_descriptor, KB_DRIVER, kb_run_header, kb_rank_state,
# kb_driver_idle, KbRankThread and kb_rank_table. Everything named with an
# underscore is this file's own and may change without notice.

import collections
import re
import struct

try:
    import gdb
except ImportError:
    gdb = None
if gdb is not None and not hasattr(gdb, "Command"):
    # not gdb's module: a folder named gdb on sys.path (this repository's
    # gdb/ seen from its root, when kbthreads.dump() imports this file)
    gdb = None

# enum kb_rank_state, enum kb_susp, enum kb_stop (src/run.h), kb_cancel_mode
_KB_RS_NEW, _KB_RS_STARTED, _KB_RS_FINISHED = 0, 1, 2
_KB_SUSP_NONE, _KB_SUSP_YIELD, _KB_SUSP_WAIT, _KB_SUSP_BARRIER = 0, 1, 2, 3
_KB_STOP_FAILED = 2
# run->holder when the driver holds the baton (src/run.h): public, because
# kbthreads-dump words its baton line by it.
KB_DRIVER = -1
_KB_CANCEL_MODES = {0: "UNWIND", 1: "RETURN"}
# The library's constants as this reader copied them, checked against the
# library's own before anything is read (_kb_check_values): the descriptor's
# value.* entries, or the enums of the debug info.
_KB_VALUES = {
    "KB_DRIVER": KB_DRIVER, "KB_RS_NEW": _KB_RS_NEW, "KB_RS_STARTED": _KB_RS_STARTED,
    "KB_RS_FINISHED": _KB_RS_FINISHED, "KB_SUSP_NONE": _KB_SUSP_NONE, "KB_SUSP_YIELD": _KB_SUSP_YIELD,
    "KB_SUSP_WAIT": _KB_SUSP_WAIT, "KB_SUSP_BARRIER": _KB_SUSP_BARRIER, "KB_STOP_FAILED": _KB_STOP_FAILED,
    "KB_CANCEL_UNWIND": 0, "KB_CANCEL_RETURN": 1,
}
# Where the debug info defines them: every _KB_VALUES name but KB_DRIVER, a
# #define, which DWARF does not carry (only the descriptor checks it).
_KB_VALUE_ENUMS = ("enum kb_rank_state", "enum kb_susp", "enum kb_stop", "enum kb_cancel_mode")
# How many elements of one queue `kb queues` prints at most.
_KB_QUEUE_PRINT_MAX = 200
# Sanity bounds: more than this is a corrupt (or changing) structure.
_KB_MAX_RANKS = 1 << 24
_KB_MAX_RUNS = 100000

# The descriptor's header (src/debug_offsets.h): magic, version,
# header_size, field_size, nfields, pointer_size, reserved, live_runs,
# live_runs_gen; then nfields entries of a 24-byte name, offset and size.
KB_DEBUG_MAGIC = b"kbdebug\0"
KB_DEBUG_VERSION = 2
_KB_DEBUG_HEADER = struct.Struct("<8sIIIIIIQQ")
_KB_DEBUG_ENTRY = struct.Struct("<24sII")

# What the readers use: (kind, C type for the debug info, fields). A field
# is named as the descriptor names it; where its C path in the struct
# differs (a field of a member struct), _KB_PATHS gives the path.
_KB_STRUCTS = (
    ("run", "struct kb_run", ("ctx", "nprocs", "ranks", "holder", "nlive", "cancel_mode", "stop", "failed",
                              "errors", "nerrors", "drain_code", "drain_handle", "driver_tid", "handoffs",
                              "reg_next")),
    ("rank", "struct kb_rank", ("w", "index", "state", "cancelled", "unwinding", "failed", "susp",
                                "susp_handle", "tid")),
    ("worker", "struct kb_worker", ("thread", "tid", "next")),
    ("ctx", "struct kb_ctx", ("owner", "waits", "colls", "pool")),
    ("queue", "struct kb_queue", ("buf", "elem", "cap", "head", "len")),
    ("collective", "kb_collective", ("handle", "sip_id", "meta")),
    ("rank_error", "kb_rank_error", ("rank", "code", "message")),
    ("handle", "kb_handle", ()),
)
# The C paths of the fields of struct kb_run that live in its member
# structs (src/run.h; src/debug_offsets.c names them the same way).
_KB_PATHS = {
    "run.failed": "failure.failed", "run.errors": "failure.errors", "run.nerrors": "failure.nerrors",
    "run.drain_code": "failure.drain_code", "run.drain_handle": "failure.drain_handle",
    "run.handoffs": "counters.handoffs", "run.reg_next": "registry.next",
}


class KbError(Exception):
    """A problem worth one line to the user (not a Python traceback)."""


class KbLayout(object):
    """Offset and size of each field the readers use ("run.nprocs"), and the
    size of each struct ("run"); source says where they came from."""

    def __init__(self, entries, source):
        self.entries = entries
        self.source = source

    def size(self, kind):
        if kind not in self.entries:
            raise KbError("kb: the %s layout has no struct %s" % (self.source, kind))
        return self.entries[kind][1]


def _kb_signed32(v):
    return v - (1 << 32) if v >= 1 << 31 else v


def _kb_check_values(values, source, unchecked):
    """Refuse a library whose constants (values: name -> value, as source
    gives them) differ from the ones this reader copied by hand into
    _KB_VALUES, but for the names in unchecked: a reader that misread a
    state would print wrong states without a word."""
    for name, want in sorted(_KB_VALUES.items()):
        if name not in unchecked and values.get(name) != want:
            raise KbError("kb: %s gives %s = %s, but this reader expects %d; use the gdb/kbthreads_gdb.py and "
                          "kbthreads-dump that came with that library" % (source, name, values.get(name, "nothing"),
                                                                          want))


def kb_parse_descriptor(read, addr):
    """(layout, address of kb_live_runs, address of kb_live_runs_gen) from the
    descriptor at addr. read(addr, n) returns n bytes of the inferior."""
    head = read(addr, _KB_DEBUG_HEADER.size)
    magic, version, header_size, field_size, nfields, psize, _, live, gen = _KB_DEBUG_HEADER.unpack(head)
    if magic != KB_DEBUG_MAGIC:
        raise KbError("kb: no libkbthreads debug descriptor at 0x%x (wrong magic)" % addr)
    if version != KB_DEBUG_VERSION:
        raise KbError("kb: the libkbthreads debug descriptor at 0x%x is version %d, but this reader knows "
                      "version %d only; use the gdb/kbthreads_gdb.py and kbthreads-dump that came with that "
                      "library" % (addr, version, KB_DEBUG_VERSION))
    if (psize != 8 or header_size < _KB_DEBUG_HEADER.size or field_size < _KB_DEBUG_ENTRY.size
            or not 0 < nfields <= 4096):
        raise KbError("kb: the libkbthreads debug descriptor at 0x%x looks corrupt (pointer size %d, "
                      "%d entries of %d bytes)" % (addr, psize, nfields, field_size))
    data = read(addr + header_size, nfields * field_size)
    entries, values = {}, {}
    for i in range(nfields):
        raw, offset, size = _KB_DEBUG_ENTRY.unpack_from(data, i * field_size)
        name = raw.split(b"\0", 1)[0].decode("ascii", "replace")
        if name.startswith("value."):
            values[name[len("value."):]] = _kb_signed32(offset)
        else:
            entries[name] = (offset, size)
    _kb_check_values(values, "the libkbthreads debug descriptor at 0x%x" % addr, ())
    for kind, _, fields in _KB_STRUCTS:
        for name in (kind,) + tuple(kind + "." + f for f in fields):
            if name not in entries:
                raise KbError("kb: the libkbthreads debug descriptor at 0x%x has no entry %s" % (addr, name))
    return KbLayout(entries, "descriptor"), live, gen


class KbStruct(object):
    """One struct's bytes, read from the inferior, read by field name."""

    def __init__(self, layout, kind, addr, data):
        self.layout, self.kind, self.addr, self.data = layout, kind, addr, data

    def get(self, field, default=0):
        entry = self.layout.entries.get(self.kind + "." + field)
        if entry is None:
            return default
        offset, size = entry
        if offset + size > len(self.data):
            return default
        if size == 4:
            return struct.unpack_from("<i", self.data, offset)[0]
        if size == 8:
            return struct.unpack_from("<Q", self.data, offset)[0]
        return default

    def sub(self, field, kind):
        """An embedded struct (ctx.waits is a struct kb_queue)."""
        offset, size = self.layout.entries[self.kind + "." + field]
        return KbStruct(self.layout, kind, self.addr + offset, self.data[offset:offset + size])


class KbRun(object):
    """A snapshot of one struct kb_run: the run, its ranks, its ctx, its
    failures (rank -> (code, message)) and its ctx's pooled workers."""

    def __init__(self, run, ranks, ctx, errors, pool, reader):
        self.run, self.ranks, self.ctx, self.errors, self.pool = run, ranks, ctx, errors, pool
        self.addr = run.addr
        self.nprocs = run.get("nprocs")
        self.holder = run.get("holder", KB_DRIVER)
        self._reader = reader

    def thread_ids(self, index):
        """(LWP, pthread_t) of the thread running rank index, as far as known.

        rk.tid is written by the rank's thread when the rank starts; before
        that the worker's own tid (rk.w->tid) is used. The pthread_t is only
        a fallback for a thread that has not written any tid yet: a thread
        that ended has its tid set but no longer exists, and its pthread_t
        may have been reused by a new thread."""
        rk = self.ranks[index]
        tid, handle = rk.get("tid"), 0
        w = rk.get("w")
        if not tid and w:
            wv = self._reader.struct("worker", w)
            tid, handle = wv.get("tid"), wv.get("thread")
        return tid, handle


class KbReader(object):
    """Reads the scheduler's state through read(addr, n) -> bytes with a
    layout; every fault becomes a KbError."""

    def __init__(self, read, layout):
        self.read, self.layout = read, layout

    def bytes(self, addr, n):
        if addr == 0:
            raise KbError("kb: a NULL pointer where a %d-byte object was expected" % n)
        return self.read(addr, n)

    def struct(self, kind, addr):
        return KbStruct(self.layout, kind, addr, self.bytes(addr, self.layout.size(kind)))

    def array(self, kind, addr, n):
        size = self.layout.size(kind)
        data = self.bytes(addr, size * n) if n else b""
        return [KbStruct(self.layout, kind, addr + i * size, data[i * size:(i + 1) * size]) for i in range(n)]

    def pointer(self, addr):
        return struct.unpack("<Q", self.bytes(addr, 8))[0]

    def string(self, addr, limit=200):
        """The NUL-terminated string at addr, at most limit bytes of it."""
        if addr == 0:
            return ""
        data = b""
        try:
            while len(data) < limit:
                chunk = self.read(addr + len(data), 16)
                end = chunk.find(b"\0")
                if end >= 0:
                    data += chunk[:end]
                    break
                data += chunk
        except KbError:
            if not data:
                return "<unreadable>"
        text = data[:limit].decode("utf-8", "replace")
        return text + ("..." if len(data) >= limit else "")

    def pool(self, ctx):
        """The ctx's parked workers, oldest link first."""
        out, w = [], ctx.get("pool")
        while w and len(out) < _KB_MAX_RANKS:
            wv = self.struct("worker", w)
            out.append(wv)
            w = wv.get("next")
        return out

    def errors(self, run):
        out = {}
        errors = run.get("errors")
        n = min(run.get("nerrors"), max(run.get("nprocs"), 0))
        if not errors or n <= 0:
            return out
        for e in self.array("rank_error", errors, n):
            out[e.get("rank")] = (e.get("code"), self.string(e.get("message")))
        return out

    def run(self, addr):
        run = self.struct("run", addr)
        nprocs = run.get("nprocs")
        if not 0 <= nprocs <= _KB_MAX_RANKS:
            raise KbError("kb: run 0x%x looks corrupt (%d ranks)" % (addr, nprocs))
        ranks = self.array("rank", run.get("ranks"), nprocs) if nprocs else []
        ctx = self.struct("ctx", run.get("ctx"))
        return KbRun(run, ranks, ctx, self.errors(run), self.pool(ctx), self)

    def runs(self, head_addr):
        """Every run in the registry whose head pointer is at head_addr."""
        out, addr = [], self.pointer(head_addr)
        while addr:
            if len(out) >= _KB_MAX_RUNS:
                raise KbError("kb: the registry of live runs looks corrupt (a cycle?)")
            run = self.run(addr)
            out.append(run)
            addr = run.run.get("reg_next")
        return out

    def queue(self, q, kind):
        """(length, [elements oldest first]) of a struct kb_queue ring; an
        element is a kb_handle (int) or a KbStruct of kind."""
        buf, cap, head, length, elem = (q.get(f) for f in ("buf", "cap", "head", "len", "elem"))
        if length == 0:
            return 0, []
        if cap == 0 or cap & (cap - 1) or length > cap or head >= cap or buf == 0:
            raise KbError("kb: queue at 0x%x looks corrupt (cap %d, head %d, len %d)" % (q.addr, cap, head, length))
        want = self.layout.size(kind)
        if elem != want:
            raise KbError("kb: queue at 0x%x holds %d-byte elements, expected %d" % (q.addr, elem, want))
        n = min(length, _KB_QUEUE_PRINT_MAX)
        data = self.bytes(buf, cap * elem)
        items = []
        for i in range(n):
            at = ((head + i) & (cap - 1)) * elem
            if kind == "handle":
                items.append(struct.unpack_from("<Q", data, at)[0])
            else:
                items.append(KbStruct(self.layout, kind, buf + at, data[at:at + elem]))
        return length, items


def kb_run_header(r):
    """The first line of a run in `kb ranks` and kbthreads-dump."""
    run = r.run
    mode = _KB_CANCEL_MODES.get(run.get("cancel_mode"), "?")
    flags = []
    if run.get("failed"):
        flags.append("failed")
    elif run.get("stop") == _KB_STOP_FAILED:
        flags.append("failing")
    if run.get("drain_code"):
        flags.append("drain failed with %d on handle %d" % (run.get("drain_code"), run.get("drain_handle")))
    return ("run 0x%x: ctx 0x%x, %d ranks, %d live, cancel mode %s%s"
            % (r.addr, run.get("ctx"), r.nprocs, run.get("nlive"), mode, ", " + ", ".join(flags) if flags else ""))


def kb_rank_state(r, index):
    """The state column of `kb ranks` (and kbthreads-dump) for rank index."""
    rk = r.ranks[index]
    state, cancelled, unwinding, failed, susp = (
        rk.get(f) for f in ("state", "cancelled", "unwinding", "failed", "susp"))

    def failure():
        code, msg = r.errors.get(index, (None, ""))
        if code is None:
            return "failed"
        return "failed (code %d%s)" % (code, ": " + msg if msg else "")

    if state == _KB_RS_FINISHED:
        if failed:
            return failure()
        if cancelled:
            return "cancelled"
        return "finished"
    if r.holder == index:
        extra = []
        if state == _KB_RS_NEW:
            extra.append("starting")
        if cancelled:
            extra.append("unwinding after cancel" if unwinding else "cancelled")
        elif unwinding:
            extra.append("unwinding")
        if failed:
            extra.append(failure())
        return "running" + (" (" + ", ".join(extra) + ")" if extra else "")
    if state == _KB_RS_NEW:
        return "cancelled" if cancelled else "not started"
    if cancelled:
        return "cancelled (resuming)"
    prefix = failure() + ", " if failed else ""
    if susp == _KB_SUSP_WAIT:
        return prefix + "waiting on handle %d" % rk.get("susp_handle")
    if susp == _KB_SUSP_BARRIER:
        return prefix + "in barrier"
    return prefix + "ready"


# A rank's thread as a tool found it, for kb_rank_table: its LWP, its name,
# its gdb thread number ("thread" column; unused without it) and whether it
# is the thread gdb has selected.
KbRankThread = collections.namedtuple("KbRankThread", "lwp name label selected")


def _kb_rank_row(mark, rank, label, lwp, name, state, gdb_threads):
    """One row of the rank table; the thread column only for gdb."""
    columns = [" %s %5s" % (mark, rank)]
    if gdb_threads:
        columns.append("%6s" % label)
    columns += ["%8s" % lwp, "%-15s" % name, state]
    return "  ".join(columns)


def kb_rank_table(r, find_thread, gdb_threads):
    """The rank table of `kb ranks` (gdb_threads: with gdb's thread numbers
    and a '*' on the selected thread) and of kbthreads-dump (without them):
    a header, then one line per rank. find_thread(lwp, pthread_t) is the
    rank's live thread as a KbRankThread, or None when the tool finds none.
    One function for both, so the two tables cannot drift apart."""
    lines = [_kb_rank_row(" ", "rank", "thread", "LWP", "name", "state", gdb_threads)]
    for i in range(r.nprocs):
        tid, handle = r.thread_ids(i)
        t = find_thread(tid, handle)
        if t is None:
            # a rank whose thread has ended (its tid was written) or never ran
            mark, label, lwp, name = " ", "-", "-", "(exited)" if tid else "(no thread)"
        else:
            mark, label, lwp, name = "*" if t.selected else " ", t.label, t.lwp or "-", t.name
        lines.append(_kb_rank_row(mark, i, label, lwp, name, kb_rank_state(r, i), gdb_threads))
    return lines


def kb_driver_idle(r):
    """A process context nobody is joining: no thread owns its ctx."""
    return r.holder == KB_DRIVER and r.ctx.get("owner") == 0


def kb_waiters(runs):
    """handle -> [ranks suspended in kb_wait on it]."""
    out = {}
    for r in runs:
        for i, rk in enumerate(r.ranks):
            if rk.get("state") == _KB_RS_STARTED and rk.get("susp") == _KB_SUSP_WAIT and r.holder != i:
                out.setdefault(rk.get("susp_handle"), []).append(i)
    return out


def kb_queue_lines(reader, ctx_addr, runs):
    """The lines `kb queues` prints for the ctx at ctx_addr."""
    ctx = reader.struct("ctx", ctx_addr)
    ctx_runs = [r for r in runs if r.run.get("ctx") == ctx_addr]
    if ctx_runs:
        about = ", ".join("run 0x%x, %d ranks" % (r.addr, r.nprocs) for r in ctx_runs)
    else:
        about = "no live spawn"
    lines = ["ctx 0x%x (%s)" % (ctx_addr, about)]
    waiters = kb_waiters(ctx_runs)

    def who(h):
        ranks = waiters.get(h)
        if not ranks:
            return ""
        return "  <- rank%s %s waiting" % ("s" if len(ranks) > 1 else "", ", ".join(map(str, ranks)))

    n, waits = reader.queue(ctx.sub("waits", "queue"), "handle")
    lines.append("  pending worker waits: %d" % n)
    lines += ["    [%d] handle %d%s" % (i, h, who(h)) for i, h in enumerate(waits)]
    if n > len(waits):
        lines.append("    ... %d more" % (n - len(waits)))
    n, colls = reader.queue(ctx.sub("colls", "queue"), "collective")
    lines.append("  pending collectives: %d" % n)
    for i, c in enumerate(colls):
        h = c.get("handle")
        lines.append("    [%d] handle %d  sip_id %d  meta 0x%x%s" % (i, h, c.get("sip_id"), c.get("meta"), who(h)))
    if n > len(colls):
        lines.append("    ... %d more" % (n - len(colls)))
    return lines


# ---------------------------------------------------------------- gdb only

def _kb_read(addr, n):
    try:
        return bytes(gdb.selected_inferior().read_memory(addr, n))
    except (gdb.error, gdb.MemoryError) as e:
        raise KbError("kb: cannot read the scheduler state at 0x%x: %s" % (addr, e))


def _kb_field_at(t, path):
    """(byte offset, size) of the field at the dotted path in struct type t,
    or None when the debug info has no such field."""
    offset = 0
    for part in path.split("."):
        f = next((f for f in t.fields() if f.name == part), None)
        if f is None:
            return None
        offset += f.bitpos // 8
        t = f.type.strip_typedefs()
    return offset, t.sizeof


def _kb_debug_info_layout():
    """The layout from the debug info, or None without it."""
    entries = {}
    for kind, ctype, fields in _KB_STRUCTS:
        try:
            t = gdb.lookup_type(ctype).strip_typedefs()
        except gdb.error:
            if kind == "run":
                return None
            continue
        entries[kind] = (0, t.sizeof)
        for name in fields:
            where = _kb_field_at(t, _KB_PATHS.get(kind + "." + name, name))
            if where is not None:
                entries[kind + "." + name] = where
    return KbLayout(entries, "debug info")


def _kb_check_debug_info_values():
    """The check kb_parse_descriptor makes, on the values of the enums in
    the debug info (a missing enum shows as "nothing")."""
    values = {}
    for ctype in _KB_VALUE_ENUMS:
        try:
            fields = gdb.lookup_type(ctype).fields()
        except gdb.error:
            continue
        values.update((f.name, f.enumval) for f in fields)
    _kb_check_values(values, "the libkbthreads debug info", ("KB_DRIVER",))


def _kb_symbol_addresses(name):
    """Addresses of the variable name in every objfile that has it (the
    shared library, or a static copy linked into the program), once each:
    from the debug info, else from the ELF symbol tables."""
    out = []
    for objfile in gdb.objfiles():
        for lookup in ("lookup_global_symbol", "lookup_static_symbol"):
            fn = getattr(objfile, lookup, None)
            try:
                sym = fn(name) if fn is not None else None
            except gdb.error:
                sym = None
            if sym is not None:
                addr = int(sym.value().address)
                if addr not in out:
                    out.append(addr)
    if out:
        return out
    # (only then: without debug info, a search of every ELF symbol table)
    try:
        text = gdb.execute("info variables -q ^%s$" % name, to_string=True)
    except gdb.error:
        text = ""
    for m in re.finditer(r"^(0x[0-9a-f]+)\s+%s(?:@\S*)?\s*$" % re.escape(name), text, re.M):
        addr = int(m.group(1), 16)
        if addr not in out:
            out.append(addr)
    return out


def _kb_registries():
    """[(address of a kb_live_runs, KbReader)] for every loaded copy of the
    library: through the debug info when there is some, else through the
    debug descriptor."""
    layout = _kb_debug_info_layout()
    if layout is not None:
        heads = _kb_symbol_addresses("kb_live_runs")
        if heads:
            _kb_check_debug_info_values()
            return [(h, KbReader(_kb_read, layout)) for h in heads]
    out = []
    for addr in _kb_symbol_addresses("kb_debug_offsets"):
        layout, head, _ = kb_parse_descriptor(_kb_read, addr)
        out.append((head, KbReader(_kb_read, layout)))
    if not out:
        raise KbError("kb: libkbthreads is not loaded, or it has neither debug info nor its debug "
                      "descriptor (kb_live_runs and kb_debug_offsets not found)")
    return out


def _kb_require_process():
    if gdb.selected_inferior().pid == 0:
        raise KbError("kb: the program is not running")


def _kb_live_runs():
    """[(KbRun, KbReader)] of every registry."""
    out = []
    for head, reader in _kb_registries():
        out += [(r, reader) for r in reader.runs(head)]
    return out


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

    def rank_thread(self, lwp, handle):
        """The KbRankThread kb_rank_table shows for a rank, or None."""
        t = self.find(lwp, handle)
        if t is None:
            return None
        return KbRankThread(t.ptid[1], t.name or "-", self.label(t), t.ptid[1] == self.selected)


def _kb_holder_text(r, threads):
    if r.holder == KB_DRIVER:
        tid = r.run.get("driver_tid")
        t = threads.find(tid)
        if kb_driver_idle(r):
            last = ("thread %s" % threads.label(t)) if t is not None else ("LWP %d" % tid)
            return "driver side, idle (no thread is in kb_join; last driver: %s)" % last
        if t is None:
            return "driver (LWP %d)" % tid
        return "driver (thread %s, LWP %d)" % (threads.label(t), tid)
    if 0 <= r.holder < r.nprocs:
        t = threads.find(*r.thread_ids(r.holder))
        return "rank %d (thread %s)" % (r.holder, threads.label(t))
    return "? (holder %d)" % r.holder


def _kb_print_run(r, threads):
    gdb.write(kb_run_header(r) + "\n")
    gdb.write("  baton: %s\n" % _kb_holder_text(r, threads))
    if r.nprocs <= 0:
        return
    gdb.write("\n".join(kb_rank_table(r, threads.rank_thread, True)) + "\n")
    pool = []
    for wv in r.pool:
        t = threads.find(wv.get("tid"), wv.get("thread"))
        pool.append("%s (%s)" % (threads.label(t), t.name or "-") if t is not None else "LWP %d" % wv.get("tid"))
    if pool:
        gdb.write("  idle in the ctx's pool: %d worker thread%s: %s\n"
                  % (len(pool), "" if len(pool) == 1 else "s", ", ".join(pool)))


def _kb_address(expr):
    """The address an expression gives: a pointer, an integer, or (in a
    program without debug info) a pointer variable of unknown type."""
    try:
        value = gdb.parse_and_eval(expr)
    except gdb.error as e:
        if "unknown type" not in str(e):
            raise KbError("kb: %s" % e)
        try:
            value = gdb.parse_and_eval("*(void **)&(%s)" % expr)
        except gdb.error as e2:
            raise KbError("kb: %s" % e2)
    try:
        return int(value.cast(gdb.lookup_type("unsigned long")))
    except gdb.error as e:
        raise KbError("kb: %s is not an address: %s" % (expr, e))


class _KbCommand(gdb.Command if gdb is not None else object):
    """A kb subcommand: its one-line errors become gdb errors."""

    def invoke(self, arg, from_tty):
        try:
            _kb_require_process()
            self.run(arg, from_tty)
        except KbError as e:
            raise gdb.GdbError(str(e))


class _KbPrefix(gdb.Command if gdb is not None else object):
    """libkbthreads commands.

kb ranks           every rank of every live spawn: thread, state, baton holder
kb queues [CTX]    pending worker waits and collectives of CTX (a kb_ctx *
                   expression), or of the ctx of every live spawn
kb thread RANK [RUN]  select the gdb thread of RANK (of RUN, a struct kb_run *
                   expression, when several spawns are live)

They read the library's debug info when it has some, and its debug
descriptor (kb_debug_offsets) otherwise, as in a release or stripped build."""

    def __init__(self):
        super(_KbPrefix, self).__init__("kb", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)


class _KbRanks(_KbCommand):
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

    def run(self, arg, from_tty):
        runs = _kb_live_runs()
        if not runs:
            gdb.write("no live libkbthreads spawn\n")
            return
        threads = _KbThreads()
        for r, _ in runs:
            _kb_print_run(r, threads)


class _KbQueues(_KbCommand):
    """Show the pending worker waits and collectives of a libkbthreads ctx.

Usage: kb queues [CTX]

CTX is any expression giving a kb_ctx * (a variable, `run->ctx`, or an
address). Without it, the ctx of every live spawn is shown. Elements are
listed oldest first (the order the next drain takes them); a worker wait a
suspended rank is blocked on is marked with that rank."""

    def __init__(self):
        super(_KbQueues, self).__init__("kb queues", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def run(self, arg, from_tty):
        runs = _kb_live_runs()
        reader = runs[0][1] if runs else _kb_registries()[0][1]
        if arg.strip():
            ctxs = [_kb_address(arg)]
            if ctxs[0] == 0:
                raise KbError("kb: %s is a NULL ctx" % arg.strip())
        else:
            ctxs = []
            for r, _ in runs:
                if r.run.get("ctx") not in ctxs:
                    ctxs.append(r.run.get("ctx"))
            if not ctxs:
                gdb.write("no live libkbthreads spawn (name a ctx: kb queues CTX)\n")
                return
        for ctx in ctxs:
            gdb.write("\n".join(kb_queue_lines(reader, ctx, [r for r, _ in runs])) + "\n")


class _KbThread(_KbCommand):
    """Select the gdb thread running a libkbthreads rank.

Usage: kb thread RANK [RUN]

RUN (a struct kb_run * expression, as printed by `kb ranks`; kb_live_runs
is the newest) is needed only when several spawns are live."""

    def __init__(self):
        super(_KbThread, self).__init__("kb thread", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def run(self, arg, from_tty):
        words = arg.split(None, 1)
        if not words:
            raise KbError("usage: kb thread RANK [RUN]")
        try:
            rank = int(gdb.parse_and_eval(words[0]))
        except gdb.error as e:
            raise KbError("kb: %s" % e)
        runs = [r for r, _ in _kb_live_runs()]
        if len(words) > 1:
            if words[1].strip() == "kb_live_runs":
                # the newest run, also where the symbol is not there (stripped)
                head, reader = _kb_registries()[0]
                want = reader.pointer(head)
            else:
                want = _kb_address(words[1])
            runs = [r for r in runs if r.addr == want]
            if not runs:
                raise KbError("kb: 0x%x is not a live run" % want)
        elif len(runs) > 1:
            raise KbError("kb: %d spawns are live; name the run: kb thread RANK RUN" % len(runs))
        if not runs:
            raise KbError("kb: no live libkbthreads spawn")
        r = runs[0]
        if not 0 <= rank < r.nprocs:
            raise KbError("kb: run 0x%x has no rank %d" % (r.addr, rank))
        threads = _KbThreads()
        t = threads.find(*r.thread_ids(rank))
        if t is None:
            raise KbError("kb: rank %d has no thread" % rank)
        gdb.execute("thread %s" % threads.label(t), from_tty)


if gdb is not None:
    _KbPrefix()
    _KbRanks()
    _KbQueues()
    _KbThread()
