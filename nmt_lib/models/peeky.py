"""The "peeky" encoder–decoder: :mod:`nmt_lib.models.seq2seq` whose decoder sees the source summary at
every step, not only in its first state.

Cho et al. (2014a) let the summary ``c`` of the source (here the encoder's top-layer ``h`` after
the last source token) enter every step of the decoder and its output layer::

    h_i = LSTM([E y_{i-1}; c], h_{i-1})             (the decoder reads c at every step)
    p(y_i | y_<i, x) = softmax(W_y [h_i; c] + b_y)  (and so does the output layer)

instead of only through ``h_0`` (Sutskever et al.). The paper's RNNencdec (:mod:`nmt_lib.paper.model`)
is wired this way with GRUs: ``c`` enters every gate of its decoder (``C``, ``C_z``, ``C_r``) and
its deep output (``C_o``), and ``s_0 = tanh(W_s c)``. The summary is still one fixed-size vector.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from .seq2seq import LSTMEncoded, Seq2seq, real_log_prob


class Peeky(Seq2seq):
    """:class:`~nmt_lib.models.seq2seq.Seq2seq` with ``c`` in every decoder input and in the output
    layer: the decoder LSTM reads ``m + n`` inputs, ``W_y`` is ``[K_y, 2n]``."""

    def decoder_input_size(self) -> int:
        return self.cfg.m + self.cfg.n

    def output_input_size(self) -> int:
        return 2 * self.cfg.n

    def summary(self, enc: LSTMEncoded, rows: int | None = None) -> Tensor:
        """``c [B, n]``: the encoder's top-layer ``h`` after the last source token; repeated for
        ``rows = G * B`` states, ``G`` consecutive ones per sentence (a beam)."""
        c = enc.h[:, -1]
        B = c.shape[0]
        return c if rows in (None, B) else c.repeat_interleave(rows // B, 0)

    def decoder_input(self, enc: LSTMEncoded, e_prev: Tensor) -> Tensor:
        return torch.cat([e_prev, self.summary(enc, len(e_prev))], -1)

    def output_input(self, enc: LSTMEncoded, h: Tensor) -> Tensor:
        return torch.cat([h, self.summary(enc, len(h))], -1)

    def decoder_inputs(self, enc: LSTMEncoded, e_prev: Tensor) -> Tensor:
        c = self.summary(enc)[:, None].expand(-1, e_prev.shape[1], -1)
        return torch.cat([e_prev, c], -1)

    def scored(
        self, enc: LSTMEncoded, h: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0
    ) -> Tensor:
        """:meth:`Seq2seq.scored`, with ``W_y [h_i; c] = W_y^(h) h_i + W_y^(c) c``: the summary's
        part once per sentence, not at every position (the same function)."""
        n = self.cfg.n
        per_sentence = F.linear(self.summary(enc), self.W_y[:, n:], self.b_y)  # [B, K]
        return real_log_prob(h, y, y_mask, self.W_y[:, :n], per_sentence, smoothing)

    def output_inputs(self, enc: LSTMEncoded, h: Tensor) -> Tensor:
        c = self.summary(enc)[:, None].expand(-1, h.shape[1], -1)
        return torch.cat([h, c], -1)
