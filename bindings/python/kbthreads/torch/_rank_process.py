# SPDX-License-Identifier: MIT
"""Each rank's process-wide state its own, in kbthreads.torch spawns.

Swapped at a handoff (one reference each, so a swap is cheap): ``sys.argv``,
``sys.excepthook``, ``os.environ`` (with ``os.environb``, which shares its
data), ``sys.modules["__main__"]``, and the state of torch's default CPU
generator (read and written back: 0.85 us). Python's ``random`` and numpy's
legacy RandomState are per rank without any swap (``_rank_rngs.py``).

Ownership. At any moment one record owns the process: its values are the
ones in ``sys``, ``os`` and torch; every other record holds its own. The
owner is the outside record (threads that are not ranks of a kbthreads.torch
spawn: the caller, the driver, any other thread), or a rank's. A rank takes
the process over when it starts (``enter``) and when it resumes at a
suspension point after another thread ran (the switch hook of
kbthreads._accel, which calls ``_on_switch`` only then, so a rank yielding
to itself costs nothing here): it saves the process's values into the
owner's record, then loads its own ("lazy save": the previous owner's values
are read only when someone else needs the process). A driver whose join
returns (finished, timed out or failed) takes the process back for the
spawn's caller (``Launch.take_back``), so the caller never runs with a
rank's values, also between join slices and after a failure.

What this does not keep apart: threads that are not ranks and run while a
rank owns the process see the rank's values (the driver's engine code
between rounds, a thread of the caller's); and two spawns driven at the same
time from two threads share these values (each rank's own values come back
at its next resumption).

Invariants: ``_owner`` and the records change only under ``_lock``; while
installed (``_users`` > 0) ``_outside`` is the outside record and ``_owner``
is never None; a record's fields are meaningful only while it is not the
owner, except a rank record's before its first ``enter`` (its start values).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from .._loader import accel as _accel
from . import _rank_launch, _rank_rngs

_gen = torch.default_generator
_get_state: Callable[[], torch.Tensor] = _gen.get_state
_set_state: Callable[[torch.Tensor], Any] = _gen.set_state
_HAS_ENVIRONB = os.supports_bytes_environ

_lock = threading.Lock()
_users = 0
_outside: _Record | None = None
_owner: _Record | None = None
_written: set[Any] = set()  # encoded keys ranks wrote through os.environ (putenv): put back at the last end
_tls = threading.local()  # .rec: the _Record of a rank thread, while its body runs


class _RankEnviron(os._Environ):  # type: ignore[type-arg]  # generic only in typeshed
    """A rank's ``os.environ`` (and ``os.environb``): its own data. A write
    also reaches the process's C environment (putenv), as ``os.environ``'s
    do, so that C code and subprocesses see it; its key is noted, and the
    last spawn to end puts the caller's value back."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        _written.add(self.encodekey(key))

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        _written.add(self.encodekey(key))


class _Record:
    """One owner's values while another owner holds the process."""

    __slots__ = ("argv", "excepthook", "environ", "environb", "main", "torch_state")

    def __init__(self) -> None:
        self.argv: Any = None
        self.excepthook: Any = None
        self.environ: Any = None
        self.environb: Any = None
        self.main: Any = None
        self.torch_state: Any = None

    def save(self) -> None:
        self.argv = sys.argv
        self.excepthook = sys.excepthook
        self.environ = os.environ
        if _HAS_ENVIRONB:
            self.environb = os.environb
        self.main = sys.modules.get("__main__")
        self.torch_state = _get_state()

    def load(self) -> None:
        sys.argv = self.argv
        sys.excepthook = self.excepthook
        os.environ = self.environ  # noqa: B003  # a swap of the object, not a change of the environment
        if _HAS_ENVIRONB:
            os.environb = self.environb
        if self.main is not None:
            sys.modules["__main__"] = self.main
        else:
            sys.modules.pop("__main__", None)
        _set_state(self.torch_state)


def _switch(to: _Record) -> None:
    """Make ``to`` the owner. Under _lock."""
    global _owner
    cur = _owner
    if cur is to:
        return
    if cur is not None:
        cur.save()
    to.load()
    _owner = to


def _on_switch() -> None:
    """The switch hook: a thread resumed after another one ran."""
    rec = getattr(_tls, "rec", None)
    if rec is not None and rec is not _owner:  # a rank of a plain kbthreads spawn has none
        with _lock:
            _switch(rec)


def _install() -> None:
    global _users, _outside, _owner
    with _lock:
        if _users == 0:
            _outside = _owner = _Record()  # its values are in the process now
            _rank_rngs.install()
            _accel.set_switch_hook(_on_switch)
        _users += 1


def _uninstall() -> None:
    global _users, _outside, _owner
    with _lock:
        _users -= 1
        if _users > 0:
            return
        try:
            assert _outside is not None
            _switch(_outside)  # normally already: each spawn's end took the process back
        finally:
            _accel.set_switch_hook(None)
            _rank_rngs.uninstall()
            _restore_c_environ(os.environ)
            _outside = _owner = None


def _restore_c_environ(env: Any) -> None:
    """Put back, in the process's C environment, the caller's value of every
    key a rank wrote through its os.environ."""
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


class Launch:
    """One spawn's per-rank process state: each rank starts from a copy of
    the caller's values when the spawn begins (``environ``'s entries added,
    ``argv`` in place of sys.argv: see kbthreads.torch.spawn), and the
    caller's come back when it ends."""

    def __init__(self, nprocs: int, environ: Any = None, argv: Any = None) -> None:
        entries = _rank_launch.environ_entries(environ, nprocs)
        argvs = _rank_launch.argv_lists(argv, nprocs)
        _install()
        self._ended = False
        try:
            self.caller: _Record = getattr(_tls, "rec", None) or _outside  # type: ignore[assignment]
            with _lock:
                if _owner is self.caller:
                    self.caller.save()  # its values, read from the process
                start = self.caller
                self._argv: list[Any] = list(start.argv)
                self._excepthook = start.excepthook
                self._main = start.main
                self._torch_state = start.torch_state
                env = start.environ
                self._env_type: tuple[Any, ...] = (env.encodekey, env.decodekey, env.encodevalue, env.decodevalue)
                self._env_data: dict[Any, Any] = dict(env._data)
                envb = start.environb
                self._envb_type: tuple[Any, ...] = (
                    (envb.encodekey, envb.decodekey, envb.encodevalue, envb.decodevalue) if _HAS_ENVIRONB else ()
                )
            self._entries = entries
            self._argvs = argvs
            self._rngs = _rank_rngs.CallerRngs()
        except BaseException:
            _uninstall()
            raise

    def _record(self, rank: int) -> _Record:
        rec = _Record()
        rec.argv = list(self._argvs[rank]) if self._argvs is not None else list(self._argv)
        rec.excepthook = self._excepthook
        rec.main = self._main
        rec.torch_state = self._torch_state  # never changed in place: a save replaces it
        data = dict(self._env_data)
        env = _RankEnviron(data, *self._env_type)
        if self._entries is not None:
            encodekey, _, encodevalue, _ = self._env_type
            for k, v in self._entries[rank].items():
                data[encodekey(k)] = encodevalue(v)  # the rank's own: not put in the C environment
        rec.environ = env
        if _HAS_ENVIRONB:
            rec.environb = _RankEnviron(data, *self._envb_type)
        return rec

    def enter(self, rank: int) -> None:
        """On rank ``rank``'s thread, first thing: it takes the process over
        with its start values."""
        rec = self._record(rank)
        with _lock:
            _switch(rec)
            _accel.note_switch()
        _tls.rec = rec
        _rank_rngs.enter(_rank_rngs.RankRngs(self._rngs))

    def leave(self) -> None:
        """On the rank's thread, last thing (its values stay in the process
        until another thread takes it over)."""
        _tls.rec = None
        _rank_rngs.leave()

    def take_back(self) -> None:
        """On the thread that joins, after each join: the caller's values
        back in the process."""
        with _lock:
            _switch(self.caller)
            _accel.note_switch()

    def end(self) -> None:
        """The spawn is over (once; also after a failure or a close)."""
        if self._ended:
            return
        self._ended = True
        try:
            self.take_back()
        finally:
            _uninstall()
