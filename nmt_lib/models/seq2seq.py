"""Sequence to sequence learning with LSTMs (Sutskever, Vinyals & Le 2014), the model before the
paper: a stacked LSTM reads the source, optionally *reversed*, and its final state is the whole
memory of the source; a second stacked LSTM, started from that state, writes the translation.

The LSTM of both (Hochreiter & Schmidhuber 1997, with a forget gate; ``torch.nn.LSTM``'s, no
peepholes), layer ``k`` at step ``t``, input ``x_t`` (the embedding, or layer ``k - 1``'s ``h_t``)::

    i_t = σ(W_i x_t + b_i + U_i h_{t-1} + c_i)     f_t = σ(W_f x_t + U_f h_{t-1} + b_f)
    g_t = tanh(W_g x_t + U_g h_{t-1} + b_g)        o_t = σ(W_o x_t + U_o h_{t-1} + b_o)
    c_t = f_t ∘ c_{t-1} + i_t ∘ g_t                h_t = o_t ∘ tanh(c_t)

(each ``b`` the sum of PyTorch's two biases). The source ``x_1 .. x_{T_x}`` (EOS last) is read as
``x_{T_x-1} .. x_1, EOS`` with ``reverse_source``: the first source words then sit close to the
first target words, which Sutskever et al. found to help optimisation. The decoder's state starts
as the encoder's final ``(h, c)`` of every layer; at step ``i`` it reads the previous target word
(a zero embedding at ``i = 1``, where the paper's models have no previous word either) and
``p(y_i | y_<i, x) = softmax(W_y h_i + b_y)`` from its top layer's ``h_i``. No attention: the
fixed-size state is the "bottleneck" the paper removes.

Not Sutskever et al.'s (a deviation of the Multi30k testbed, ``model.dropout``, default 0 = none):
while training, dropout (Zaremba et al. 2014's places, never on the recurrence) on the source and
target embeddings, between stacked layers (``torch.nn.LSTM``'s ``dropout``) and on the decoder's
top ``h_i`` before the output layer.

Teacher forcing runs ``torch.nn.LSTM`` over the whole sequence (encoder and decoder), which the
step by step decoding reproduces (``tests/test_seq2seq.py``).

The model has the interface that training, search and evaluation use (``forward``, ``encode``,
``init_state``, ``steps``, ``score``); its decoding step reads the previous word first
(``step``, :mod:`nmt_lib.models.steps`). Its encoding is :class:`LSTMEncoded`, its decoder state an
:class:`LSTMState`, one row per sentence (or hypothesis).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..config import ModelConfig
from ..paper.decoder import log_softmax
from ..paper.model import init_parameters
from ..paper.steps import Searchable, target_log_prob
from .steps import ReadFirstSteps


def reverse_words(x: Tensor, x_mask: Tensor) -> Tensor:
    """Each sentence's words reversed, EOS (its last real token) and the padding left in place:
    ``[x_1 .. x_{T-1}, EOS, pad..]`` -> ``[x_{T-1} .. x_1, EOS, pad..]`` (``[B, Tx]``)."""
    lengths = x_mask.sum(1, keepdim=True)  # [B, 1], EOS included
    j = torch.arange(x.shape[1], device=x.device)[None]  # [1, Tx]
    src = torch.where(j < lengths - 1, lengths - 2 - j, j)  # word j <- word T-2-j; EOS, pads stay
    return x.gather(1, src)


def run_lstm(lstm: nn.LSTM, e: Tensor, mask: Tensor | None, state: tuple | None = None):
    """``lstm`` over ``e [B, T, m]`` from ``state`` (``(h, c)``, each ``[L, B, n]``; None: zeros);
    where ``mask [B, T]`` is False (right padding) the state is carried unchanged, so that the final
    state is each sentence's own after its last real token. Returns the outputs ``[B, T, n]`` (top
    layer) and the final ``(h, c)``."""
    if mask is None or bool(mask.all()):
        return lstm(e, state)
    lengths = mask.sum(1).cpu()
    packed = nn.utils.rnn.pack_padded_sequence(e, lengths, batch_first=True, enforce_sorted=False)
    out, final = lstm(packed, state)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=e.shape[1])
    return out, final


def real_log_prob(
    u: Tensor, y: Tensor, y_mask: Tensor, W: Tensor, b: Tensor, smoothing: float = 0.0
) -> Tensor:
    """``log p(y_i | ·)`` ``[B, Ty]`` (0 at padding) from the output layer's inputs ``u [B, Ty, ·]``:
    ``softmax(W u_i + b)`` at the real positions of ``y_mask`` only, the padding's never computed;
    ``b``: ``[K]``, or ``[B, K]``, one per sentence; ``smoothing``: label smoothing's
    (:func:`~nmt_lib.paper.steps.target_log_prob`)."""
    if b.dim() == 1:
        logits = F.linear(u[y_mask], W, b)  # [N, K], N real positions
    else:  # each position its sentence's row of b
        logits = F.linear(u[y_mask], W) + b.index_select(0, y_mask.nonzero()[:, 0])
    logp = log_softmax(logits)
    logp = target_log_prob(logp, y[y_mask], smoothing)
    return logp.new_zeros(y.shape).masked_scatter(y_mask, logp)


def lstm(inputs: int, cfg) -> nn.LSTM:
    """A stacked ``torch.nn.LSTM`` of ``cfg.layers`` layers of ``cfg.n`` units, batch-first, with
    ``cfg.dropout`` between its layers (while training)."""
    between = cfg.dropout if cfg.layers > 1 else 0.0  # torch warns of dropout after a last layer
    return nn.LSTM(inputs, cfg.n, cfg.layers, batch_first=True, dropout=between)


@torch.no_grad()
def init_lstms(model: nn.Module, cfg: ModelConfig) -> None:
    """``model``'s parameters by the rules of ``model.init`` (:func:`init_parameters`), then each
    of its LSTMs' recurrent matrices orthogonal (each gate's block) and the forget gates' biases
    ``model.forget_bias`` (``bias_ih``'s; ``bias_hh``'s stays 0)."""
    init_parameters(model, cfg.init)
    for module in model.modules():
        if not isinstance(module, nn.LSTM):
            continue
        for name, p in module.named_parameters():
            if name.startswith("weight_hh_") and not p.is_meta:
                for block in p.split(p.shape[1]):  # [4n, n]: i, f, g, o
                    nn.init.orthogonal_(block)
            if name.startswith("bias_ih_") and not p.is_meta:
                p[p.shape[0] // 4 : p.shape[0] // 2] = cfg.forget_bias


class LSTMState(NamedTuple):
    """A stacked LSTM's state, one row per sentence (or hypothesis): ``h``, ``c`` ``[R, L, n]``."""

    h: Tensor
    c: Tensor


def rows_first(state: tuple[Tensor, Tensor]) -> LSTMState:
    """``torch.nn.LSTM``'s ``(h, c)``, each ``[L, B, n]``, as an :class:`LSTMState` (views)."""
    h, c = state
    return LSTMState(h.transpose(0, 1), c.transpose(0, 1))


def layers_first(state: LSTMState) -> tuple[Tensor, Tensor]:
    """The inverse of :func:`rows_first`: what ``torch.nn.LSTM`` takes."""
    return state.h.transpose(0, 1).contiguous(), state.c.transpose(0, 1).contiguous()


class LSTMEncoded(NamedTuple):
    """What the LSTM decoder needs from the source: ``mask [B, Tx]`` and the encoder's final state
    ``h``, ``c`` ``[B, L, n]``, every layer's."""

    mask: Tensor
    h: Tensor
    c: Tensor

    def select(self, idx: Tensor) -> LSTMEncoded:
        """Rows ``idx`` (``[B']`` long) of every field."""
        return LSTMEncoded(*(t.index_select(0, idx) for t in self))


class Seq2seq(Searchable, nn.Module):
    """Embeddings ``E_bar [K_x, m]``, ``E [K_y, m]``; the encoder and decoder LSTMs (``layers``
    stacked, ``n`` units); the output layer ``W_y [K_y, n]``, ``b_y``. ``model.reverse_source``;
    ``model.dropout`` (module docstring)."""

    State = LSTMState

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, self.p = cfg, cfg.dropout
        self.E_bar = nn.Parameter(torch.empty(cfg.src_vocab, cfg.m))
        self.E = nn.Parameter(torch.empty(cfg.trg_vocab, cfg.m))
        self.encoder = lstm(cfg.m, cfg)
        self.decoder = lstm(self.decoder_input_size(), cfg)
        self.W_y = nn.Parameter(torch.empty(cfg.trg_vocab, self.output_input_size()))
        self.b_y = nn.Parameter(torch.zeros(cfg.trg_vocab))

    def reset_parameters(self) -> None:
        """Initialise every parameter (:func:`init_lstms`)."""
        init_lstms(self, self.cfg)

    def drop(self, t: Tensor) -> Tensor:
        """Dropout of probability ``model.dropout`` while training; ``t`` itself at 0."""
        return F.dropout(t, self.p, self.training) if self.p else t

    def decoder_input_size(self) -> int:
        return self.cfg.m

    def output_input_size(self) -> int:
        return self.cfg.n

    def encode(self, x: Tensor, x_mask: Tensor) -> LSTMEncoded:
        """The encoder's final state, every layer's (:class:`LSTMEncoded`)."""
        if self.cfg.reverse_source:
            x = reverse_words(x, x_mask)
        _, final = run_lstm(self.encoder, self.drop(F.embedding(x, self.E_bar)), x_mask)
        return LSTMEncoded(x_mask, *rows_first(final))

    def init_state(self, enc: LSTMEncoded) -> LSTMState:
        """``s_0``: the encoder's final ``(h, c)`` of every layer."""
        return LSTMState(enc.h, enc.c)

    def embed_prev(self, y_prev: Tensor | None, rows: int, like: Tensor) -> Tensor:
        """``E y_{i-1}`` ``[rows, m]``, zeros at the first step (``y_prev`` None)."""
        if y_prev is None:
            return like.new_zeros(rows, self.cfg.m)
        return self.drop(F.embedding(y_prev, self.E))

    def decoder_input(self, enc: LSTMEncoded, e_prev: Tensor) -> Tensor:
        """What the decoder LSTM reads at a step: here the previous word's embedding (``e_prev``
        may hold ``G`` consecutive rows per sentence of ``enc``)."""
        return e_prev

    def output_input(self, enc: LSTMEncoded, h: Tensor) -> Tensor:
        """What the output layer reads: here the decoder's top ``h_i``."""
        return h

    def step(self, enc: LSTMEncoded, s_prev: LSTMState, y_prev: Tensor | None):
        """``log p(y_i | ·) [G * B, K]``, the new state ``s_i`` and no alignment: the decoder
        reads ``y_{i-1}``, then its top ``h_i`` gives the distribution of ``y_i``
        (:mod:`nmt_lib.models.steps`)."""
        e_prev = self.embed_prev(y_prev, s_prev.h.shape[0], s_prev.h)
        inp = self.decoder_input(enc, e_prev)[:, None]  # [R, 1, ·]
        h, state = self.decoder(inp, layers_first(s_prev))
        logits = F.linear(self.output_input(enc, self.drop(h[:, 0])), self.W_y, self.b_y)
        return log_softmax(logits), rows_first(state), None

    def steps(self) -> ReadFirstSteps:
        """The decoding step as a search drives it (:mod:`nmt_lib.models.steps`)."""
        return ReadFirstSteps(self)

    def forward(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0):
        """Teacher forcing, all target positions at once: the decoder LSTM over ``0, E y_1 ..
        E y_{T_y - 1}`` from the encoder's state, the output layer over its top outputs.
        ``logp [B, Ty]`` (0 at padding), None; ``smoothing``: label smoothing's
        (:func:`~nmt_lib.paper.steps.target_log_prob`), for training."""
        enc = self.encode(x, x_mask)
        e = self.drop(F.embedding(y, self.E))  # [B, Ty, m]
        e_prev = torch.cat([torch.zeros_like(e[:, :1]), e[:, :-1]], 1)  # y_0 = 0 .. y_{Ty-1}
        inp = self.decoder_inputs(enc, e_prev)
        # unpacked: the padding is on the right, where no real position's output reads it, and its
        # outputs are never scored (packing would cost more than the padding's steps)
        h, _ = self.decoder(inp, layers_first(self.init_state(enc)))
        return self.scored(enc, self.drop(h), y, y_mask, smoothing), None

    def scored(
        self, enc: LSTMEncoded, h: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0
    ) -> Tensor:
        """``log p(y_i | ·)`` ``[B, Ty]`` (0 at padding) from the decoder's top outputs ``h [B,
        Ty, n]``: the output layer over :meth:`output_inputs`, at the real positions."""
        u = self.output_inputs(enc, h)  # [B, Ty, ·]
        return real_log_prob(u, y, y_mask, self.W_y, self.b_y, smoothing)

    def decoder_inputs(self, enc: LSTMEncoded, e_prev: Tensor) -> Tensor:
        """:meth:`decoder_input` of all steps, ``[B, Ty, ·]``."""
        return e_prev

    def output_inputs(self, enc: LSTMEncoded, h: Tensor) -> Tensor:
        """:meth:`output_input` of all steps, ``[B, Ty, ·]``."""
        return h
