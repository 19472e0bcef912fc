"""RNNsearch and RNNencdec (:mod:`nmt_lib.paper.model`) computing the same functions faster.

Each fast class overrides what training and decoding call, and nothing else: the encoder's
``forward`` (:func:`encode`), the model's ``forward`` (teacher forcing,
:func:`nmt_lib.fast.decoder.teacher_forced`) and ``steps``
(:class:`nmt_lib.fast.steps.DecodeSteps`). A fast module is made from a paper module
(:func:`faster`): a new module of the fast class that holds the paper module's parameters and
submodules, the same objects, so that the parameters, their names and the checkpoints are the paper
model's; the paper module keeps its classes. The fast decoder lays ``W_o`` out column-major
(:func:`column_major`), and so, the parameter being shared, is the paper module's.
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
from .steps import DecodeSteps


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
    e = enc.drop(e if enc.b_E is None else e + enc.b_E)  # model.dropout, while training
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


def column_major(p: nn.Parameter) -> None:
    """Lay the matrix ``p`` out column-major (``p.t()`` contiguous), its values unchanged: the layout
    in which the output layer's matmul runs fastest (bf16 on CPUs: up to 2x); its gradient comes
    back in that layout (:func:`~nmt_lib.fast.decoder.target_log_prob`), and the optimizer's state,
    made after, takes it too."""
    if p.dim() == 2 and not p.t().is_contiguous():
        with torch.no_grad():
            p.data = p.data.t().contiguous().t()


class Options:
    """``compiled``: use the compiled kernels (:mod:`nmt_lib.fast.kernels`) where they apply;
    ``tile``: the row multiple of the recurrences (:func:`~nmt_lib.fast.scan.active_rows`). Set by
    :func:`faster`."""

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
    """The paper decoder with ``W_o`` column-major (:func:`faster`), which the fast model's
    teacher forcing and steps read."""


class Fast(Options, EncoderDecoder):
    """A paper model whose encoder and decoder are :class:`FastEncoder` and :class:`FastDecoder`,
    with the batch sorted by target length for them, and :class:`~nmt_lib.fast.steps.DecodeSteps`
    as its decoding step."""

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor,
                smoothing: float = 0.0):  # fmt: skip
        # longest target first: the decoder's recurrence then drops sentences as they end
        order = y_mask.sum(1).argsort(descending=True, stable=True)
        x, x_mask, y, y_mask = (t[order] for t in (x, x_mask, y, y_mask))
        enc = self.encode(x, x_mask)
        logp, alpha = teacher_forced(self.decoder, self.init_state(enc), y, y_mask, enc.h, enc.Uh,
                                     enc.mask, enc.c, self.fused, self.tile, smoothing)  # fmt: skip
        back = torch.empty_like(order)
        back[order] = torch.arange(len(order), device=order.device)  # the caller's order again
        return logp[back], None if alpha is None else alpha[back]

    def steps(self, words: Tensor | None = None) -> DecodeSteps:
        """The decoding step, faster; ``words``: its word products tabulated
        (:func:`nmt_lib.fast.steps.word_projections`)."""
        return DecodeSteps(self, words, self.fused)


class FastRNNsearch(Fast, RNNsearch):
    pass


class FastRNNencdec(Fast, RNNencdec):
    pass


#: The fast class of each paper class.
FAST = {RNNsearch: FastRNNsearch, RNNencdec: FastRNNencdec, Encoder: FastEncoder,
        Decoder: FastDecoder}  # fmt: skip


def faster(module: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """A module of ``module``'s fast class (:data:`FAST`) made of ``module``'s parameters, buffers
    and submodules (the same objects, not copies), its encoder and decoder made fast in turn, with
    the options ``compiled`` and ``tile`` (also when ``module`` is fast already); ``module`` itself
    if it has no fast class (the models before and after the paper). The fast
    decoder's output matrix is laid out column-major (:func:`column_major`; the paper module's, the
    same parameter, with it)."""
    cls = FAST.get(type(module), type(module) if type(module) in FAST.values() else None)
    if cls is None:  # no fast class (one that is fast already is made again, with these options)
        return module
    fast = cls.__new__(cls)
    state = vars(module)
    fast.__dict__.update(state)  # its settings; its own tables of parameters and submodules:
    for table in ("_parameters", "_buffers", "_modules"):
        fast.__dict__[table] = dict(state[table])
    fast.compiled, fast.tile = compiled, tile
    for name, child in module.named_children():
        fast._modules[name] = faster(child, compiled, tile)
    if isinstance(fast, Decoder):
        column_major(fast.W_o if fast.output_rank is None else fast.W2)
    return fast
