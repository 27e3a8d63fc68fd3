# SPDX-License-Identifier: MIT
"""A Llama-3-style decoder in plain PyTorch: token embedding, blocks of
RMSNorm + rotary grouped-query attention (through
torch.nn.functional.scaled_dot_product_attention) + RMSNorm + SwiGLU feed
forward, a final RMSNorm and an output projection.

A model may hold only some of the layers (a pipeline stage): ``layers`` names
which, and the embedding and the head are present only in the stage that
needs them. Every piece is initialised from a seed of its own (the model's
seed and the piece's place in the whole model), so a stage holds exactly the
weights the unsplit model holds for the same layers: the split model and the
unsplit one compute the same function.

The attention computes its head count from its input's width, not from the
configuration: under tensor parallelism a rank's query, key and value
projections produce only its share of the heads (column-wise split), and
the same code runs on that share.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class LlamaConfig:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab: int
    max_seq: int
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def check(self) -> None:
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads or self.head_dim % 2:
            raise ValueError(
                f"dim {self.dim}, {self.n_heads} heads and {self.n_kv_heads} KV heads: the heads must divide dim "
                "into an even head size, and the KV heads the heads"
            )


# Llama 3 8B's shapes (32 layers in the real model; a dry run may hold fewer).
LLAMA3_8B = LlamaConfig(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336, vocab=128256, max_seq=8192)


def rotary_tables(cfg: LlamaConfig, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, (seq, head_dim / 2) each: position p
    turns pair i by p * theta^(-2i / head_dim)."""
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x (batch, seq, heads, head_dim): the two
    halves of each head are rotated as the real and imaginary parts, in
    float32, the result in x's dtype."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos[: x.shape[1]].view(1, x.shape[1], 1, half), sin[: x.shape[1]].view(1, x.shape[1], 1, half)
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1).to(x.dtype)  # the tables are float32


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.head_dim = cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False, dtype=dtype)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False, dtype=dtype)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False, dtype=dtype)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # -1: the heads this rank holds (all of them without tensor parallelism)
        q = rotate(self.wq(x).view(b, s, -1, self.head_dim), cos, sin)
        k = rotate(self.wk(x).view(b, s, -1, self.head_dim), cos, sin)
        v = self.wv(x).view(b, s, -1, self.head_dim)
        groups = q.shape[2] // k.shape[2]  # query heads per KV head: grouped-query attention
        k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False, dtype=dtype)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False, dtype=dtype)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # SwiGLU


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps, dtype=dtype)
        self.attention = Attention(cfg, dtype)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps, dtype=dtype)
        self.feed_forward = FeedForward(cfg, dtype)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """The whole decoder, or one pipeline stage of it: ``layers`` (default
    all) are the global indices of the blocks held; the embedding comes with
    layer 0's stage, the final norm and the head with the last layer's.
    forward takes token ids (first stage) or the previous stage's hidden
    state, and returns logits (last stage) or the hidden state. ``dtype``:
    the parameters' (default torch's default dtype); made in it, not
    converted after, so that it works as well under a fake tensor mode."""

    def __init__(
        self, cfg: LlamaConfig, layers: Iterable[int] | None = None, *, seed: int = 0, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        cfg.check()
        held = list(range(cfg.n_layers)) if layers is None else list(layers)
        if not held or any(not 0 <= i < cfg.n_layers for i in held) or held != sorted(set(held)):
            raise ValueError(f"layers must be increasing indices in 0..{cfg.n_layers - 1}, not {held}")
        self.cfg = cfg
        first, last = held[0] == 0, held[-1] == cfg.n_layers - 1
        # Each piece from a seed of its own: a stage's weights are the unsplit model's.
        torch.manual_seed(seed * 100003)
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.dim, dtype=dtype) if first else None
        self.layers = nn.ModuleDict()
        for i in held:
            torch.manual_seed(seed * 100003 + 1 + i)
            self.layers[str(i)] = Block(cfg, dtype)
        torch.manual_seed(seed * 100003 + 1 + cfg.n_layers)
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps, dtype=dtype) if last else None
        self.output = nn.Linear(cfg.dim, cfg.vocab, bias=False, dtype=dtype) if last else None
        cos, sin = rotary_tables(cfg, cfg.max_seq)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(x) if self.tok_embeddings is not None else x
        for block in self.layers.values():
            h = block(h, self.rope_cos, self.rope_sin)
        if self.norm is not None and self.output is not None:
            h = self.output(self.norm(h))
        return h


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean next-token loss over every position of the batch."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
