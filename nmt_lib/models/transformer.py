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
from its last layer. ``model.dropout`` (Vaswani et al.: 0.1; default 0) drops, while training, the
sums ``√d E w + PE`` and each sub-layer's output before it is added and normalised; label
smoothing (Vaswani et al.: 0.1) is a training setting, ``train.label_smoothing``.

The decoding step reads the previous word first (``step``, :mod:`nmt_lib.models.steps`). What a
search carries from one word to the next is what the positions before ``i`` offer to position
``i``: each decoder layer's self-attention keys ``z W_K`` and values ``z W_V`` of those positions
(``z``: the layer's input), a *key/value cache*, the state :class:`Cache` ``[G * B, layers, 2,
i - 1, d]``; a step computes position ``i`` alone and appends its keys and values. Each decoder
layer's encoder–decoder keys and values are computed once per sentence, as RNNsearch's ``U_a h_j``
(:class:`TransformerEncoded`). The alignment a step
returns is the last decoder layer's encoder–decoder attention at that position, averaged over the
heads.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..config import ModelConfig
from ..paper.decoder import log_softmax
from ..paper.model import init_parameters
from ..paper.steps import Searchable
from .seq2seq import real_log_prob
from .steps import ReadFirstSteps


class TransformerEncoded(NamedTuple):
    """What the decoder needs from the source: ``mask [B, Tx]``, the encoder's output ``h [B, Tx,
    d]`` and each decoder layer's encoder–decoder keys ``h W_K`` and values ``h W_V``, ``kv [B,
    layers, 2, Tx, d]``."""

    mask: Tensor
    h: Tensor
    kv: Tensor

    def select(self, idx: Tensor) -> TransformerEncoded:
        """Rows ``idx`` (``[B']`` long) of every field."""
        return TransformerEncoded(*(t.index_select(0, idx) for t in self))


class Cache(NamedTuple):
    """The decoder's state after ``i - 1`` positions: each layer's self-attention keys and values
    of them, ``kv [R, layers, 2, i - 1, d]``, one row per sentence (or hypothesis)."""

    kv: Tensor


def positions(T: int, d: int, like: Tensor, start: int = 0) -> Tensor:
    """The sinusoidal position encodings ``PE [T, d]`` of positions ``start .. start + T - 1``."""
    pos = torch.arange(start, start + T, dtype=like.dtype, device=like.device)[:, None]
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
        return self.attend(x @ self.W_Q, y @ self.W_K, y @ self.W_V, mask)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None):
        """:meth:`forward` from the queries ``x W_Q [B, Tq, d]``, keys ``y W_K`` and values ``y W_V``
        ``[B, Tk, d]``; ``mask`` None: every key."""
        B, Tq, d = q.shape
        split = lambda t: t.view(B, -1, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)  # [B, h, T, d_k]
        e = q @ k.transpose(-1, -2).to(q.dtype) / math.sqrt(d // self.heads)  # [B, h, Tq, Tk]
        e = e.to(torch.promote_types(e.dtype, torch.float32))
        if mask is not None:
            e = e.masked_fill(~mask[:, None], float("-inf"))
        a = e.softmax(-1)
        out = (a.to(q.dtype) @ v.to(q.dtype)).transpose(1, 2).reshape(B, Tq, d)
        return out @ self.W_O, a


class FeedForward(nn.Module):
    def __init__(self, d: int, ff: int):
        super().__init__()
        self.W_1, self.b_1 = nn.Parameter(torch.empty(ff, d)), nn.Parameter(torch.zeros(ff))
        self.W_2, self.b_2 = nn.Parameter(torch.empty(d, ff)), nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(F.relu(F.linear(x, self.W_1, self.b_1)), self.W_2, self.b_2)


class Dropped(nn.Module):
    """A layer whose sub-layer outputs are dropped with probability ``p`` while training."""

    p = 0.0

    def drop(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training) if self.p else x


class EncoderLayer(Dropped):
    def __init__(self, d: int, heads: int, ff: int, dropout: float = 0.0):
        super().__init__()
        self.attention, self.ffn = MultiHead(d, heads), FeedForward(d, ff)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.p = dropout

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.norm1(x + self.drop(self.attention(x, x, mask[:, None])[0]))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(Dropped):
    def __init__(self, d: int, heads: int, ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attention, self.cross_attention = MultiHead(d, heads), MultiHead(d, heads)
        self.ffn = FeedForward(d, ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.p = dropout

    def forward(self, x: Tensor, causal: Tensor, enc_kv: Tensor, enc_mask: Tensor):
        """Every position of ``x [B, T, d]``; ``enc_kv [B, 2, Tx, d]``: the encoder output's keys
        and values for this layer's encoder–decoder attention."""
        x = self.norm1(x + self.drop(self.self_attention(x, x, causal)[0]))
        return self.attend_source(x, enc_kv, enc_mask)

    def step(self, x: Tensor, kv: Tensor, enc_kv: Tensor, enc_mask: Tensor):
        """One new position ``x [G * B, 1, d]`` (``G`` consecutive rows per sentence) after the
        positions whose self-attention keys and values are ``kv [G * B, 2, t, d]``: :meth:`forward`
        at that position, its weights ``[B, heads, G, Tx]`` and ``kv`` with its own appended."""
        sa = self.self_attention
        kv = torch.cat([kv, torch.stack([x @ sa.W_K, x @ sa.W_V], 1).to(kv.dtype)], 2)
        x = self.norm1(x + sa.attend(x @ sa.W_Q, kv[:, 0], kv[:, 1], None)[0])  # no future yet
        B = enc_kv.shape[0]  # a sentence's G rows are G queries on its source
        out, a = self.attend_source(x.reshape(B, -1, x.shape[-1]), enc_kv, enc_mask)
        return out.reshape(x.shape), a, kv

    def attend_source(self, x: Tensor, enc_kv: Tensor, enc_mask: Tensor):
        """Encoder–decoder attention and the feed-forward layer, and the attention weights."""
        ca = self.cross_attention
        att, a = ca.attend(x @ ca.W_Q, enc_kv[:, 0], enc_kv[:, 1], enc_mask[:, None])
        x = self.norm2(x + self.drop(att))
        return self.norm3(x + self.drop(self.ffn(x))), a


class Transformer(Searchable, Dropped):
    """Embeddings ``E_bar [K_x, d]``, ``E [K_y, d]``; ``layers`` encoder and decoder layers of
    ``heads`` heads and feed-forward size ``ff``; the output layer ``W_y [K_y, d]``, ``b_y``."""

    State = Cache

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, d = cfg, cfg.m
        self.E_bar = nn.Parameter(torch.empty(cfg.src_vocab, d))
        self.E = nn.Parameter(torch.empty(cfg.trg_vocab, d))
        p, L = cfg.dropout, cfg.layers
        self.encoder = nn.ModuleList(EncoderLayer(d, cfg.heads, cfg.ff, p) for _ in range(L))
        self.decoder = nn.ModuleList(DecoderLayer(d, cfg.heads, cfg.ff, p) for _ in range(L))
        self.p = p
        self.W_y = nn.Parameter(torch.empty(cfg.trg_vocab, d))
        self.b_y = nn.Parameter(torch.zeros(cfg.trg_vocab))

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Every parameter by the rules of ``model.init`` (:func:`init_parameters`), the layer
        norms the identity, and the embeddings N(0, 1/d), so that ``√d E w`` is of the size of the
        position encodings."""
        init_parameters(self, self.cfg.init)
        for module in self.modules():
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()
        for E in (self.E_bar, self.E):
            if not E.is_meta:
                nn.init.normal_(E, 0.0, self.cfg.m**-0.5)

    def inputs(self, e: Tensor) -> Tensor:
        """``√d e + PE`` for embeddings ``e [B, T, d]`` (dropped while training)."""
        return self.drop(math.sqrt(self.cfg.m) * e + positions(e.shape[1], self.cfg.m, e))

    def encode(self, x: Tensor, x_mask: Tensor) -> TransformerEncoded:
        """The encoder's output, and each decoder layer's encoder–decoder keys and values
        (:class:`TransformerEncoded`)."""
        h = self.inputs(F.embedding(x, self.E_bar))
        for layer in self.encoder:
            h = layer(h, x_mask)
        kv = [
            torch.stack([h @ layer.cross_attention.W_K, h @ layer.cross_attention.W_V], 1)
            for layer in self.decoder
        ]
        return TransformerEncoded(x_mask, h, torch.stack(kv, 1))

    def decode(self, enc: TransformerEncoded, prefix: Tensor) -> tuple[Tensor, Tensor]:
        """The logits of ``y_1 .. y_T`` ``[B, T, K]`` given ``prefix`` ``[B, T - 1]`` (the words
        ``y_1 .. y_{T-1}``), and the last layer's encoder–decoder weights ``[B, T, Tx]``
        (averaged over the heads)."""
        x, a = self.decode_states(enc, prefix)
        return F.linear(x, self.W_y, self.b_y), a

    def decode_states(self, enc: TransformerEncoded, prefix: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`decode` before the output layer: the last decoder layer's outputs ``[B, T, d]``
        and its weights."""
        e = F.embedding(prefix, self.E)
        e = torch.cat([e.new_zeros(e.shape[0], 1, e.shape[2]), e], 1)  # y_0 = 0
        x, T = self.inputs(e), e.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=e.device).tril()[None]  # [1, T, T]
        for k, layer in enumerate(self.decoder):
            x, a = layer(x, causal, enc.kv[:, k], enc.mask)
        return x, a.mean(1)

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0):
        """Teacher forcing, all positions at once: ``logp [B, Ty]`` and the alignments ``[B, Ty,
        Tx]``, 0 at padding; ``smoothing``: label smoothing's ``logp``
        (:func:`~nmt_lib.paper.steps.target_log_prob`), for training."""
        enc = self.encode(x, x_mask)
        h, a = self.decode_states(enc, y[:, :-1])
        logp = real_log_prob(h, y, y_mask, self.W_y, self.b_y, smoothing)
        return logp, a.masked_fill(~y_mask[..., None], 0.0)

    def init_state(self, enc: TransformerEncoded) -> Cache:
        """No positions yet: the empty cache ``[B, layers, 2, 0, d]``."""
        B, d = enc.mask.shape[0], self.cfg.m
        return Cache(enc.h.new_zeros(B, self.cfg.layers, 2, 0, d))

    def step(self, enc: TransformerEncoded, s_prev: Cache, y_prev: Tensor | None):
        """``log p(y_i | ·) [G * B, K]``, the cache with position ``i`` appended and the alignment
        at ``i``, from the cache of the positions before ``i`` and the word ``y_{i-1}`` (None at
        ``i = 1``)."""
        cache = s_prev.kv
        R, i, d = cache.shape[0], cache.shape[3], self.cfg.m
        e = cache.new_zeros(R, d) if y_prev is None else F.embedding(y_prev, self.E)
        x = (math.sqrt(d) * e + positions(1, d, e, start=i))[:, None]  # [R, 1, d]
        kvs = []
        for k, layer in enumerate(self.decoder):
            x, a, kv = layer.step(x, cache[:, k], enc.kv[:, k], enc.mask)
            kvs.append(kv)
        logits = F.linear(x[:, 0], self.W_y, self.b_y)
        return log_softmax(logits), Cache(torch.stack(kvs, 1)), a.mean(1).reshape(R, -1)

    def steps(self) -> ReadFirstSteps:
        """The decoding step as a search drives it (:mod:`nmt_lib.models.steps`): a beam reorders
        the new cache only."""
        return ReadFirstSteps(self)
