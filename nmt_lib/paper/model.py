"""RNNsearch and RNNencdec (§3, App. A.2; PAPER.md §2.3–2.4), initialised per App. B.1.

The interface (``CONTRIBUTING.md``)::

    model = build_model(cfg)
    logp, alpha = model(x, x_mask, y, y_mask)        # [B, Ty] (0 at padding), [B, Ty, Tx] | None
    model.score(x, x_mask, y, y_mask)                # [B]
    enc = model.encode(x, x_mask); enc.select(idx)
    s = model.init_state(enc)                        # s_0 [B, n]
    logp_next, c, alpha_i = model.readout_step(enc, s_prev, y_prev)   # y_prev None at step 1
    s = model.next_state(s_prev, y, c)
    steps = model.steps()                            # the step as a search drives it (nmt_lib.paper.steps)

``s_prev`` may hold ``G`` consecutive states per encoded sentence (``[G * B, n]``: a beam). These
are the paper's equations in plain PyTorch, what the reference backend runs; the fast backend
(:func:`nmt_lib.backend.backend`) computes the same functions faster.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from .attention import groups
from .decoder import Decoder, log_softmax
from .encoder import Encoder
from .steps import Searchable, teacher_forced


class Encoded(NamedTuple):
    """What the decoder needs from the source, batch-first.

    mask: ``[B, Tx]`` bool source mask. h: ``[B, Tx, 2n]`` annotations, Uh: ``[B, Tx, n']``
    ``U_a h_j`` (RNNsearch; None for RNNencdec). c: ``[B, n]`` fixed context ``h→_{T_x}``
    (RNNencdec; None for RNNsearch). (The other models have encodings of their own.)
    """

    mask: Tensor
    h: Tensor | None = None
    Uh: Tensor | None = None
    c: Tensor | None = None

    def select(self, idx: Tensor) -> Encoded:
        """Rows ``idx`` (``[B']`` long) of every field, e.g. to reorder or repeat for a beam."""
        return Encoded(*(None if t is None else t.index_select(0, idx) for t in self))


class EncoderDecoder(Searchable, nn.Module):
    """What RNNsearch and RNNencdec share: everything but the encoding and the context.
    ``encoder_class``, ``decoder_class``: the classes of its two parts, which a subclass that
    computes them otherwise names (:mod:`nmt_lib.fast.model`)."""

    encoder_class = Encoder
    decoder_class = Decoder
    encoder: Encoder
    decoder: Decoder

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg

    def reset_parameters(self) -> None:
        """Initialise every parameter per App. B.1 (:func:`init_parameters`, ``model.init``)."""
        init_parameters(self, self.cfg.init)

    def encode(self, x: Tensor, x_mask: Tensor) -> Encoded:
        """``x [B, Tx]`` long, ``x_mask [B, Tx]`` bool -> :class:`Encoded`."""
        raise NotImplementedError

    def init_state(self, enc: Encoded) -> Tensor:
        """``s_0 [B, n]``."""
        raise NotImplementedError

    def context(self, enc: Encoded, s_prev: Tensor) -> tuple[Tensor, Tensor | None]:
        """``c_i [G * B, ctx]``, ``alpha_i [G * B, Tx]`` or None, for ``s_prev [G * B, n]``."""
        raise NotImplementedError

    def forward(
        self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: the steps of :mod:`nmt_lib.paper.decoder`, in order, for ``i = 1..T_y``
        (:func:`nmt_lib.paper.steps.teacher_forced`; the same function, faster:
        :mod:`nmt_lib.fast.decoder`).

        Args:
            x: ``[B, Tx]`` long, x_mask: ``[B, Tx]`` bool, y: ``[B, Ty]`` long, y_mask: ``[B, Ty]``;
            smoothing: label smoothing for training (:func:`nmt_lib.paper.steps.target_log_prob`).
        Returns:
            ``logp [B, Ty]`` float32, ``log p(y_i | y_<i, x)``, 0 at padding;
            ``alpha [B, Ty, Tx]`` (RNNsearch) or None (RNNencdec).
        """
        return teacher_forced(self, x, x_mask, y, y_mask, smoothing)

    def readout_step(
        self, enc: Encoded, s_prev: Tensor, y_prev: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Next-word distribution from ``s_{i-1}`` (GroundHog steps 1–3).

        Args:
            enc: :class:`Encoded` ``[B, ...]``; s_prev: ``[G * B, n]``, ``G`` consecutive states per
            sentence (``G = 1``, or the hypotheses of a beam, which share ``enc``'s row); y_prev:
            ``[G * B]`` long, or None at the first step (zero previous-word term, GroundHog).
        Returns:
            ``logp_next [G * B, K]`` float32 log-softmax, ``c [G * B, ctx]``, ``alpha_i [G * B, Tx]``
            or None.
        """
        c, alpha = self.context(enc, s_prev)
        e_prev = None if y_prev is None else self.decoder.embed(y_prev)
        return log_softmax(self.decoder.logits(s_prev, e_prev, c)), c, alpha

    def next_state(self, s_prev: Tensor, y: Tensor, c: Tensor) -> Tensor:
        """``s_i [B, n]`` from ``s_{i-1} [B, n]``, the word just emitted ``y_i [B]`` and ``c_i``."""
        return self.decoder.step_state(s_prev, y, c)


class RNNsearch(EncoderDecoder):
    """Bidirectional encoder, attention, ``s_0 = tanh(W_s h←_1 + b_s)`` (App. A.2). ``attention``:
    the function of its alignment model and context, by name or a callable
    (:class:`~nmt_lib.paper.attention.Attention`; default the paper's)."""

    def __init__(self, cfg: ModelConfig, attention="additive"):
        super().__init__(cfg)
        n, n_dec = cfg.n, cfg.n_dec or cfg.n
        self.encoder = self.encoder_class(
            cfg.src_vocab, cfg.m, n, True, cfg.embedding_bias, cfg.gate_bias, cfg.dropout
        )
        self.decoder = self.decoder_class(
            cfg.trg_vocab,
            cfg.m,
            n_dec,
            2 * n,
            cfg.l,
            cfg.n_align,
            cfg.output_rank,
            n,
            cfg.embedding_bias,
            cfg.gate_bias,
            cfg.dropout,
            attention,
        )

    def encode(self, x: Tensor, x_mask: Tensor) -> Encoded:
        h = self.encoder(x, x_mask)  # [B, Tx, 2n]
        return Encoded(x_mask, h, self.decoder.attention.precompute(h))  # U_a h_j once

    def init_state(self, enc: Encoded) -> Tensor:
        return self.decoder.init_state(enc.h[:, 0, self.cfg.n :])  # h←_1

    def context(self, enc: Encoded, s_prev: Tensor) -> tuple[Tensor, Tensor | None]:
        return self.decoder.attend(s_prev, enc.h, enc.Uh, enc.mask)


class RNNencdec(EncoderDecoder):
    """Forward encoder, ``c_i = c = h→_{T_x}`` at every step, ``s_0 = tanh(W_s c + b_s)`` (§2.3)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        n, n_dec = cfg.n, cfg.n_dec or cfg.n
        self.encoder = self.encoder_class(
            cfg.src_vocab, cfg.m, n, False, cfg.embedding_bias, cfg.gate_bias, cfg.dropout
        )
        self.decoder = self.decoder_class(
            cfg.trg_vocab,
            cfg.m,
            n_dec,
            n,
            cfg.l,
            None,
            cfg.output_rank,
            n,
            cfg.embedding_bias,
            cfg.gate_bias,
            cfg.dropout,
        )

    def encode(self, x: Tensor, x_mask: Tensor) -> Encoded:
        return Encoded(x_mask, c=Encoder.last_forward(self.encoder(x, x_mask)))  # [B, n]

    def init_state(self, enc: Encoded) -> Tensor:
        return self.decoder.init_state(enc.c)

    def context(self, enc: Encoded, s_prev: Tensor) -> tuple[Tensor, Tensor | None]:
        G = groups(s_prev, enc.c.shape[0])
        return (enc.c if G == 1 else enc.c.repeat_interleave(G, 0)), None


#: Parameter names (last component) with special initialisations (App. B.1).
RECURRENT = ("U", "U_z", "U_r")  # random orthogonal
ALIGNMENT = ("W_a", "U_a")  # N(0, 0.001²)


@torch.no_grad()
def init_parameters(model: nn.Module, scheme: str = "paper") -> None:
    """App. B.1 / PAPER.md §3 (``scheme="paper"``): orthogonal ``U, U_z, U_r`` (each matrix),
    N(0, 0.001²) for ``W_a``, ``U_a``, zeros for ``v_a`` and every bias (``b*``), N(0, 0.01²) for
    everything else.

    ``scheme="fanin"`` (a named deviation for small models, ``model.init``): recurrent matrices and
    biases as the paper, embeddings N(0, 1), ``v_a`` N(0, 1/n'), every other matrix
    N(0, 1/fan_in). At small sizes the paper's N(0, 0.01²) shrinks the source signal to ~1e-5 by
    the output, and ``v_a = 0`` gives ``W_a``, ``U_a`` exactly zero gradient at first: attention
    stays uniform for thousands of updates (book: deviations page)."""
    for name, p in model.named_parameters():
        if not p.is_meta:
            _init_one(name.rsplit(".", 1)[-1], p, scheme)


def _init_one(leaf: str, p: Tensor, scheme: str) -> None:
    """One parameter of :func:`init_parameters`, by its name's last component."""
    if leaf in RECURRENT:
        nn.init.orthogonal_(p)
    elif leaf.startswith("b"):
        nn.init.zeros_(p)
    elif scheme == "paper":
        if leaf in ALIGNMENT:
            nn.init.normal_(p, 0.0, 0.001)
        elif leaf == "v_a":
            nn.init.zeros_(p)
        else:
            nn.init.normal_(p, 0.0, 0.01)
    elif leaf in ("E", "E_bar"):
        nn.init.normal_(p, 0.0, 1.0)
    else:  # fan-in scaling; v_a: [n'] -> 1/n'
        nn.init.normal_(p, 0.0, p.shape[-1] ** -0.5)


def build_model(cfg: ModelConfig, attention="additive") -> EncoderDecoder:
    """RNNsearch or RNNencdec (``cfg.arch``), initialised per App. B.1, on the default device;
    ``attention``: RNNsearch's attention function (:class:`RNNsearch`)."""
    if cfg.arch == "RNNsearch":
        model = RNNsearch(cfg, attention)
    elif attention != "additive":
        raise ValueError(f"{cfg.arch} has no attention to choose")
    else:
        model = RNNencdec(cfg)
    model.reset_parameters()
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters."""
    return sum(p.numel() for p in model.parameters())


def forward_macs(cfg: ModelConfig, src_len: float, trg_len: float) -> float:
    """Multiply-adds of the matrix products of one forward pass over one sentence pair, from the
    sizes (App. A.2): ``src_len``, ``trg_len`` real tokens (EOS included).

    Encoder, per source token and direction: ``m·3n`` (W, W_z, W_r) + ``n·2n`` (U_r, U_z) + ``n·n`` (U);
    RNNsearch also ``2n·n'`` (U_a h_j). Decoder, per target token: ``m·3n_d`` + ``ctx·3n_d`` (C, C_z,
    C_r; once per sentence for RNNencdec) + ``n_d·2n_d`` + ``n_d·n_d``; RNNsearch adds ``n_d·n'`` (W_a s)
    and, per source token, ``n'`` (v_a) + ``ctx`` (Σ α h); deep output ``(n_d + m + ctx)·2l``; output
    ``l·K`` (or ``l·r + r·K`` with GroundHog's rank r); less, for RNNsearch, the last state's
    ``ctx·3n_d + n_d·n_d``: ``s_{T_y}`` feeds nothing, and its scan does not compute it. Elementwise
    work (tanh, softmax) is not counted; the embedding lookups are not matmuls. Training = 3 ×
    forward (backward = 2 × forward).
    """
    m, n, nd, na, l, K = cfg.m, cfg.n, cfg.n_dec or cfg.n, cfg.n_align, cfg.l, cfg.trg_vocab
    search = cfg.arch == "RNNsearch"
    ctx = 2 * n if search else n
    D = 2 if search else 1
    enc = D * (m * 3 * n + n * 2 * n + n * n) + (2 * n * na if search else 0)
    dec = m * 3 * nd + nd * 2 * nd + nd * nd + (nd + m + ctx) * 2 * l
    dec += l * K if cfg.output_rank is None else l * cfg.output_rank + cfg.output_rank * K
    if search:
        dec += ctx * 3 * nd + nd * na + src_len * (na + ctx)
    total = src_len * enc + trg_len * dec + nd * n  # + W_s for s_0
    if search:
        total -= ctx * 3 * nd + nd * nd  # s_Ty's C c and U (r ∘ s)
    if not search:
        total += ctx * 3 * nd  # C c once
    return float(total)
