# SPDX-License-Identifier: MIT
"""The Work a kbthreads collective returns.

``wait()`` parks the rank until a drain completed the collective, then
copies the rank's result into its output tensors (the rank's own thread
writes its own tensors). ``get_future()`` waits first and returns a
completed future (``is_completed()`` polls, giving a round when it is
not): PyTorch's C++ code (DDP's reducer) waits on that future
with a condition variable, which must never block a thread holding the
baton."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .._suspend import yield_


class KbWork(dist.Work):
    def __init__(
        self, wait: Callable[[bool], Any] | None, result: Any = None, ready: Callable[[], bool] | None = None
    ) -> None:
        super().__init__()
        self._wait = wait  # None: complete already
        self._ready = ready  # without parking: has the drain completed it?
        self._result = result
        self._error: BaseException | None = None
        self._source = -1

    def _finish(self, defer: bool = False) -> None:
        """Wait (once); defer: a future asked for during backward, whose
        simulated wait is at the end of that backward pass."""
        if self._error is not None:
            raise self._error
        if self._wait is not None:
            fn, self._wait = self._wait, None
            try:
                r = fn(defer)
            except BaseException as e:
                self._error = e
                raise
            if r is not None:
                self._result = r

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self._error is not None:
            raise self._error
        self._finish()
        return True

    def is_completed(self) -> bool:
        """Polls: when the collective is not complete yet, the rank gives up
        the baton for one round first (so a polling loop lets the other
        ranks and the drain progress, as gloo's background progress would)."""
        if self._wait is None:
            return True
        if self._ready is not None and not self._ready():
            yield_()
        if self._ready is None or self._ready():
            self.wait()
            return True
        return False

    def is_success(self) -> bool:
        return self._wait is None and self._error is None

    def exception(self) -> Any:
        return self._error

    def result(self) -> list[torch.Tensor]:
        self.wait()
        r = self._result
        return list(r) if isinstance(r, (list, tuple)) else ([] if r is None else [r])

    def source_rank(self) -> int:
        self.wait()
        return self._source

    def _source_rank(self) -> int:
        return self.source_rank()

    def synchronize(self) -> None:
        self.wait()

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        self._finish(defer=True)
        fut: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        fut.set_result(self.result())
        return fut


def done_work(result: Any = None) -> KbWork:
    return KbWork(None, result)
