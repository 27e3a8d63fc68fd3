# SPDX-License-Identifier: MIT
"""The reference module's names (``runtime_api/multiprocessing.py``), so an
import of ``SpawnException`` / ``_MultiprocessingNamespace`` can switch to
``from kbthreads.multiprocessing import ...`` unchanged.

The reference's ``_drain_pending(ctx)`` has no counterpart: the library
drains after every round on its own.
"""

from ._context import MultiprocessingNamespace
from ._errors import SpawnException

_MultiprocessingNamespace = MultiprocessingNamespace

__all__ = ["SpawnException", "_MultiprocessingNamespace", "MultiprocessingNamespace"]
