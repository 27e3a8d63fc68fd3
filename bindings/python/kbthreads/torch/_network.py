# SPDX-License-Identifier: MIT
"""The network model: how long a collective takes, from its description.

Alpha-beta per step: a message of b bytes over a link costs
``latency + b / bandwidth``. Each collective kind uses the textbook
algorithm (docs/torch-time.md has the formulas and what they leave out). A
two-level topology (``ranks_per_node``) puts consecutive global ranks on a
node: a collective within one node uses the intra-node link; one across
nodes runs hierarchically where the algorithm allows (all-reduce:
reduce-scatter inside each node, all-reduce across nodes, all-gather inside
each node) and otherwise at the inter-node link's cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_ALGORITHMS = ("ring", "tree")


def _positive(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(
            f"kbthreads.torch.Network: {name} must be a positive finite number of "
            f"{'seconds' if 'latency' in name else 'bytes per second'}, not {v!r}"
        )
    return float(v)


def _latency(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"kbthreads.torch.Network: {name} must be a finite number of seconds >= 0, not {v!r}")
    return float(v)


@dataclass(frozen=True)
class Link:
    latency: float  # seconds per message
    bandwidth: float  # bytes per second

    def cost(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


def _log2(p: int) -> int:
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


class Network:
    """``Network(latency, bandwidth, *, ranks_per_node=None, inter_latency=None,
    inter_bandwidth=None, allreduce="ring")``: seconds, bytes per second.

    ``allreduce``: "ring" (2(p-1) steps of n/p bytes) or "tree" (a binomial
    reduce then broadcast: 2 ceil(log2 p) steps of n bytes). With
    ``ranks_per_node``, ranks r and s share a node when r // ranks_per_node
    == s // ranks_per_node, and ``inter_latency`` / ``inter_bandwidth`` (both
    required) price links between nodes."""

    def __init__(
        self,
        latency: float,
        bandwidth: float,
        *,
        ranks_per_node: int | None = None,
        inter_latency: float | None = None,
        inter_bandwidth: float | None = None,
        allreduce: str = "ring",
    ) -> None:
        self.intra = Link(_latency("latency", latency), _positive("bandwidth", bandwidth))
        if allreduce not in _ALGORITHMS:
            raise ValueError(f"kbthreads.torch.Network: allreduce must be one of {_ALGORITHMS}, not {allreduce!r}")
        self.allreduce = allreduce
        if ranks_per_node is None:
            if inter_latency is not None or inter_bandwidth is not None:
                raise ValueError("kbthreads.torch.Network: inter_latency and inter_bandwidth need ranks_per_node")
            self.ranks_per_node = None
            self.inter = self.intra
        else:
            if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 1:
                raise ValueError(f"kbthreads.torch.Network: ranks_per_node must be an int >= 1, not {ranks_per_node!r}")
            if inter_latency is None or inter_bandwidth is None:
                raise ValueError(
                    "kbthreads.torch.Network: a two-level topology (ranks_per_node) needs "
                    "inter_latency and inter_bandwidth"
                )
            self.ranks_per_node = ranks_per_node
            self.inter = Link(_latency("inter_latency", inter_latency), _positive("inter_bandwidth", inter_bandwidth))

    def __repr__(self) -> str:
        s = f"Network(latency={self.intra.latency!r}, bandwidth={self.intra.bandwidth!r}"
        if self.ranks_per_node is not None:
            s += (
                f", ranks_per_node={self.ranks_per_node}, inter_latency={self.inter.latency!r}, "
                f"inter_bandwidth={self.inter.bandwidth!r}"
            )
        return s + f", allreduce={self.allreduce!r})"

    # ---- topology -------------------------------------------------------------------------------
    def _nodes(self, ranks: tuple[int, ...]) -> dict[int, list[int]]:
        k = self.ranks_per_node or (max(ranks) + 1 if ranks else 1)
        nodes: dict[int, list[int]] = {}
        for r in ranks:
            nodes.setdefault(r // k, []).append(r)
        return nodes

    def link(self, ranks: tuple[int, ...]) -> Link:
        """The link a flat algorithm over ranks is bounded by."""
        return self.intra if len(self._nodes(ranks)) <= 1 else self.inter

    # ---- the algorithms (p ranks, n bytes as named) --------------------------------------------
    @staticmethod
    def ring_allreduce(link: Link, p: int, n: float) -> float:
        return 0.0 if p <= 1 else 2 * (p - 1) * link.cost(n / p)

    @staticmethod
    def tree_allreduce(link: Link, p: int, n: float) -> float:
        return 2 * _log2(p) * link.cost(n)

    @staticmethod
    def ring_allgather(link: Link, p: int, n_each: float) -> float:
        """p ranks each contributing n_each bytes; everyone ends with p * n_each."""
        return 0.0 if p <= 1 else (p - 1) * link.cost(n_each)

    @staticmethod
    def ring_reduce_scatter(link: Link, p: int, n: float) -> float:
        """p ranks each holding n bytes; rank k ends with piece k (n / p)."""
        return 0.0 if p <= 1 else (p - 1) * link.cost(n / p)

    @staticmethod
    def tree_broadcast(link: Link, p: int, n: float) -> float:
        return _log2(p) * link.cost(n)

    @staticmethod
    def linear_root(link: Link, p: int, n_each: float) -> float:
        """gather / scatter: the root exchanges one piece with each other rank."""
        return 0.0 if p <= 1 else (p - 1) * link.cost(n_each)

    @staticmethod
    def pairwise_alltoall(link: Link, p: int, n_piece: float) -> float:
        return 0.0 if p <= 1 else (p - 1) * link.cost(n_piece)

    @staticmethod
    def barrier_time(link: Link, p: int) -> float:
        return _log2(p) * link.latency

    def _allreduce_flat(self, link: Link, p: int, n: float) -> float:
        f = self.ring_allreduce if self.allreduce == "ring" else self.tree_allreduce
        return f(link, p, n)

    # ---- one collective --------------------------------------------------------------------------
    def duration(self, meta: Any) -> float:
        """Seconds a collective described by meta (a kbthreads.torch.Collective) takes."""
        ranks = tuple(meta.ranks)
        kind = meta.kind
        if kind == "send":
            return self.link((meta.root, meta.peer)).cost(meta.nbytes[0])
        p = len(ranks)
        if p <= 1:
            return 0.0
        link = self.link(ranks)
        nb = list(meta.nbytes)
        if kind == "all_reduce":
            n = max(nb)
            nodes = self._nodes(ranks)
            if len(nodes) > 1 and self.ranks_per_node is not None:
                k = max(len(v) for v in nodes.values())
                return (
                    self.ring_reduce_scatter(self.intra, k, n)
                    + self._allreduce_flat(self.inter, len(nodes), n / k)
                    + self.ring_allgather(self.intra, k, n / k)
                )
            return self._allreduce_flat(link, p, n)
        if kind in ("all_gather", "all_gather_into_tensor", "all_gather_coalesced"):
            return self.ring_allgather(link, p, max(nb))
        if kind in ("reduce_scatter", "reduce_scatter_tensor"):
            return self.ring_reduce_scatter(link, p, max(nb))
        if kind in ("broadcast", "reduce"):
            return self.tree_broadcast(link, p, max(nb))
        if kind in ("gather",):
            return self.linear_root(link, p, max(nb))
        if kind in ("scatter",):
            return self.linear_root(link, p, max(nb) / p)
        if kind in ("all_to_all", "all_to_all_single"):
            return self.pairwise_alltoall(link, p, max(nb) / p)
        if kind == "barrier":
            return self.barrier_time(link, p)
        raise ValueError(f"kbthreads.torch.Network: no model for collective kind {kind!r}")
