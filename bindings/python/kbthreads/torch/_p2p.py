# SPDX-License-Identifier: MIT
"""Point-to-point messages (send, recv, recv from any source) of one spawn:
the mailbox that matches them. The group (``_group.py``) checks the call
and records it; here a send waits for its recv or a recv for its send, and
each match is submitted to the engine (``_meeting.py``) as a "send".

Abstract tensors (meta tensors, and fake tensors of a rank's own
FakeTensorMode: ``_tensors.is_abstract``) hold no values. A match of them
is checked (dtype and size) and priced by its size as any other, and no
value is read or written: the receiver's tensor is left as it is (a fake
one is another FakeTensorMode's than the sender's, and the two never meet
in one op). A send and its recv agree on what their tensors hold (real,
fake or meta, the call's ``data``), as the members of a collective do:
otherwise a mismatch. The one value a fake tensor can hold, its mode's
constant, travels (``_known_value``)."""

from __future__ import annotations

import collections
from typing import Any

import torch

from . import _compat
from ._dtensor_ops import Uncounted
from ._meeting import Call, GroupInfo, Meeting, SpawnTable
from ._tensors import dtype_name, write
from ._work import KbWork

# A channel: (group key, source, destination, tag), group ranks; a recv's
# source may be None (any source).
_Sent = tuple[tuple[str, tuple[int, ...], int], int, int, int]
_Wanted = tuple[tuple[str, tuple[int, ...], int], int | None, int, int]
# A send waiting in its channel: (post order, the call, the value a fake
# tensor's mode knows for it, copied at the send: see _known_value)
_Posted = tuple[int, Call, torch.Tensor | None]


class Mailbox:
    """Point-to-point messages of one spawn: eager sends wait in FIFO
    channels (group, src, dst, tag) until a recv takes them; a recv posted
    first waits for its send. Every match is submitted to the engine as a
    "send" collective, which the receiver waits for."""

    def __init__(self, table: SpawnTable) -> None:
        self.table = table
        self.sent: dict[_Sent, collections.deque[_Posted]] = collections.defaultdict(collections.deque)
        # (key or any-source key, meeting, holder), in post order
        self.waiting: list[tuple[_Wanted, Meeting, dict[str, Any]]] = []
        self.order = 0
        # matches so far per (group key, src, dst): a match's number, its
        # Collective's seq and part of its engine handle, which no other
        # match of the spawn shares (the receiver's count per (source, tag)
        # channel would repeat across tags and any-source receives)
        self.matches: collections.Counter[tuple[tuple[str, tuple[int, ...], int], int, int]] = collections.Counter()

    def post(self, info: GroupInfo, src: int, dst: int, tag: int, call: Call) -> None:
        """Group rank src sends call (its data copied) to dst."""
        with Uncounted():  # (the backend's work, not the rank's: see GroupMember._collective)
            known = _known_value(call.inputs) if call.data == "fake" else None
        for k, (key, m, holder) in enumerate(self.waiting):
            if key[0] == info.key and key[2] == dst and key[3] == tag and key[1] in (src, None):
                del self.waiting[k]
                self._match(info, m, holder, src, dst, call, known)
                return
        self.order += 1
        self.sent[(info.key, src, dst, tag)].append((self.order, call, known))
        self.table.epoch += 1

    def take(
        self,
        info: GroupInfo,
        seq: int,
        global_rank: int,
        src: int | None,
        dst: int,
        tag: int,
        t: torch.Tensor,
        recv_call: Call,
    ) -> KbWork:
        """Group rank dst (global_rank) receives into t, by its recv_call, the
        seq-th on its (src, tag) channel; the Work's wait parks it until the
        drain completed the match (which numbers it anew: _match)."""
        m = Meeting(info, seq)
        holder: dict[str, Any] = {"t": t, "src": src}
        m.calls[dst] = recv_call
        found = None
        for key, q in self.sent.items():
            if key[0] == info.key and key[2] == dst and key[3] == tag and (src is None or key[1] == src) and q:
                if found is None or q[0][0] < self.sent[found][0][0]:
                    found = key
        if found is not None:
            _, call, known = self.sent[found].popleft()
            self._match(info, m, holder, found[1], dst, call, known)
        else:
            self.waiting.append(((info.key, src, dst, tag), m, holder))
            self.table.epoch += 1
        src_txt = "any source" if src is None else f"rank {info.ranks[src]}"
        what = f"recv({dtype_name(t)} [{','.join(map(str, t.shape))}]) from {src_txt} at {recv_call.site}"
        work: KbWork

        def wait(defer: bool) -> Any:
            self.table.wait(global_rank, m, what)
            holder["finish"]()
            work._source = holder["src"]  # a group rank, as torch reads it
            if self.table.timing is not None:
                self.table.timing.settle(global_rank, m.handle, defer)
            return [t]

        work = KbWork(wait, ready=lambda: self.table.done(m))
        return work

    def _match(
        self,
        info: GroupInfo,
        m: Meeting,
        holder: dict[str, Any],
        src: int,
        dst: int,
        call: Call,
        known: torch.Tensor | None,
    ) -> None:
        t = holder["t"]
        holder["src"] = src
        recv_call = m.calls[dst]
        why = None
        if call.dtype != dtype_name(t) or call.numel != t.numel():
            why = "the sizes or dtypes differ"
        elif call.data != recv_call.data:
            why = f"a {call.data} tensor sent into a {recv_call.data} one"
        if why is not None:
            m.error = (
                f"kbthreads.torch: mismatched send/recv on group {info.name!r} ({why}): rank {info.ranks[src]} "
                f"sends {call.describe()}; rank {info.ranks[dst]} receives {recv_call.describe()}"
            )
            self.table.epoch += 1
            return
        data = call.inputs

        def finish() -> None:
            with Uncounted():  # (the backend's work, not the rank's: see GroupMember._collective)
                if recv_call.data == "fake":
                    _set_known_value(t, known)
                elif recv_call.data == "real":
                    write(t, data.view(t.shape))

        m.seq = self.matches[(info.key, src, dst)]
        self.matches[(info.key, src, dst)] += 1
        m.calls[src] = call
        m.results = {dst: None}
        holder["finish"] = finish  # the receiver copies once the drain completed the match
        self.table.submit_p2p(m, info.ranks[src], info.ranks[dst], call, call.rank, m.calls[dst].t)


# ---- the value a fake tensor's mode knows -------------------------------------------------
# A FakeTensorMode keeps the value of a tensor of at most one element made
# from Python numbers (torch.tensor([1])) as the fake tensor's constant,
# computes on such constants, and answers ``.item()`` from them. PyTorch's
# pipelining stages exchange such a tensor at their first step (their
# warm-up vote) and branch on its ``.item()``, so a recv gives a fake
# receiver the sender's constant, as gloo would write the value, and takes
# away any constant the receiver had (the names: _compat.fake_constant and
# set_fake_constant; where this torch lacks them nothing travels, as with
# PyTorch's own fake process group).


def _known_value(sent: torch.Tensor) -> torch.Tensor | None:
    """On the sender's thread: a copy of sent's constant (None without one).
    Cloning a fake tensor that has a constant makes its mode compute the
    clone of the constant, a copy no later in-place op of the sender reaches."""
    if _compat.fake_constant(sent) is None:
        return None
    return _compat.fake_constant(sent.clone())


def _set_known_value(t: torch.Tensor, known: torch.Tensor | None) -> None:
    """On the receiver's thread: t (and its views) forget their constant;
    t takes known when its shape and dtype are t's."""
    fits = known is not None and known.shape == t.shape and known.dtype == t.dtype
    _compat.set_fake_constant(t, known if fits else None)
