# SPDX-License-Identifier: MIT
"""Python's ``random`` functions and numpy's legacy global RandomState, per rank.

While kbthreads.torch spawns run, the modules ``random``, ``numpy.random``
and ``numpy.random.mtrand`` have a ModuleType subclass as their
``__class__``. Reading one of their legacy names (``random.random``,
``random.seed``, ``random.getstate``, ..., ``np.random.rand``,
``np.random.seed``, ``np.random.get_state``, ``mtrand._rand``, ...) on a
rank thread gives that rank's own ``random.Random`` / ``RandomState``
(or its bound method); on every other thread, and for every other name,
the module's own attribute. So nothing is copied at a handoff: each rank
draws from its own instance, and the caller's instances are never touched
by a rank.

A rank's instances are made at its first use, from the caller's state when
the spawn began (``CallerRngs``). A name bound before the spawn
(``from random import random`` at module level) is the caller's bound method
and escapes; a name read inside a rank (including a ``from ... import`` run by
the rank) is the rank's.

numpy stays optional: it is looked at only when ``numpy`` is already imported
(PyTorch imports it when it is installed); ``numpy.random`` is then imported at
the first install so that a rank importing it later still finds it per rank.
"""

from __future__ import annotations

import copy
import random
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

_tls = threading.local()  # .rngs: the RankRngs of a rank thread, while its body runs
_module_getattribute = types.ModuleType.__getattribute__


def _numpy_random() -> Any:
    """numpy.random when numpy is imported (and works), else None."""
    if "numpy" not in sys.modules:
        return None
    try:
        import numpy.random
    except ImportError:  # a numpy that fails to load numpy.random: no per-rank numpy state
        return None
    return numpy.random


class CallerRngs:
    """The caller's ``random`` and numpy legacy states, read on the thread
    that spawns (a rank that spawns reads its own)."""

    def __init__(self) -> None:
        self.random_state = random.getstate()
        self.numpy_state: Any = None  # MT19937's legacy state tuple
        self.numpy_copy: Any = None  # or a copy of the caller's RandomState, for another bit generator
        npr = _numpy_random()
        if npr is not None:
            rs = npr.mtrand._rand
            if isinstance(getattr(rs, "_bit_generator", None), npr.MT19937):
                self.numpy_state = rs.get_state()
            else:  # set_bit_generator gave it another: its legacy state cannot be read
                self.numpy_copy = copy.deepcopy(rs)


class RankRngs:
    """One rank's ``random.Random`` and ``RandomState``, each made at its
    first use from the caller's state."""

    __slots__ = ("_caller", "_random", "_numpy")

    def __init__(self, caller: CallerRngs) -> None:
        self._caller = caller
        self._random: random.Random | None = None
        self._numpy: Any = None

    def python(self) -> random.Random:
        r = self._random
        if r is None:
            r = self._random = random.Random(0)  # seeded, then given the caller's state
            r.setstate(self._caller.random_state)
        return r

    def numpy(self) -> Any:
        rs = self._numpy
        if rs is None:
            npr = _numpy_random()
            if npr is None:  # pragma: no cover - only reached through numpy's own modules
                raise RuntimeError("kbthreads.torch: numpy.random is not available")
            caller = self._caller
            if caller.numpy_copy is not None:  # another bit generator (set_bit_generator): a copy of it
                rs = copy.deepcopy(caller.numpy_copy)
            else:  # MT19937's legacy state: cheaper to set than to deep-copy
                rs = npr.RandomState(0)
                if caller.numpy_state is not None:
                    rs.set_state(caller.numpy_state)
                else:  # numpy was not imported when the spawn began: fresh entropy, as a new process's
                    rs.seed()
            self._numpy = rs
        return rs

    def set_numpy_bit_generator(self, bitgen: Any) -> None:
        """numpy.random.set_bit_generator, for this rank."""
        npr = _numpy_random()
        self._numpy = npr.RandomState(bitgen)


def enter(rngs: RankRngs) -> None:
    """The calling rank thread draws from rngs from now on."""
    _tls.rngs = rngs


def leave() -> None:
    _tls.rngs = None


# ---- the modules' classes ----------------------------------------------------------------
_RANDOM_NAMES: frozenset[str] = frozenset()  # random's functions bound to its hidden instance, and "_inst"


class _RandomModule(types.ModuleType):
    def __getattribute__(self, name: str) -> Any:
        if name in _RANDOM_NAMES:
            rngs = getattr(_tls, "rngs", None)
            if rngs is not None:
                inst = rngs.python()
                return inst if name == "_inst" else getattr(inst, name)
        return _module_getattribute(self, name)


# numpy.random's and mtrand's names: the bound methods of the global RandomState,
# read from the rank's; and the module functions that use it, answered here.
_NUMPY_METHODS: frozenset[str] = frozenset()
_NUMPY_FUNCTIONS: dict[str, Callable[[RankRngs], Any]] = {
    "seed": lambda rngs: rngs.numpy().seed,
    "ranf": lambda rngs: rngs.numpy().random_sample,
    "sample": lambda rngs: rngs.numpy().random_sample,
    "get_bit_generator": lambda rngs: lambda: rngs.numpy()._bit_generator,
    "set_bit_generator": lambda rngs: rngs.set_numpy_bit_generator,
    "_rand": lambda rngs: rngs.numpy(),
}


class _NumpyRandomModule(types.ModuleType):
    def __getattribute__(self, name: str) -> Any:
        if name in _NUMPY_METHODS:
            rngs = getattr(_tls, "rngs", None)
            if rngs is not None:
                return getattr(rngs.numpy(), name)
        elif name in _NUMPY_FUNCTIONS:
            rngs = getattr(_tls, "rngs", None)
            if rngs is not None:
                return _NUMPY_FUNCTIONS[name](rngs)
        return _module_getattribute(self, name)


_installed: list[types.ModuleType] = []  # the modules whose class is ours, while installed


def install() -> None:
    """Give the modules their dispatching classes (the caller counts spawns:
    call once for the first, ``uninstall`` after the last)."""
    global _RANDOM_NAMES, _NUMPY_METHODS
    inst = random._inst  # the module's hidden Random
    _RANDOM_NAMES = frozenset(n for n, v in vars(random).items() if getattr(v, "__self__", None) is inst) | {"_inst"}
    _set_class(random, _RandomModule)
    npr = _numpy_random()
    if npr is not None:
        mtrand = sys.modules.get("numpy.random.mtrand")
        rand = getattr(mtrand, "_rand", None)
        _NUMPY_METHODS = frozenset(n for n, v in vars(npr).items() if getattr(v, "__self__", None) is rand)
        for m in (npr, mtrand):
            if isinstance(m, types.ModuleType):
                _set_class(m, _NumpyRandomModule)


def uninstall() -> None:
    while _installed:
        m = _installed.pop()
        m.__class__ = types.ModuleType


def _set_class(m: types.ModuleType, cls: type[types.ModuleType]) -> None:
    if type(m) is types.ModuleType:  # a module another library already subclassed is left alone
        m.__class__ = cls
        _installed.append(m)
