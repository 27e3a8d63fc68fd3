# SPDX-License-Identifier: MIT
"""The store a spawn's ranks rendezvous through: a dict in the process,
shared by the spawn's ranks, never a socket. A read of a key not yet set
parks the rank (yield by yield) until another rank sets it, as a TCPStore
client would block, but without holding the baton."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from torch.distributed.distributed_c10d import Store

from .._rank import rank
from .._suspend import yield_
from ._meeting import Waiter


def _b(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


class KbStore(Store):
    def __init__(self, table: Any = None) -> None:
        super().__init__()
        self._data: dict[str, bytes] = {}
        self._timeout = timedelta(minutes=30)
        self._table = table  # the spawn's SpawnTable: its deadlock check covers store reads too

    def _park_until(self, keys: list[str]) -> None:
        def present() -> bool:
            return all(k in self._data for k in keys)

        if present():
            return
        tb = self._table
        if tb is None or rank() < 0:
            while not present():
                yield_()  # RuntimeError off a rank: nothing else could ever set it
            return
        tb.park_until(rank(), present, Waiter(f"a store read of {sorted(keys)} that no rank has set", None))

    def _changed(self) -> None:
        if self._table is not None:
            self._table.epoch += 1

    def set(self, key: str, value: Any) -> None:
        self._data[key] = _b(value)
        self._changed()

    def get(self, key: str) -> bytes:
        self._park_until([key])
        return self._data[key]

    def add(self, key: str, amount: int) -> int:
        v = int(self._data.get(key, b"0")) + amount
        self._data[key] = str(v).encode()
        self._changed()
        return v

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        cur = self._data.get(key)
        e = _b(expected)
        if (cur is None and e == b"") or cur == e:
            self._data[key] = _b(desired)
            self._changed()
            return self._data[key]
        return cur if cur is not None else e

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        self._park_until(list(keys))

    def check(self, keys: list[str]) -> bool:
        return all(k in self._data for k in keys)

    def delete_key(self, key: str) -> bool:
        return self._data.pop(key, None) is not None

    def num_keys(self) -> int:
        return len(self._data)

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = timeout

    def append(self, key: str, value: Any) -> None:
        self._data[key] = self._data.get(key, b"") + _b(value)
        self._changed()

    def multi_get(self, keys: list[str]) -> list[bytes]:
        self._park_until(list(keys))
        return [self._data[k] for k in keys]

    def multi_set(self, keys: list[str], values: list[Any]) -> None:
        for k, v in zip(keys, values):
            self.set(k, v)

    def has_extended_api(self) -> bool:
        return True
