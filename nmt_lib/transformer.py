"""The Transformer (Vaswani et al. 2017), the model that replaced recurrent encoder–decoders: no
recurrence, attention everywhere.

With ``d = m`` (the embedding size), ``h`` heads of ``d_k = d / h``::

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V                       (masked: padding, the future)
    MultiHead(X, Y) = [head_1; ..; head_h] W_O,  head_j = Attention(X W_Q^j, Y W_K^j, Y W_V^j)
    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2
    PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))

An encoder layer is ``x = LN(x + MultiHead(x, x)); x = LN(x + FFN(x))`` (post-norm, as the paper);
a decoder layer adds, between the two, attention to the encoder's output, ``x = LN(x +
MultiHead(x, enc))``, and its self-attention sees only earlier positions. Inputs are ``√d E w +
PE``. The decoder's input at target position ``i`` is ``y_{i-1}``, a zero embedding at ``i = 1`` (as
the paper's models have no previous word there), and ``p(y_i | y_<i, x) = softmax(W_y x_i + b_y)``
from its last layer. No dropout and no label smoothing (the budget runs are far from overfitting).

The interface is the paper models' (:mod:`nmt_lib.steps`): a decoder state is the target prefix
(ids, ``[G * B, i - 1]``), and each step runs the decoder over the whole prefix again (no cache:
plain, and cheap at these lengths). The alignment a step returns is the last decoder layer's
encoder–decoder attention at that position, averaged over the heads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .config import ModelConfig
from .decoder import Decoder
from .model import Encoded
from .steps import Searchable


def positions(T: int, d: int, like: Tensor) -> Tensor:
    """The sinusoidal position encodings ``PE [T, d]``."""
    pos = torch.arange(T, dtype=like.dtype, device=like.device)[:, None]
    two_i = torch.arange(0, d, 2, dtype=like.dtype, device=like.device)
    angle = pos / 10000.0 ** (two_i / d)  # [T, ceil(d / 2)]
    pe = like.new_zeros(T, d)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : d // 2]
    return pe


class MultiHead(nn.Module):
    """``W_Q, W_K, W_V, W_O`` ``[d, d]`` (the heads side by side), no biases."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            setattr(self, name, nn.Parameter(torch.empty(d, d)))

    def forward(self, x: Tensor, y: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """``x [B, Tq, d]`` attends to ``y [B, Tk, d]`` where ``mask [B, Tq or 1, Tk]`` is True.
        Returns ``[B, Tq, d]`` and the weights ``[B, heads, Tq, Tk]``."""
        B, Tq, d = x.shape
        split = lambda t: t.view(B, -1, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(x @ self.W_Q), split(y @ self.W_K), split(y @ self.W_V)  # [B, h, T, d_k]
        e = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)  # [B, h, Tq, Tk]
        e = e.to(torch.promote_types(e.dtype, torch.float32))
        a = e.masked_fill(~mask[:, None], float("-inf")).softmax(-1)
        out = (a.to(v.dtype) @ v).transpose(1, 2).reshape(B, Tq, d)
        return out @ self.W_O, a


class FeedForward(nn.Module):
    def __init__(self, d: int, ff: int):
        super().__init__()
        self.W_1, self.b_1 = nn.Parameter(torch.empty(ff, d)), nn.Parameter(torch.zeros(ff))
        self.W_2, self.b_2 = nn.Parameter(torch.empty(d, ff)), nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(F.relu(F.linear(x, self.W_1, self.b_1)), self.W_2, self.b_2)


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.attention, self.ffn = MultiHead(d, heads), FeedForward(d, ff)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.norm1(x + self.attention(x, x, mask[:, None])[0])
        return self.norm2(x + self.ffn(x))


class DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.self_attention, self.cross_attention = MultiHead(d, heads), MultiHead(d, heads)
        self.ffn = FeedForward(d, ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: Tensor, causal: Tensor, enc: Tensor, enc_mask: Tensor):
        x = self.norm1(x + self.self_attention(x, x, causal)[0])
        att, a = self.cross_attention(x, enc, enc_mask[:, None])
        x = self.norm2(x + att)
        return self.norm3(x + self.ffn(x)), a


class Transformer(Searchable, nn.Module):
    """Embeddings ``E_bar [K_x, d]``, ``E [K_y, d]``; ``layers`` encoder and decoder layers of
    ``heads`` heads and feed-forward size ``ff``; the output layer ``W_y [K_y, d]``, ``b_y``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, d = cfg, cfg.m
        self.E_bar = nn.Parameter(torch.empty(cfg.src_vocab, d))
        self.E = nn.Parameter(torch.empty(cfg.trg_vocab, d))
        self.encoder = nn.ModuleList(EncoderLayer(d, cfg.heads, cfg.ff) for _ in range(cfg.layers))
        self.decoder = nn.ModuleList(DecoderLayer(d, cfg.heads, cfg.ff) for _ in range(cfg.layers))
        self.W_y = nn.Parameter(torch.empty(cfg.trg_vocab, d))
        self.b_y = nn.Parameter(torch.zeros(cfg.trg_vocab))

    def inputs(self, e: Tensor) -> Tensor:
        """``√d e + PE`` for embeddings ``e [B, T, d]``."""
        return math.sqrt(self.cfg.m) * e + positions(e.shape[1], self.cfg.m, e)

    def encode(self, x: Tensor, x_mask: Tensor) -> Encoded:
        """The encoder's output ``[B, Tx, d]`` in ``Encoded.h``."""
        h = self.inputs(F.embedding(x, self.E_bar))
        for layer in self.encoder:
            h = layer(h, x_mask)
        return Encoded(x_mask, h)

    def decode(self, enc: Encoded, prefix: Tensor) -> tuple[Tensor, Tensor]:
        """The logits of ``y_1 .. y_T`` ``[B, T, K]`` given ``prefix`` ``[B, T - 1]`` (the words
        ``y_1 .. y_{T-1}``), and the last layer's encoder–decoder weights ``[B, T, Tx]``
        (averaged over the heads)."""
        e = F.embedding(prefix, self.E)
        e = torch.cat([e.new_zeros(e.shape[0], 1, e.shape[2]), e], 1)  # y_0 = 0
        x, T = self.inputs(e), e.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=e.device).tril()[None]  # [1, T, T]
        for layer in self.decoder:
            x, a = layer(x, causal, enc.h, enc.mask)
        return F.linear(x, self.W_y, self.b_y), a.mean(1)

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor):
        """Teacher forcing, all positions at once: ``logp [B, Ty]`` and the alignments ``[B, Ty,
        Tx]``, 0 at padding."""
        logits, a = self.decode(self.encode(x, x_mask), y[:, :-1])
        logp = Decoder.log_softmax(logits).gather(-1, y[..., None]).squeeze(-1)
        return logp.masked_fill(~y_mask, 0.0), a.masked_fill(~y_mask[..., None], 0.0)

    def init_state(self, enc: Encoded) -> Tensor:
        """The empty prefix, ``[B, 0]``."""
        return torch.zeros(enc.mask.shape[0], 0, dtype=torch.long, device=enc.mask.device)

    def readout_step(self, enc: Encoded, s_prev: Tensor, y_prev: Tensor | None):
        """``log p(y_i | ·) [G * B, K]``, the prefix ``y_1 .. y_{i-1}`` (in the place of the paper
        models' context: :meth:`next_state` takes it) and the alignment at position ``i``."""
        B, R = enc.mask.shape[0], s_prev.shape[0]
        if R > B:  # G consecutive states per sentence
            enc = enc.select(torch.arange(B, device=s_prev.device).repeat_interleave(R // B))
        prefix = s_prev if y_prev is None else torch.cat([s_prev, y_prev[:, None]], 1)
        logits, a = self.decode(enc, prefix)
        return Decoder.log_softmax(logits[:, -1]), prefix, a[:, -1]

    def next_state(self, s_prev: Tensor, y: Tensor, prefix: Tensor) -> Tensor:
        """The prefix: computed by :meth:`readout_step` (``y`` joins it at the next step)."""
        return prefix
