# SPDX-License-Identifier: MIT
"""Point-to-point messages (send, recv, recv from any source) of one spawn:
the mailbox that matches them. The group (``_group.py``) checks the call
and records it; here a send waits for its recv or a recv for its send, and
each match is submitted to the engine (``_meeting.py``) as a "send"."""

from __future__ import annotations

import collections
from typing import Any

import torch

from ._meeting import Call, GroupInfo, Meeting, SpawnTable
from ._tensors import dtype_name, write
from ._work import KbWork

# A channel: (group key, source, destination, tag), group ranks; a recv's
# source may be None (any source).
_Sent = tuple[tuple[str, tuple[int, ...], int], int, int, int]
_Wanted = tuple[tuple[str, tuple[int, ...], int], int | None, int, int]


class Mailbox:
    """Point-to-point messages of one spawn: eager sends wait in FIFO
    channels (group, src, dst, tag) until a recv takes them; a recv posted
    first waits for its send. Every match is submitted to the engine as a
    "send" collective, which the receiver waits for."""

    def __init__(self, table: SpawnTable) -> None:
        self.table = table
        self.sent: dict[_Sent, collections.deque[tuple[int, Call]]] = collections.defaultdict(collections.deque)
        # (key or any-source key, meeting, holder), in post order
        self.waiting: list[tuple[_Wanted, Meeting, dict[str, Any]]] = []
        self.order = 0

    def post(self, info: GroupInfo, src: int, dst: int, tag: int, call: Call) -> None:
        """Group rank src sends call (its data copied) to dst."""
        for k, (key, m, holder) in enumerate(self.waiting):
            if key[0] == info.key and key[2] == dst and key[3] == tag and key[1] in (src, None):
                del self.waiting[k]
                self._match(info, m, holder, src, dst, call)
                return
        self.order += 1
        self.sent[(info.key, src, dst, tag)].append((self.order, call))
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
        drain completed the match."""
        m = Meeting(info, seq)
        holder: dict[str, Any] = {"t": t, "src": src}
        m.calls[dst] = recv_call
        found = None
        for key, q in self.sent.items():
            if key[0] == info.key and key[2] == dst and key[3] == tag and (src is None or key[1] == src) and q:
                if found is None or q[0][0] < self.sent[found][0][0]:
                    found = key
        if found is not None:
            _, call = self.sent[found].popleft()
            self._match(info, m, holder, found[1], dst, call)
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

    def _match(self, info: GroupInfo, m: Meeting, holder: dict[str, Any], src: int, dst: int, call: Call) -> None:
        t = holder["t"]
        holder["src"] = src
        if call.dtype != dtype_name(t) or call.numel != t.numel():
            m.error = (
                f"kbthreads.torch: mismatched send/recv on group {info.name!r}: rank {info.ranks[src]} "
                f"sends {call.describe()}; rank {info.ranks[dst]} receives {m.calls[dst].describe()}"
            )
            self.table.epoch += 1
            return
        data = call.inputs

        def finish() -> None:
            write(t, data.view(t.shape))

        m.calls[src] = call
        m.results = {dst: None}
        holder["finish"] = finish  # the receiver copies once the drain completed the match
        self.table.submit_p2p(m, info.ranks[src], info.ranks[dst], call, call.rank, m.calls[dst].t)
