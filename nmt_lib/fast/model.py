"""RNNsearch and RNNencdec (:mod:`nmt_lib.paper.model`) computing the same functions faster.

Each fast class overrides what training and decoding call, and nothing else: the encoder's and
the decoder's ``forward`` (:func:`encode`, :func:`nmt_lib.fast.decoder.teacher_forced`), the model's
``steps`` (:class:`nmt_lib.fast.steps.DecodeSteps`) and ``word_projections``. The parameters, their
names and the checkpoints are the paper model's. :func:`nmt_lib.fast.accelerate` turns a paper
model into a fast one.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..paper.decoder import Decoder
from ..paper.encoder import Encoder
from ..paper.model import EncoderDecoder, RNNencdec, RNNsearch
from . import kernels
from .decoder import teacher_forced
from .scan import ROW_TILE, embedding, fast_gru_scan
from .steps import DecodeSteps, word_projections


def encode(enc: Encoder, x: Tensor, x_mask: Tensor, fused=None, tile: int = ROW_TILE) -> Tensor:
    """``enc(x, x_mask)``, the annotations, faster: the input projections of both directions and
    all steps in one matmul, time-major, and both directions in one
    :func:`~nmt_lib.fast.scan.fast_gru_scan`."""
    grus = [enc.forward_gru] + ([enc.backward_gru] if enc.backward_gru is not None else [])
    D, (B, T), n = len(grus), x.shape, enc.n
    W = torch.cat([g.input_weight() for g in grus])  # [D*3n, m]
    b = torch.cat([g.input_bias() for g in grus])  # [D*3n]
    # time-major ([Tx, ·]): the recurrence reads each step's rows in one block
    e = embedding(x.t(), enc.E_bar)
    e = e if enc.b_E is None else e + enc.b_E
    a = nn.functional.linear(e, W, b)  # [Tx, B, D*3n]: one matmul, all of them
    a, mask = a.view(T, B, D, 3 * n).transpose(1, 2), x_mask.t()[:, None]  # [Tx, D, B, ·]
    if D == 2:  # the backward direction reads x_{Tx} .. x_1
        fwd, bwd = a.unbind(1)
        a = torch.stack([fwd, bwd.flip(0)], 1)
        mask = torch.cat([mask, mask.flip(0)], 1)
    U_rz, U = zip(*(g.recurrent_weights() for g in grus), strict=True)
    h0 = x_mask.new_zeros(D, B, n, dtype=enc.E_bar.dtype)  # the parameters' dtype, not bf16
    h = fast_gru_scan(a.permute(1, 2, 0, 3), h0, torch.stack(U_rz), torch.stack(U),
                      mask.permute(1, 2, 0), fused, tile)  # fmt: skip  # [D, B, Tx, n]
    if D == 1:
        return h[0]
    return torch.cat([h[0], h[1].flip(1)], dim=-1)  # [B, Tx, 2n]


class Options:
    """``compiled``: use the compiled kernels (:mod:`nmt_lib.fast.kernels`) where they apply;
    ``tile``: the row multiple of the recurrences (:func:`~nmt_lib.fast.scan.active_rows`). Set by
    :func:`nmt_lib.fast.accelerate`."""

    compiled = True
    tile = ROW_TILE

    @property
    def fused(self):
        """What the fast functions take as ``fused``: the kernels, or None (PyTorch only)."""
        return kernels if self.compiled else None


class FastEncoder(Options, Encoder):
    def forward(self, x: Tensor, x_mask: Tensor) -> Tensor:
        return encode(self, x, x_mask, self.fused, self.tile)


class FastDecoder(Options, Decoder):
    def forward(self, s0, y, y_mask, h=None, Uh=None, x_mask=None, c=None):
        return teacher_forced(self, s0, y, y_mask, h, Uh, x_mask, c, self.fused, self.tile)


class Fast(Options, EncoderDecoder):
    """A paper model whose encoder and decoder are :class:`FastEncoder` and :class:`FastDecoder`,
    with the batch sorted by target length for them, and :class:`~nmt_lib.fast.steps.DecodeSteps`
    as its decoding step."""

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor):
        # longest target first: the decoder's recurrence then drops sentences as they end
        order = y_mask.sum(1).argsort(descending=True, stable=True)
        logp, alpha = super().forward(*(t[order] for t in (x, x_mask, y, y_mask)))
        back = torch.empty_like(order)
        back[order] = torch.arange(len(order), device=order.device)  # the caller's order again
        return logp[back], None if alpha is None else alpha[back]

    def steps(self, words: Tensor | None = None) -> DecodeSteps:
        return DecodeSteps(self, words, self.fused)

    def word_projections(self, rows: int | None = None) -> Tensor | None:
        return word_projections(DecodeSteps(self, None, self.fused), rows)


class FastRNNsearch(Fast, RNNsearch):
    pass


class FastRNNencdec(Fast, RNNencdec):
    pass


#: The fast class of each paper class.
FAST = {RNNsearch: FastRNNsearch, RNNencdec: FastRNNencdec, Encoder: FastEncoder,
        Decoder: FastDecoder}  # fmt: skip
