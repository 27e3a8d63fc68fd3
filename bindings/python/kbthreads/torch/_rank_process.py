# SPDX-License-Identifier: MIT
"""Each rank's process-wide state its own, in kbthreads.torch spawns.

Swapped when another thread takes the baton (one reference each, so a swap
is cheap): ``sys.argv``, ``sys.excepthook``, ``os.environ`` (with
``os.environb``, which shares its data), ``sys.modules["__main__"]``,
``sys.stdout`` and ``sys.stderr`` (a rank's ``redirect_stdout`` is its own; the
objects themselves are the caller's, shared), and the state of torch's
default CPU generator (read and written back: most of a swap; docs/bench-torch.md).
Python's ``random`` and numpy's legacy RandomState are per rank without any
swap (``_rank_rngs.py``).

The swap is the state switch of kbthreads._accel (``_accel.c``), in C: a
record is a list of one value per swapped item, and one record, the owner,
has its values in the process. The owner is the outside record (threads
that are not ranks of a kbthreads.torch spawn: the caller, the driver, any
other thread) or a rank's. A rank takes the process over when it starts
(``Launch.enter``) and when it resumes at a suspension point after another
thread ran (the switch, called by the binding only then: a rank yielding to
itself costs nothing here): the process's values are saved into the owner's
record, then the rank's are loaded ("lazy save"). A driver whose join
returns (finished, timed out, failed or closed) takes the process back for
the spawn's caller (``Launch.take_back``), so the caller never runs with a
rank's values, also between join slices.

What this does not keep apart: a thread that is not a rank and runs while a
rank owns the process sees the rank's values (the driver's engine code
between rounds, another thread of the caller's); two spawns driven at the
same time from two threads share these values (each rank's own come back at
its next resumption).

Invariants: installed (``_users`` > 0) means the switch table is set up and
``_outside`` is the outside record; a record's values are meaningful only
while it is not the owner, except a rank's before its ``enter`` (its start
values).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import torch

from .._loader import accel as _accel
from . import _rank_launch, _rank_rngs

_gen = torch.default_generator
_HAS_ENVIRONB = os.supports_bytes_environ
_ABSENT = object()  # a record's value for a key not in its dict (no __main__)

# The swapped items: (dict, key) places, then (get, set) accessors; a record
# holds their values in this order.
_PLACES: tuple[tuple[dict[Any, Any], Any], ...] = (
    (vars(sys), "argv"),
    (vars(sys), "excepthook"),
    (vars(os), "environ"),
    *(((vars(os), "environb"),) if _HAS_ENVIRONB else ()),
    (sys.modules, "__main__"),
    (vars(sys), "stdout"),
    (vars(sys), "stderr"),
)
_ACCESSORS = ((_gen.get_state, _gen.set_state),)
_ARGV, _EXCEPTHOOK, _ENVIRON = 0, 1, 2
_ENVIRONB = 3 if _HAS_ENVIRONB else -1

_lock = threading.RLock()  # _users, _outside, _written
_enabled = True  # False only in the bench's "off" side (bench/torch/torch_bench.py): nothing per rank
_users = 0
_outside: list[Any] | None = None
_written: set[Any] = set()  # encoded keys ranks wrote through os.environ (putenv): put back at the last end
_tls = threading.local()  # .rec: the record of a rank thread, while its body runs


class _RankEnviron(os._Environ):  # type: ignore[type-arg]  # generic only in typeshed
    """A rank's ``os.environ`` (and ``os.environb``): its own data. A write
    also reaches the process's C environment (putenv), as ``os.environ``'s
    do, so that C code and subprocesses see it; its key is noted, and the
    last spawn to end puts the caller's value back there."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        with _lock:
            _written.add(self.encodekey(key))

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        with _lock:
            _written.add(self.encodekey(key))


def _current() -> list[Any]:
    """The process's values now, as a record."""
    d = [_ABSENT if k not in ns else ns[k] for ns, k in _PLACES]
    return d + [get() for get, _ in _ACCESSORS]


def _install() -> None:
    global _users, _outside
    with _lock:
        if _users == 0:
            _outside = [None] * (len(_PLACES) + len(_ACCESSORS))  # its values are in the process now
            _rank_rngs.install()
            _accel.switch_setup(_PLACES, _ACCESSORS, _outside, _ABSENT)
        _users += 1


def _uninstall() -> None:
    global _users, _outside
    with _lock:
        _users -= 1
        if _users > 0:
            return
        try:
            if _outside is not None:
                _accel.switch_take(_outside)  # normally a no-op: each spawn's end took the process back
        finally:
            _accel.switch_clear()
            _rank_rngs.uninstall()
            _restore_c_environ(os.environ)
            _outside = None


def _restore_c_environ(env: Any) -> None:
    """Put back, in the process's C environment, the caller's value of every
    key a rank wrote through its os.environ. Under _lock."""
    data = getattr(env, "_data", None)
    keys = list(_written)
    _written.clear()
    if not isinstance(data, dict):
        return
    for k in keys:
        v = data.get(k)
        try:
            if v is None:
                os.unsetenv(k)
            else:
                os.putenv(k, v)
        except (OSError, ValueError):  # pragma: no cover - a key os.putenv took once
            pass


def _set_enabled(on: bool) -> None:
    """The bench's switch (bench/torch/torch_bench.py measures a handoff with and
    without the swaps): spawns that begin after ``_set_enabled(False)`` keep
    nothing per rank. Not for programs."""
    global _enabled
    _enabled = on


class Launch:
    """One spawn's per-rank process state: each rank starts from a copy of
    the caller's values when the spawn begins (``environ``'s entries added,
    ``argv`` in place of sys.argv: see kbthreads.torch.spawn), and the
    caller's come back when it ends. Made on the caller's thread."""

    def __init__(self, nprocs: int, environ: Any = None, argv: Any = None) -> None:
        """Checks environ and argv (TypeError / ValueError); nothing is
        installed until ``begin``."""
        self._entries = _rank_launch.environ_entries(environ, nprocs)
        self._argvs = _rank_launch.argv_lists(argv, nprocs)
        self._begun = self._off = False

    def begin(self) -> None:
        """On the caller's thread, before the spawn: the caller's values now
        are the ranks' start values. Raises with nothing installed."""
        self._off = not _enabled
        if self._off:
            return
        _install()
        try:
            caller = getattr(_tls, "rec", None)  # a rank that spawns is the caller
            outside = _outside
            assert outside is not None  # installed
            self.caller: list[Any] = caller if caller is not None else outside
            start = _current() if _accel.switch_owner() is self.caller else list(self.caller)
            self._start = start
            self._env_codec = _codec(start[_ENVIRON])
            self._envb_codec = _codec(start[_ENVIRONB]) if _HAS_ENVIRONB else ()
            self._rngs = _rank_rngs.CallerRngs()
        except BaseException:
            _uninstall()
            raise
        self._begun = True

    def _record(self, rank: int) -> list[Any]:
        rec = list(self._start)  # excepthook, __main__, torch's state: the caller's objects (a save replaces them)
        rec[_ARGV] = list(self._argvs[rank] if self._argvs is not None else self._start[_ARGV])
        data = dict(self._start[_ENVIRON]._data)
        if self._entries is not None:
            encodekey, _, encodevalue, _ = self._env_codec
            for k, v in self._entries[rank].items():
                data[encodekey(k)] = encodevalue(v)  # the rank's own: not put in the C environment
        rec[_ENVIRON] = _RankEnviron(data, *self._env_codec)
        if _HAS_ENVIRONB:
            rec[_ENVIRONB] = _RankEnviron(data, *self._envb_codec)
        return rec

    def enter(self, rank: int) -> None:
        """On rank ``rank``'s thread, first thing: it takes the process over
        with its start values."""
        if not self._begun:
            return
        rec = self._record(rank)
        _tls.rec = rec
        _accel.switch_bind(rec)
        _accel.switch_take(rec)
        _rank_rngs.enter(_rank_rngs.RankRngs(self._rngs))

    def leave(self) -> None:
        """On the rank's thread, last thing (its values stay in the process
        until another thread takes it over)."""
        if self._off:
            return
        _tls.rec = None
        _accel.switch_bind(None)
        _rank_rngs.leave()

    def take_back(self) -> None:
        """On the thread that joins, after each join: the caller's values
        back in the process."""
        if self._begun:
            _accel.switch_take(self.caller)

    def end(self) -> None:
        """The spawn is over (once; also after a failure or a close)."""
        if not self._begun:
            return
        try:
            self.take_back()
        finally:
            self._begun = False
            _uninstall()


def _codec(env: Any) -> tuple[Any, ...]:
    """The key and value codecs of an os._Environ, to make another like it."""
    return (env.encodekey, env.decodekey, env.encodevalue, env.decodevalue)
