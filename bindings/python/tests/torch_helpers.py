# SPDX-License-Identifier: MIT
"""Shared by the kbthreads.torch tests: run a body on every rank of a spawn
with an initialised default group, collecting what each rank returns; an
engine that records the collectives; a rank's tensors of one kind (real,
fake or meta)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode

import kbthreads.torch as kbt


def run(body: Callable[[int, int], Any], n: int = 4, backend: Any = "gloo", **spawn_kw: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}

    def rank_main(rank: int) -> None:
        dist.init_process_group(backend)
        try:
            out[rank] = body(rank, n)
        finally:
            dist.destroy_process_group()

    kbt.spawn(rank_main, nprocs=n, **spawn_kw)
    return out


def failure(body: Callable[[int, int], Any], n: int = 3) -> Any:
    """The SpawnException a spawn of body raises."""
    import kbthreads

    try:
        run(body, n)
    except kbthreads.SpawnException as e:
        return e
    raise AssertionError("the spawn did not fail")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment, with the kbthreads package it imported
    first on the path (a child runs the same copy)."""
    import kbthreads

    pkg = str(Path(kbthreads.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (pkg, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


class Recorder:
    """An engine that keeps every collective's description."""

    def __init__(self) -> None:
        self.seen: list[kbt.Collective] = []

    def wait(self, h: Any, meta: Any = None) -> None:
        self.seen.append(meta)


@contextlib.contextmanager
def tensors_of(data: str, fill: Callable[..., Any] = torch.ones) -> Iterator[Callable[..., Any]]:
    """A factory of the rank's tensors of one kind, made by fill (torch.ones,
    torch.zeros): real, fake (in a FakeTensorMode of the rank's own, entered
    around the body) or meta."""
    if data == "fake":
        with FakeTensorMode():
            yield fill
    elif data == "meta":
        yield lambda *shape, dtype=torch.float32: fill(*shape, dtype=dtype, device="meta")
    else:
        yield fill
