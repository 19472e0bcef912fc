"""Global attention (Luong, Pham & Manning 2015), the attention that followed the paper's.

A stacked LSTM encoder gives the source states ``h̄_s`` (its top layer), and its final state starts
the decoder, a stacked LSTM. At target step ``t``::

    h_t = LSTM([E y_{t-1}; h̃_{t-1}], h_{t-1})      (input feeding; E y_{t-1} alone without it)
    score(h_t, h̄_s) = h_tᵀ h̄_s                     "dot"
                    = h_tᵀ W_a h̄_s                  "general"
                    = v_aᵀ tanh(W_a [h_t; h̄_s])     "concat"
    a_t(s) = softmax_s score(h_t, h̄_s)             (over the real source positions)
    c_t = Σ_s a_t(s) h̄_s
    h̃_t = tanh(W_c [c_t; h_t])                     the attentional hidden state
    p(y_t | y_<t, x) = softmax(W_y h̃_t + b_y)

Against Bahdanau et al. (:mod:`nmt_lib.paper.attention`, :mod:`nmt_lib.paper.decoder`): the alignment is
computed from the *current* state ``h_t``, after the recurrent step, not from ``s_{i-1}`` before
it; the context does not enter the recurrence (only ``h̃_t`` does, through input feeding) but the
output layer; ``concat`` is Bahdanau's additive score, ``dot`` and ``general`` are bilinear.
``h̃_0 = 0``, and at ``t = 1`` the previous word is a zero embedding, as in the paper's models.

Without input feeding (``model.input_feed = false``) the decoder's recurrence does not wait for
``h̃``: teacher forcing then runs ``torch.nn.LSTM`` over the whole target sequence and attends
from all ``h_t`` at once (the same function as the steps, ``tests/test_luong.py``); with it, step
by step.

Not Luong et al.'s (a deviation of the Multi30k testbed, ``model.dropout``, default 0 = none; their
own dropout, 0.2, was in these places): while training, dropout on the source and target
embeddings, between stacked layers (``torch.nn.LSTM``'s ``dropout``) and on ``h̃_t`` before the
output layer (input feeding passes the undropped ``h̃_t`` on).

A decoder state is a :class:`LuongState`: ``h``, ``c`` of every LSTM layer and ``h̃``, one row per
sentence (or hypothesis); the encoding a :class:`LuongEncoded`. The encoder is
:mod:`nmt_lib.models.seq2seq`'s (``reverse_source`` applies). The decoding step reads the previous
word first (``step``, :mod:`nmt_lib.models.steps`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..config import ModelConfig
from ..paper.decoder import log_softmax
from ..paper.steps import Searchable
from .seq2seq import (
    LSTMState,
    init_lstms,
    layers_first,
    lstm,
    real_log_prob,
    reverse_words,
    rows_first,
    run_lstm,
)
from .steps import ReadFirstSteps


class LuongEncoded(NamedTuple):
    """What the decoder needs from the source: ``mask [B, Tx]``; the source states ``h̄ [B, Tx,
    n]``; ``keys``, the part of the score that depends on ``h̄_s`` alone (``W_a h̄_s`` for general,
    ``W_a^(h̄) h̄_s`` for concat, None for dot); the encoder's final state ``h``, ``c`` ``[B, L,
    n]``."""

    mask: Tensor
    h_bar: Tensor
    keys: Tensor | None
    h: Tensor
    c: Tensor

    def select(self, idx: Tensor) -> LuongEncoded:
        """Rows ``idx`` (``[B']`` long) of every field."""
        return LuongEncoded(*(None if t is None else t.index_select(0, idx) for t in self))


class LuongState(NamedTuple):
    """The decoder's state, one row per sentence (or hypothesis): its LSTM's ``h``, ``c`` ``[R, L,
    n]`` and the attentional hidden state ``h̃ [R, n]`` that input feeding passes on."""

    h: Tensor
    c: Tensor
    h_tilde: Tensor


class Luong(Searchable, nn.Module):
    """Embeddings ``E_bar``, ``E``; encoder and decoder LSTMs; the score's ``W_a`` (``[n, n]`` for
    general, ``[n', 2n]`` and ``v_a [n']`` for concat, none for dot); ``W_c [n, 2n]``; the output
    layer ``W_y [K_y, n]``, ``b_y``; ``model.dropout`` (module docstring)."""

    State = LuongState

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, self.p = cfg, cfg.dropout
        n, m = cfg.n, cfg.m
        self.E_bar = nn.Parameter(torch.empty(cfg.src_vocab, m))
        self.E = nn.Parameter(torch.empty(cfg.trg_vocab, m))
        self.encoder = lstm(m, cfg)
        self.decoder = lstm(m + (n if cfg.input_feed else 0), cfg)
        if cfg.score == "general":
            self.W_a = nn.Parameter(torch.empty(n, n))
        elif cfg.score == "concat":
            self.W_a = nn.Parameter(torch.empty(cfg.n_align, 2 * n))
            self.v_a = nn.Parameter(torch.zeros(cfg.n_align))
        self.W_c = nn.Parameter(torch.empty(n, 2 * n))
        self.W_y = nn.Parameter(torch.empty(cfg.trg_vocab, n))
        self.b_y = nn.Parameter(torch.zeros(cfg.trg_vocab))

    def reset_parameters(self) -> None:
        """Initialise every parameter (:func:`~nmt_lib.models.seq2seq.init_lstms`)."""
        init_lstms(self, self.cfg)

    def drop(self, t: Tensor) -> Tensor:
        """Dropout of probability ``model.dropout`` while training; ``t`` itself at 0."""
        return F.dropout(t, self.p, self.training) if self.p else t

    def encode(self, x: Tensor, x_mask: Tensor) -> LuongEncoded:
        """``h̄ [B, Tx, n]``; the part of the score that depends on ``h̄_s`` alone, once per
        sentence; the encoder's final state (:class:`LuongEncoded`)."""
        if self.cfg.reverse_source:
            x = reverse_words(x, x_mask)
        h, final = run_lstm(self.encoder, self.drop(F.embedding(x, self.E_bar)), x_mask)
        keys = None  # dot
        if self.cfg.score == "general":
            keys = F.linear(h, self.W_a)  # W_a h̄_s
        elif self.cfg.score == "concat":
            keys = F.linear(h, self.W_a[:, self.cfg.n :])  # W_a = [W_a^(h), W_a^(h̄)] by columns
        return LuongEncoded(x_mask, h, keys, *rows_first(final))

    def init_state(self, enc: LuongEncoded) -> LuongState:
        """The encoder's final state, and ``h̃_0 = 0``."""
        return LuongState(enc.h, enc.c, enc.h.new_zeros(enc.h.shape[0], self.cfg.n))

    def scores(self, enc: LuongEncoded, h: Tensor) -> Tensor:
        """``score(h_t, h̄_s)`` ``[G * B, Tx]`` for ``h [G * B, n]``, ``G`` consecutive states per
        sentence of ``enc``."""
        B, Tx, n = enc.h_bar.shape
        q = h.view(B, -1, n)  # [B, G, n]
        if self.cfg.score == "dot":
            e = q @ enc.h_bar.transpose(1, 2)  # [B, G, Tx]
        elif self.cfg.score == "general":
            e = q @ enc.keys.transpose(1, 2)  # h_tᵀ (W_a h̄_s)
        else:
            Wq = F.linear(q, self.W_a[:, :n])  # [B, G, n']
            e = torch.tanh(Wq[:, :, None] + enc.keys[:, None]) @ self.v_a  # [B, G, Tx]
        return e.reshape(-1, Tx)

    def attend(self, enc: LuongEncoded, h: Tensor) -> tuple[Tensor, Tensor]:
        """``c_t [G * B, n]`` and ``a_t [G * B, Tx]`` (zero on padding)."""
        B, Tx, n = enc.h_bar.shape
        e = self.scores(enc, h).view(B, -1, Tx)
        e = e.to(torch.promote_types(e.dtype, torch.float32))  # float32 at least (bf16 upcast)
        a = e.masked_fill(~enc.mask[:, None], float("-inf")).softmax(-1)  # [B, G, Tx]
        return (a.to(enc.h_bar.dtype) @ enc.h_bar).view(-1, n), a.view(-1, Tx)

    def attentional(self, enc: LuongEncoded, s_prev: LuongState, e_prev: Tensor):
        """The step up to ``h̃_t``: the decoder reads ``e_prev`` (``E y_{t-1}``, and ``h̃_{t-1}``
        with input feeding) and attends from its ``h_t``. Returns ``h̃_t [R, n]``, the LSTM's new
        ``(h, c)`` (``torch.nn.LSTM``'s layout) and ``a_t [R, Tx]``."""
        inp = torch.cat([e_prev, s_prev.h_tilde], 1) if self.cfg.input_feed else e_prev
        out, state = self.decoder(inp[:, None], layers_first(LSTMState(s_prev.h, s_prev.c)))
        h = out[:, 0]  # h_t, the top layer
        c, a = self.attend(enc, h)
        return torch.tanh(F.linear(torch.cat([c, h], 1), self.W_c)), state, a

    def input_fed(self, enc: LuongEncoded, e_prev: Tensor, y_mask: Tensor):
        """The steps of :meth:`attentional` over ``e_prev [B, Ty, m]`` with input feeding, the
        decoder LSTM's cells written out (``torch.nn.LSTM``'s equations and gate order ``i, f, g,
        o``, its dropout between layers): the first layer's input products with ``E y_{t-1}`` for
        all steps at once, then per step only those with ``h̃_{t-1}`` and the states; past a
        sentence's end its state is carried unchanged. Returns ``h̃ [B, Ty, n]`` and ``a [B, Ty,
        Tx]``."""
        rnn, m, L = self.decoder, self.cfg.m, self.cfg.layers
        W = [getattr(rnn, f"weight_ih_l{k}") for k in range(L)]
        U = [getattr(rnn, f"weight_hh_l{k}") for k in range(L)]
        b = [getattr(rnn, f"bias_ih_l{k}") + getattr(rnn, f"bias_hh_l{k}") for k in range(L)]
        # [B, 4n] per step: E y_{t-1}'s part, all at once (unbound once: a step's slice of the
        # whole would give its gradient a zero-filled [B, Ty, 4n] each)
        a_e = F.linear(e_prev, W[0][:, :m], b[0]).unbind(1)
        h, c = list(enc.h.unbind(1)), list(enc.c.unbind(1))  # each layer's [B, n]
        h_tilde = enc.h.new_zeros(enc.h.shape[0], self.cfg.n)
        out_h, out_a = [], []
        for t, real in enumerate(y_mask[..., None].unbind(1)):
            x = None
            for k in range(L):
                if k == 0:
                    gates = a_e[t] + F.linear(h_tilde, W[0][:, m:])
                else:
                    x = F.dropout(x, rnn.dropout, self.training) if rnn.dropout else x
                    gates = F.linear(x, W[k], b[k])
                i, f, g, o = (gates + F.linear(h[k], U[k])).chunk(4, 1)
                c_k = torch.sigmoid(f) * c[k] + torch.sigmoid(i) * torch.tanh(g)
                x = torch.sigmoid(o) * torch.tanh(c_k)  # h_t of layer k
                h[k], c[k] = torch.where(real, x, h[k]), torch.where(real, c_k, c[k])
            ctx, a_t = self.attend(enc, x)
            ht = torch.tanh(F.linear(torch.cat([ctx, x], 1), self.W_c))
            out_h.append(ht)
            out_a.append(a_t)
            h_tilde = torch.where(real, ht, h_tilde)
        return torch.stack(out_h, 1), torch.stack(out_a, 1)

    def step(self, enc: LuongEncoded, s_prev: LuongState, y_prev: Tensor | None):
        """``log p(y_t | ·) [G * B, K]``, the new state and ``a_t`` over the source words in
        their order (also with ``reverse_source``): the decoder reads ``y_{t-1}`` (and
        ``h̃_{t-1}``), attends from ``h_t``, and ``h̃_t`` gives the distribution of ``y_t``."""
        h_tilde, R = s_prev.h_tilde, s_prev.h_tilde.shape[0]
        e_prev = (
            h_tilde.new_zeros(R, self.cfg.m)
            if y_prev is None
            else self.drop(F.embedding(y_prev, self.E))
        )
        h_tilde, state, a = self.attentional(enc, s_prev, e_prev)
        logp = log_softmax(F.linear(self.drop(h_tilde), self.W_y, self.b_y))
        if self.cfg.reverse_source:  # the weights of the source words, in their own order
            a = reverse_words(a, enc.mask.repeat_interleave(R // enc.mask.shape[0], 0))
        return logp, LuongState(*rows_first(state), h_tilde), a

    def steps(self) -> ReadFirstSteps:
        """The decoding step as a search drives it (:mod:`nmt_lib.models.steps`)."""
        return ReadFirstSteps(self)

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0):
        """Teacher forcing: ``logp [B, Ty]`` and ``a [B, Ty, Tx]``, 0 at padding; ``smoothing``:
        label smoothing's ``logp`` (:func:`~nmt_lib.paper.steps.target_log_prob`), for training.
        With input feeding the steps up to ``h̃_t`` one at a time (each waits for the previous
        ``h̃``; :meth:`input_fed`); without it, the decoder LSTM over the whole sequence and the
        attention of all steps at once. Then the output layer over every real position at once
        (:func:`~nmt_lib.models.seq2seq.real_log_prob`)."""
        enc = self.encode(x, x_mask)
        (B, Ty), n = y.shape, self.cfg.n
        e = self.drop(F.embedding(y, self.E))  # [B, Ty, m]
        e_prev = torch.cat([torch.zeros_like(e[:, :1]), e[:, :-1]], 1)  # y_0 = 0 .. y_{Ty-1}
        if self.cfg.input_feed:
            h_tilde, a = self.input_fed(enc, e_prev, y_mask)
        else:
            # unpacked, as Seq2seq's decoder: the padding (on the right) is never read or scored
            h, _ = self.decoder(e_prev, layers_first(LSTMState(enc.h, enc.c)))
            h = h.reshape(B * Ty, n)  # Ty consecutive states per sentence, as a beam's G
            c, a = self.attend(enc, h)  # [B * Ty, n], [B * Ty, Tx]
            h_tilde = torch.tanh(F.linear(torch.cat([c, h], 1), self.W_c)).view(B, Ty, n)
            a = a.view(B, Ty, -1)
        logp = real_log_prob(self.drop(h_tilde), y, y_mask, self.W_y, self.b_y, smoothing)
        if self.cfg.reverse_source:  # the weights of the source words, in their own order
            mask = enc.mask.repeat_interleave(Ty, 0)
            a = reverse_words(a.reshape(B * Ty, -1), mask).view(B, Ty, -1)
        return logp, a.masked_fill(~y_mask[..., None], 0.0)
