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

A decoder state is one row per sentence: ``[h; c]`` of every LSTM layer, then ``h̃``. The encoder is
:mod:`nmt_lib.models.seq2seq`'s (``reverse_source`` applies). The interface is the paper models'.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..config import ModelConfig
from ..paper.decoder import Decoder
from ..paper.model import Encoded
from ..paper.steps import Searchable, teacher_forced
from .seq2seq import flat_state, lstm_state, reverse_words, run_lstm


class Luong(Searchable, nn.Module):
    """Embeddings ``E_bar``, ``E``; encoder and decoder LSTMs; the score's ``W_a`` (``[n, n]`` for
    general, ``[n', 2n]`` and ``v_a [n']`` for concat, none for dot); ``W_c [n, 2n]``; the output
    layer ``W_y [K_y, n]``, ``b_y``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        n, m = cfg.n, cfg.m
        self.E_bar = nn.Parameter(torch.empty(cfg.src_vocab, m))
        self.E = nn.Parameter(torch.empty(cfg.trg_vocab, m))
        self.encoder = nn.LSTM(m, n, cfg.layers, batch_first=True)
        self.decoder = nn.LSTM(m + (n if cfg.input_feed else 0), n, cfg.layers, batch_first=True)
        if cfg.score == "general":
            self.W_a = nn.Parameter(torch.empty(n, n))
        elif cfg.score == "concat":
            self.W_a = nn.Parameter(torch.empty(cfg.n_align, 2 * n))
            self.v_a = nn.Parameter(torch.zeros(cfg.n_align))
        self.W_c = nn.Parameter(torch.empty(n, 2 * n))
        self.W_y = nn.Parameter(torch.empty(cfg.trg_vocab, n))
        self.b_y = nn.Parameter(torch.zeros(cfg.trg_vocab))

    def encode(self, x: Tensor, x_mask: Tensor) -> Encoded:
        """``h̄ [B, Tx, n]`` (``Encoded.h``); the part of the score that depends on ``h̄_s`` alone,
        once per sentence (``Encoded.Uh``: ``W_a h̄_s`` for general, ``W_a^(h̄) h̄_s`` for concat,
        None for dot); the encoder's final state (``Encoded.c``)."""
        if self.cfg.reverse_source:
            x = reverse_words(x, x_mask)
        h, final = run_lstm(self.encoder, F.embedding(x, self.E_bar), x_mask)
        Uh = None  # dot
        if self.cfg.score == "general":
            Uh = F.linear(h, self.W_a)  # W_a h̄_s
        elif self.cfg.score == "concat":
            Uh = F.linear(h, self.W_a[:, self.cfg.n :])  # W_a = [W_a^(h), W_a^(h̄)] by columns
        return Encoded(x_mask, h, Uh, flat_state(final))

    def init_state(self, enc: Encoded) -> Tensor:
        """``[h; c]`` of the encoder's final state, and ``h̃_0 = 0``."""
        return torch.cat([enc.c, enc.c.new_zeros(enc.c.shape[0], self.cfg.n)], 1)

    def scores(self, enc: Encoded, h: Tensor) -> Tensor:
        """``score(h_t, h̄_s)`` ``[G * B, Tx]`` for ``h [G * B, n]``, ``G`` consecutive states per
        sentence of ``enc``."""
        B, Tx, n = enc.h.shape
        q = h.view(B, -1, n)  # [B, G, n]
        if self.cfg.score == "dot":
            e = q @ enc.h.transpose(1, 2)  # [B, G, Tx]
        elif self.cfg.score == "general":
            e = q @ enc.Uh.transpose(1, 2)  # h_tᵀ (W_a h̄_s)
        else:
            Wq = F.linear(q, self.W_a[:, :n])  # [B, G, n']
            e = torch.tanh(Wq[:, :, None] + enc.Uh[:, None]) @ self.v_a  # [B, G, Tx]
        return e.reshape(-1, Tx)

    def attend(self, enc: Encoded, h: Tensor) -> tuple[Tensor, Tensor]:
        """``c_t [G * B, n]`` and ``a_t [G * B, Tx]`` (zero on padding)."""
        B, Tx, n = enc.h.shape
        e = self.scores(enc, h).view(B, -1, Tx)
        e = e.to(torch.promote_types(e.dtype, torch.float32))  # float32 at least (bf16 upcast)
        a = e.masked_fill(~enc.mask[:, None], float("-inf")).softmax(-1)  # [B, G, Tx]
        return (a.to(enc.h.dtype) @ enc.h).view(-1, n), a.view(-1, Tx)

    def readout_step(self, enc: Encoded, s_prev: Tensor, y_prev: Tensor | None):
        """``log p(y_t | ·) [G * B, K]``, the new state (in the place of the paper models'
        context: :meth:`next_state` takes it) and ``a_t`` over the source words in their order
        (also with ``reverse_source``): the decoder reads ``y_{t-1}`` (and ``h̃_{t-1}``), attends
        from ``h_t``, and ``h̃_t`` gives the distribution of ``y_t``."""
        L, n, R = self.cfg.layers, self.cfg.n, s_prev.shape[0]
        lstm, h_tilde = s_prev[:, : 2 * L * n], s_prev[:, 2 * L * n :]
        e_prev = s_prev.new_zeros(R, self.cfg.m) if y_prev is None else F.embedding(y_prev, self.E)
        inp = torch.cat([e_prev, h_tilde], 1) if self.cfg.input_feed else e_prev
        out, state = self.decoder(inp[:, None], lstm_state(lstm, L))
        h = out[:, 0]  # h_t, the top layer
        c, a = self.attend(enc, h)
        h_tilde = torch.tanh(F.linear(torch.cat([c, h], 1), self.W_c))
        logp = Decoder.log_softmax(F.linear(h_tilde, self.W_y, self.b_y))
        if self.cfg.reverse_source:  # the weights of the source words, in their own order
            a = reverse_words(a, enc.mask.repeat_interleave(R // enc.mask.shape[0], 0))
        return logp, torch.cat([flat_state(state), h_tilde], 1), a

    def next_state(self, s_prev: Tensor, y: Tensor, s_new: Tensor) -> Tensor:
        """The state after step ``t``: computed by :meth:`readout_step`."""
        return s_new

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor):
        """Teacher forcing, step by step (input feeding makes every step wait for the previous
        ``h̃``): ``logp [B, Ty]`` and ``a [B, Ty, Tx]``, 0 at padding."""
        return teacher_forced(self, x, x_mask, y, y_mask)
