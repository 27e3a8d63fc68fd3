# SPDX-License-Identifier: MIT
"""Process-wide hook and handler tables of torch, kept per rank.

Two tables of torch are module or class state that a rank changes for
itself, and that the other ranks, which run between its changes at every
collective, must not see:

- nn.Module's global hooks (``register_module_forward_pre_hook`` and the
  forward, backward-pre and full-backward ones, and the registration
  hooks) and the optimizers' (``register_optimizer_step_pre_hook``): the
  module trackers (``torch.distributed._tools.ModTracker``,
  ``CommDebugMode``'s, ``torch.utils.module_tracker``) and ``MemTracker``
  register them when entered. Another rank's forward would run them, and
  the tracker would see that rank's modules ("The Module hierarchy
  tracking is wrong").
- DTensor's custom op handlers (``DTensor._op_dispatcher._custom_op_handlers``),
  which ``loss_parallel()`` adds to on entry and removes from on exit: a
  rank leaving first would take them from a rank still inside (and the
  second removal fails: ``KeyError: aten._log_softmax.default``).

The hooks: each of these tables is replaced, once, by a dict of this
module's type that wraps a hook registered on a rank thread so that it runs
only on that rank (``_RankHook``); hooks registered on other threads stay
process wide, as before. The replacement stays for the process (a handle a
program holds must find its table); handles made before it are moved to it.
Off rank threads the tables behave as torch's own.

The handlers: while spawns run, the dispatcher's ``_custom_op_handlers``
is a property answering each rank with its own dict (a copy of the
process's table at the rank's first use: a real dict, which torch's C++
dispatch reads directly), and every other thread with the process's.
"""

from __future__ import annotations

import collections
import gc
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from . import _compat

_current_key: Callable[[], int | None] = lambda: None  # noqa: E731  # set by install()
# (module, table): torch's process-wide hook tables, each read by name at
# every use (so a replacement is seen), whose hooks return None for "no change"
_HOOK_TABLES = _compat.GLOBAL_HOOK_TABLES
_tables_replaced = False
_saved_dispatcher_class: type | None = None
_tls = threading.local()  # .key, .handlers: a rank's own handler table (freed with the rank's thread state)


class _RankHook:
    """A global module hook registered by one rank: runs only on it
    (elsewhere it returns None, which every kind of module hook reads as
    "no change")."""

    __slots__ = ("hook", "key", "__weakref__")

    def __init__(self, hook: Callable[..., Any], key: int) -> None:
        self.hook = hook
        self.key = key

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _current_key() == self.key:
            return self.hook(*args, **kwargs)
        return None

    def __repr__(self) -> str:
        return f"<hook of kbthreads rank key {self.key}: {self.hook!r}>"


class _RankHookTable(collections.OrderedDict[Any, Any]):
    """One of nn.Module's global hook tables: a hook set from a rank thread
    is stored wrapped (_RankHook). Reads are the OrderedDict's own."""

    def __setitem__(self, key: Any, value: Any) -> None:
        rank = _current_key()
        if rank is not None and callable(value) and not isinstance(value, _RankHook):
            value = _RankHook(value, rank)
        super().__setitem__(key, value)


def _replace_hook_tables() -> None:
    """Once per process: torch's global hook tables (_HOOK_TABLES) become
    _RankHookTables with the same entries, and the RemovableHandles that
    point at the old tables point at the new ones (found only when some
    handle refers to an old table: usually none does, and no search runs)."""
    global _tables_replaced
    if _tables_replaced:
        return
    from torch.utils.hooks import RemovableHandle

    moved: dict[int, Any] = {}
    for module, name in _HOOK_TABLES:
        mod = importlib.import_module(module)  # (both imported by torch itself)
        old = getattr(mod, name, None)
        if not isinstance(old, dict):  # a torch without this table
            continue
        new = _RankHookTable(old)
        setattr(mod, name, new)
        moved[id(old)] = (old, new)
    refs = [r for old, _ in moved.values() for r in weakref.getweakrefs(old)]
    if refs:
        for obj in gc.get_referrers(*refs):
            # the handle itself refers to its weakref, or (where its
            # attributes live in a dict of their own) that dict does
            attrs = vars(obj) if isinstance(obj, RemovableHandle) else obj
            if not isinstance(attrs, dict) or not callable(attrs.get("hooks_dict_ref")):
                continue
            target = attrs["hooks_dict_ref"]()
            if target is not None and id(target) in moved:
                attrs["hooks_dict_ref"] = weakref.ref(moved[id(target)][1])
    _tables_replaced = True


def forget(key: int) -> None:
    """Drop the global module hooks rank key left registered: they could
    never run again (no rank has its key after it), and a hook in a table
    sends every module call down nn.Module's slower path."""
    if not _tables_replaced:
        return
    for module, name in _HOOK_TABLES:
        mod = sys.modules[module]
        table = getattr(mod, name, None)
        if not isinstance(table, _RankHookTable):
            continue
        for hook_id in [k for k, v in table.items() if isinstance(v, _RankHook) and v.key == key]:
            del table[hook_id]
            for extra in _compat.FORWARD_HOOK_EXTRAS:
                getattr(mod, extra, {}).pop(hook_id, None)


def _own_handlers(dispatcher: Any) -> dict[Any, Any]:
    """The calling rank's handler table (made at its first use), or the
    process's off rank threads."""
    key = _current_key()
    base: dict[Any, Any] = dispatcher.__dict__[_compat.OP_HANDLERS_ATTR]
    if key is None:
        return base
    if getattr(_tls, "key", None) != key:
        _tls.key = key
        _tls.handlers = dict(base)
    handlers: dict[Any, Any] = _tls.handlers
    return handlers


def _set_own_handlers(dispatcher: Any, value: dict[Any, Any]) -> None:
    key = _current_key()
    if key is None:
        dispatcher.__dict__[_compat.OP_HANDLERS_ATTR] = value
    else:
        _tls.key = key
        _tls.handlers = value


_DTENSOR_API = _compat.DTENSOR_API_MODULE  # where DTensor and its dispatcher are made


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs then() once the module named has been executed: DTensor's
    dispatcher is made per rank when a rank first imports DTensor (the
    import is slow: a spawn never imports it itself)."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then
        self.busy = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(fullname)  # what the other finders give
        finally:
            self.busy = False
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return None
        execute = loader.exec_module
        then = self.then

        def exec_module(module: ModuleType) -> None:
            execute(module)
            then()

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this spec's loader only
        return spec


_finder: _AfterImport | None = None


def _per_rank_dispatcher() -> None:
    """Make DTensor's dispatcher answer each rank with its own handler
    table (while installed, once DTensor exists)."""
    global _saved_dispatcher_class
    d = _compat.dtensor_dispatcher(sys.modules.get(_DTENSOR_API))
    if _saved_dispatcher_class is not None or d is None or _compat.OP_HANDLERS_ATTR not in vars(d):
        return  # done already, or a torch without the table: nothing to keep per rank
    cls = type(d)
    per_rank = type(
        cls.__name__,
        (cls,),
        {
            _compat.OP_HANDLERS_ATTR: property(_own_handlers, _set_own_handlers),
            "__doc__": cls.__doc__,
            "__module__": cls.__module__,
        },
    )
    _saved_dispatcher_class = cls
    d.__class__ = per_rank


def install(current_key: Callable[[], int | None]) -> None:
    """While spawns run (called by the first spawn to start)."""
    global _current_key, _finder
    _current_key = current_key
    _replace_hook_tables()
    if _DTENSOR_API in sys.modules:
        _per_rank_dispatcher()
    else:
        _finder = _AfterImport(_DTENSOR_API, _per_rank_dispatcher)
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """The last spawn ended: the dispatcher's table is the process's again
    (the hook tables stay; off rank threads they act as torch's own)."""
    global _saved_dispatcher_class, _finder
    if _finder is not None:
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _finder = None
    if _saved_dispatcher_class is not None:
        # (DTensor's module is imported: the class was replaced)
        _compat.dtensor_dispatcher(sys.modules[_DTENSOR_API]).__class__ = _saved_dispatcher_class
        _saved_dispatcher_class = None
