# SPDX-License-Identifier: MIT
"""KbProcessGroup: a ``torch.distributed`` process group whose collectives
meet in the spawn's table (``_meeting.py``) and complete through the
context's engine. One object per rank and group, created by the backend
creator ``_create`` that ``_world.py`` routes every CPU backend name to
inside a spawn.

Each collective records the calling rank's part (its inputs, copied where
a result refers to them; ``_tensors.py``), returns a Work, and, for the
last member to arrive, checks the calls and computes every member's result
(``_ops.py``). ``Work.wait()`` parks the rank until the drain completed the
collective and copies its result into its outputs. The meeting is
GroupMember's (``_member.py``); the collectives are in ``_reductions.py``
and ``_gathers.py``; here are the barrier and point to point, whose sends
and receives are checked and recorded here and matched by the spawn's
mailbox (``_p2p.py``)."""

from __future__ import annotations

from typing import Any

import torch

from ._gathers import Gathers
from ._member import BACKEND as BACKEND  # (the backend's name, exported from here)
from ._member import to_all
from ._p2p import Mailbox
from ._reductions import Reductions
from ._tensors import snap
from ._work import KbWork, done_work


def _nothing(part: Any) -> None:
    """A barrier's finish: nothing to write."""


class KbProcessGroup(Reductions, Gathers):
    """The kbthreads backend's process group: the collectives (Reductions,
    Gathers, on GroupMember's meeting), the barrier, and point to point."""

    def barrier(self, opts: Any = None) -> KbWork:
        return self._collective(
            self._call_of("barrier", lambda: None, []), lambda calls: to_all(calls, None), _nothing, []
        )

    # ---- point to point ---------------------------------------------------------------
    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> KbWork:
        """Eager: the data is copied at once and the send completes; the
        receiver's recv meets it (the engine sees one "send" per match)."""
        (t,) = self._tensors(tensors, "send's tensor")
        if not 0 <= dst < self.size() or dst == self._grank:
            raise ValueError(f"kbthreads.torch: send: destination {dst} is not another rank of this group")
        call = self._call_of("send", lambda: snap(t), [t])
        self._mailbox().post(self._info, self._grank, dst, tag, call)
        return done_work([t])

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> KbWork:
        (t,) = self._tensors(tensors, "recv's tensor")
        if not 0 <= src < self.size() or src == self._grank:
            raise ValueError(f"kbthreads.torch: recv: source {src} is not another rank of this group")
        return self._recv(src, tag, t)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> KbWork:
        (t,) = self._tensors(tensors, "recv's tensor")
        return self._recv(None, tag, t)

    def _recv(self, src: int | None, tag: int, t: torch.Tensor) -> KbWork:
        """A recv from group rank src (None: any source), the n-th on its
        (source, tag) channel in this rank."""
        seq = self._p2p_seq[(src, tag)]
        self._p2p_seq[(src, tag)] += 1
        call = self._call_of("recv", lambda: None, [t], root=src)
        return self._mailbox().take(self._info, seq, self._global, src, self._grank, tag, t, call)

    def _mailbox(self) -> Mailbox:
        tb = self._table
        if tb.mailbox is None:
            tb.mailbox = Mailbox(tb)
        mailbox: Mailbox = tb.mailbox
        return mailbox
