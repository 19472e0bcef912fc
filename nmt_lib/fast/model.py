"""RNNsearch and RNNencdec (:mod:`nmt_lib.paper.model`) computing the same functions faster.

Each fast class is a subclass of its paper class that overrides what training and decoding call,
and nothing else: the encoder's ``forward`` (:func:`encode`), the model's ``forward`` (teacher
forcing, :func:`nmt_lib.fast.decoder.teacher_forced`) and ``steps``
(:class:`nmt_lib.fast.steps.DecodeSteps`; ``prepared_steps``: their word table, for a corpus). A fast model is built as such
(``nmt_lib.models.build_model(cfg, backend("fast"))``, :meth:`nmt_lib.fast.FastBackend.build`): its
parameters and their names are the paper model's, so the checkpoints are the same. Its
initialisation lays the decoder's ``W_o`` out column-major (:func:`column_major`).
:func:`nmt_lib.fast.accelerate` makes a fast copy of a paper model, the paper model unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..paper.attention import additive
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
    e = enc.drop(e if enc.b_E is None else e + enc.b_E)  # model.dropout, while training
    a = nn.functional.linear(e, W, b)  # [Tx, B, D*3n]: one matmul, all of them
    a, mask = a.view(T, B, D, 3 * n).transpose(1, 2), x_mask.t()[:, None]  # [Tx, D, B, ·]
    if D == 2:  # the backward direction reads x_{Tx} .. x_1
        fwd, bwd = a.unbind(1)
        a = torch.stack([fwd, bwd.flip(0)], 1)
        mask = torch.cat([mask, mask.flip(0)], 1)
    U_rz, U = zip(*(g.recurrent_weights() for g in grus), strict=True)
    h0 = x_mask.new_zeros(D, B, n, dtype=enc.E_bar.dtype)  # the parameters' dtype, not bf16
    h = fast_gru_scan(
        a.permute(1, 2, 0, 3),
        h0,
        torch.stack(U_rz),
        torch.stack(U),
        mask.permute(1, 2, 0),
        fused,
        tile,
    )  # [D, B, Tx, n]
    if D == 1:
        return h[0]
    return torch.cat([h[0], h[1].flip(1)], dim=-1)  # [B, Tx, 2n]


def column_major(p: nn.Parameter) -> None:
    """Lay the matrix ``p`` out column-major (``p.t()`` contiguous), its values unchanged: the layout
    in which the output layer's matmul runs fastest (bench/README.md, "The output layer over the
    whole sequence"); its gradient comes
    back in that layout (:func:`~nmt_lib.fast.output.target_log_prob`), and the optimizer's state,
    made after, takes it too."""
    if p.dim() == 2 and not p.t().is_contiguous():
        with torch.no_grad():
            p.data = p.data.t().contiguous().t()


class Options:
    """``compiled``: use the compiled kernels (:mod:`nmt_lib.fast.kernels`) where they apply;
    ``tile``: the row multiple of the recurrences (:func:`~nmt_lib.fast.scan.active_rows`). Set by
    :func:`set_options`."""

    compiled = True
    tile = ROW_TILE

    @property
    def fused(self):
        """What the fast functions take as ``fused``: the kernels, or None (PyTorch only)."""
        return kernels if self.compiled else None


def set_options(module: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """``module`` with the options ``compiled`` and ``tile`` (:class:`Options`) in each of its fast
    modules."""
    for part in module.modules():
        if isinstance(part, Options):
            part.compiled, part.tile = compiled, tile
    return module


class FastEncoder(Options, Encoder):
    def forward(self, x: Tensor, x_mask: Tensor) -> Tensor:
        return encode(self, x, x_mask, self.fused, self.tile)


class FastDecoder(Options, Decoder):
    """The paper decoder, which the fast model's teacher forcing and steps read (``W_o``
    column-major once the model is initialised: :meth:`FastModel.reset_parameters`)."""


class FastModel(Options, EncoderDecoder):
    """A paper model whose encoder and decoder are :class:`FastEncoder` and :class:`FastDecoder`,
    with the batch sorted by target length for them, and :class:`~nmt_lib.fast.steps.DecodeSteps`
    as its decoding step."""

    encoder_class = FastEncoder
    decoder_class = FastDecoder

    def reset_parameters(self) -> None:
        """The paper's initialisation, then the output matrix laid out column-major
        (:func:`column_major`: laid out before, the same random draws would fill other entries)."""
        super().reset_parameters()
        dec = self.decoder
        column_major(dec.W_o if dec.output_rank is None else dec.W2)

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0):
        # longest target first: the decoder's recurrence then drops sentences as they end
        order = y_mask.sum(1).argsort(descending=True, stable=True)
        x, x_mask, y, y_mask = (t[order] for t in (x, x_mask, y, y_mask))
        enc = self.encode(x, x_mask)
        logp, alpha = teacher_forced(
            self.decoder,
            self.init_state(enc),
            y,
            y_mask,
            enc.h,
            enc.Uh,
            enc.mask,
            enc.c,
            self.fused,
            self.tile,
            smoothing,
        )
        back = torch.empty_like(order)
        back[order] = torch.arange(len(order), device=order.device)  # the caller's order again
        return logp[back], None if alpha is None else alpha[back]

    def steps(self, words: Tensor | None = None) -> DecodeSteps:
        """The decoding step, faster; ``words``: its word products tabulated
        (:func:`nmt_lib.fast.steps.word_projections`)."""
        return DecodeSteps(self, words, self.fused)

    def prepared_steps(self, rows: int | None = None):
        """A maker of this model's steps for searches that will advance ``rows`` hypotheses in all
        (:func:`nmt_lib.decoding.steps_maker`): every thread's steps read one table of the word
        products, made once (:func:`nmt_lib.fast.steps.word_projections`; none for short
        searches)."""
        words = word_projections(self.steps(), rows)
        return lambda: self.steps(words)


class FastRNNsearch(FastModel, RNNsearch):
    pass


class FastRNNencdec(FastModel, RNNencdec):
    pass


#: The fast class of each paper class.
FAST = {
    RNNsearch: FastRNNsearch,
    RNNencdec: FastRNNencdec,
    Encoder: FastEncoder,
    Decoder: FastDecoder,
}


def fast_copy(model: nn.Module, compiled: bool = True, tile: int = ROW_TILE) -> nn.Module:
    """A new model of ``model``'s fast class (:data:`FAST`) holding copies of its parameters and
    buffers, on its device, in its dtype and mode, the output matrix column-major, with the
    options ``compiled`` and ``tile`` (also when ``model`` is fast already); ``model`` unchanged.
    ``model`` itself where it has no fast class (the models before and after the paper)."""
    cls = FAST.get(type(model), type(model) if isinstance(model, FastModel) else None)
    if cls is None or not isinstance(model, EncoderDecoder):
        return model
    att = model.decoder.attention
    if att is not None and att.function is not additive:
        raise ValueError("the fast backend computes the paper's attention only (additive)")
    p = next(model.parameters())
    fast = cls(model.cfg).to(p.device, p.dtype)
    fast.load_state_dict(model.state_dict())
    dec = fast.decoder
    column_major(dec.W_o if dec.output_rank is None else dec.W2)
    return set_options(fast.train(model.training), compiled, tile)
