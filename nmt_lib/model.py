"""RNNsearch and RNNencdec (§3, App. A.2; PAPER.md §2.3–2.4), initialised per App. B.1.

The interface (``CONTRIBUTING.md``)::

    model = build_model(cfg)
    logp, alpha = model(x, x_mask, y, y_mask)        # [B, Ty] (0 at padding), [B, Ty, Tx] | None
    model.score(x, x_mask, y, y_mask)                # [B]
    enc = model.encode(x, x_mask); enc.select(idx)
    s = model.init_state(enc)                        # s_0 [B, n]
    logp_next, c, alpha_i = model.readout_step(enc, s_prev, y_prev)   # y_prev None at step 1
    z, b, c, alpha_i = model.readout_logits(enc, s_prev, y_prev)      # logits z + b
    s = model.next_state(s_prev, y, c)
    steps = model.decode_steps()                     # the same, faster, as a search drives it
    steps = model.decode_steps(model.word_projections())  # ... its word products tabulated once

``s_prev`` may hold ``G`` consecutive states per encoded sentence (``[G * B, n]``: a beam).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from . import kernels
from .attention import groups
from .config import ModelConfig
from .decoder import Decoder, attend, next_gru_state
from .encoder import Encoder
from .gru import compute_dtype


class Encoded(NamedTuple):
    """What the decoder needs from the source, batch-first.

    mask: ``[B, Tx]`` bool source mask. h: ``[B, Tx, 2n]`` annotations, Uh: ``[B, Tx, n']``
    ``U_a h_j`` (RNNsearch; None for RNNencdec). c: ``[B, n]`` fixed context ``h→_{T_x}``
    (RNNencdec; None for RNNsearch).
    """

    mask: Tensor
    h: Tensor | None = None
    Uh: Tensor | None = None
    c: Tensor | None = None

    def select(self, idx: Tensor) -> Encoded:
        """Rows ``idx`` (``[B']`` long) of every field, e.g. to reorder or repeat for a beam."""
        return Encoded(*(None if t is None else t.index_select(0, idx) for t in self))


class EncoderDecoder(nn.Module):
    """What RNNsearch and RNNencdec share: everything but the encoding and the context."""

    encoder: Encoder
    decoder: Decoder

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg

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
        self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing.

        Args:
            x: ``[B, Tx]`` long, x_mask: ``[B, Tx]`` bool, y: ``[B, Ty]`` long, y_mask: ``[B, Ty]``.
        Returns:
            ``logp [B, Ty]`` float32, ``log p(y_i | y_<i, x)``, 0 at padding;
            ``alpha [B, Ty, Tx]`` (RNNsearch) or None (RNNencdec).
        """
        # longest target first: the decoder's recurrence then drops sentences as they end
        order = y_mask.sum(1).argsort(descending=True, stable=True)
        x, x_mask, y, y_mask = (t[order] for t in (x, x_mask, y, y_mask))
        enc = self.encode(x, x_mask)
        logp, alpha = self.decoder(self.init_state(enc), y, y_mask, enc.h, enc.Uh, enc.mask, enc.c)
        back = torch.empty_like(order)
        back[order] = torch.arange(len(order), device=order.device)  # the caller's order again
        return logp[back], None if alpha is None else alpha[back]

    def score(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor) -> Tensor:
        """``log p(y | x)`` per sentence, ``[B]``."""
        return self(x, x_mask, y, y_mask)[0].sum(1)

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
        z, b, c, alpha = self.readout_logits(enc, s_prev, y_prev)
        return self.decoder.log_softmax(z.to(b.dtype) + b), c, alpha

    def readout_logits(
        self, enc: Encoded, s_prev: Tensor, y_prev: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """:meth:`readout_step` before the softmax, its input ``z + b`` in two parts: ``z [G * B,
        K]`` in the compute dtype (bf16 under autocast), the bias parameter ``b [K]`` apart, and
        ``c``, ``alpha_i``. Beam search adds the bias and normalises a few rows at a time, in cache
        (``search.best_words``), instead of storing a float32 log-softmax of every row."""
        c, alpha = self.context(enc, s_prev)
        e_prev = None if y_prev is None else self.decoder.embed(y_prev)
        z = self.decoder.logits(s_prev, e_prev, c, bias=False)
        return z, self.decoder.b_y, c, alpha

    def next_state(
        self, s_prev: Tensor, y: Tensor, c: Tensor, weights: tuple[Tensor, ...] | None = None
    ) -> Tensor:
        """``s_i [B, n]`` from ``s_{i-1} [B, n]``, the word just emitted ``y_i [B]`` and ``c_i``;
        ``weights``: :meth:`step_weights`, to reuse them over the steps of a search."""
        return self.decoder.step_state(s_prev, y, c, weights)

    def step_weights(self) -> tuple[Tensor, ...]:
        """:meth:`next_state`'s weights, concatenated and (decoding) cast once
        (:meth:`~nmt_lib.decoder.Decoder.step_weights`)."""
        return self.decoder.step_weights()

    def decode_steps(self, words: Tensor | None = None) -> DecodeSteps:
        """The decoding steps of a search, faster (:class:`DecodeSteps`; without autograd);
        ``words``: :meth:`word_projections`, computed once for the searches of many batches."""
        return DecodeSteps(self, words)

    def word_projections(self, rows: int | None = None) -> Tensor | None:
        """What :class:`DecodeSteps` computes from each word it advances by, ``[W ē + b; W_z ē +
        b_z; W_r ē + b_r | V_o ē]`` (its order and dtype), for every target word at once: ``[K,
        3n + 2l]``, from which the steps then read rows instead of multiplying. The same function:
        the same product of the same rows, in a matmul of other height. None where ``rows``, the
        number of hypotheses the searches will advance in all, is below ``K``: the table would
        cost more than it saves (at bench-small it is ~1 MFLOP a row, ~10 % of a beam step's)."""
        K = self.decoder.E.shape[0]
        if rows is not None and rows < K:
            return None
        words = torch.arange(K, device=self.decoder.E.device)
        with torch.no_grad():
            return DecodeSteps(self).times_Y(self.decoder.embed(words))


class RNNsearch(EncoderDecoder):
    """Bidirectional encoder, attention, ``s_0 = tanh(W_s h←_1 + b_s)`` (App. A.2)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        n, n_dec = cfg.n, cfg.n_dec or cfg.n
        self.encoder = Encoder(cfg.src_vocab, cfg.m, n, True, cfg.embedding_bias, cfg.gate_bias)
        self.decoder = Decoder(
            cfg.trg_vocab, cfg.m, n_dec, 2 * n, cfg.l, cfg.n_align, cfg.output_rank, n,
            cfg.embedding_bias, cfg.gate_bias,
        )  # fmt: skip

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
        self.encoder = Encoder(cfg.src_vocab, cfg.m, n, False, cfg.embedding_bias, cfg.gate_bias)
        self.decoder = Decoder(
            cfg.trg_vocab, cfg.m, n_dec, n, cfg.l, None, cfg.output_rank, n,
            cfg.embedding_bias, cfg.gate_bias,
        )  # fmt: skip

    def encode(self, x: Tensor, x_mask: Tensor) -> Encoded:
        return Encoded(x_mask, c=Encoder.last_forward(self.encoder(x, x_mask)))  # [B, n]

    def init_state(self, enc: Encoded) -> Tensor:
        return self.decoder.init_state(enc.c)

    def context(self, enc: Encoded, s_prev: Tensor) -> tuple[Tensor, Tensor | None]:
        return enc.c.repeat_interleave(groups(s_prev, enc.c.shape[0]), 0), None


class DecodeSteps:
    """:meth:`~EncoderDecoder.readout_logits` and :meth:`~EncoderDecoder.next_state` as a search
    uses them (``search.model_steps``; CONTRIBUTING.md), the same function computed faster: the
    products that share an input in one matmul each, their weights concatenated and cast to the
    compute dtype once per search (a beam-10 step of 64 sentences at bench-small: 1.09x as fast;
    bench/README.md, "Decoding step"), without autograd:

    * ``s_{i-1}`` -> ``[W_a s | U_o s + b_o | U_r s; U_z s]``: attention, deep output, and the gates
      of the next state (which are read from the rows of the hypotheses kept);
    * ``c_i`` -> ``[C_o c | C c; C_z c; C_r c]``: deep output and next state (RNNencdec: for each
      sentence, not each hypothesis, ``c`` being fixed);
    * ``ē(y_i)`` -> ``[W ē + b; W_z ē + b_z; W_r ē + b_r | V_o ē]`` once, at the state update, the
      ``V_o`` part kept in the state for the next step's deep output.

    These products, ``U (r ∘ s)`` and the output layer's go through
    :func:`nmt_lib.kernels.right_product` where it applies (bf16 on a CPU, float32 on an AMD one):
    AMX tiles where the CPU has them (not for the output layer: ``torch.matmul`` was faster at its
    shape), else oneDNN's prepacked weights.

    With ``words`` (:meth:`~EncoderDecoder.word_projections`), the last is read from its rows.

    ``state = start(enc)``: ``(s_0, None)``; ``z, b, False, alpha, carry = readout(enc, state)``:
    the logits ``z + b`` of every row (``b`` apart, as :meth:`~EncoderDecoder.readout_logits`;
    False: not normalised), ``α_i`` (or None) and ``carry``, per-row tensors that a beam reorders
    (``tuple(t[rows] for t in carry)``); ``state = advance(carry, y)``: the state after ``y``.
    """

    def __init__(self, model: EncoderDecoder, words: Tensor | None = None):
        dec, gru = model.decoder, model.decoder.gru
        self.model, self.dec, self.att = model, dec, dec.attention
        self.n, self.l2 = gru.n, dec.U_o.shape[0]
        cd = compute_dtype(dec.U_o)
        na = 0 if self.att is None else self.att.W_a.shape[0]
        W_a = [] if self.att is None else [self.att.W_a]
        zeros = dec.b_o.new_zeros
        # the weights transposed, row-major: bf16 matmuls on CPUs run faster (the step 1.02x)
        rows = lambda ws: torch.cat(ws).t().to(cd).contiguous()  # noqa: E731
        # the deep output's units reordered, pairs (2i, 2i+1) -> (i, l + i): the maxout is then the
        # max of two halves, 1.9x as fast as of the strided pairs (the same numbers)
        pairs = torch.arange(self.l2, device=dec.b_o.device).view(-1, 2).t().flatten()
        self.S = rows([*W_a, dec.U_o[pairs], gru.U_r, gru.U_z])
        self.b_S = torch.cat([zeros(na), dec.b_o[pairs], zeros(2 * self.n)]).to(cd)
        self.C = rows([dec.C_o[pairs], dec.context_weight()])
        self.Y = rows([gru.input_weight(), dec.V_o[pairs]])
        self.b_Y = torch.cat([gru.input_bias(), zeros(self.l2)]).to(cd)
        self.U = rows([gru.U])
        self.na, self.cd, self.words = na, cd, words
        # kernels.right_product where it applies: AMX tiles (at 640 rows 1.2-1.4x torch.matmul)
        # or else oneDNN's prepacked weights (1.05-1.13x at one thread, a decoding worker's), but
        # not the AMX tiles for the output layer (0.94x)
        product = kernels.right_product
        self.times_S = product(self.S, self.b_S) or (lambda s: torch.addmm(self.b_S, s, self.S))
        self.times_C = product(self.C) or (lambda c: torch.matmul(c, self.C))
        self.times_Y = product(self.Y, self.b_Y) or (lambda e: torch.addmm(self.b_Y, e, self.Y))
        self.times_U = product(self.U) or self.U
        W_o = None if dec.output_rank is not None else product(dec.W_o.to(cd).t(), amx_tiles=False)
        self.times_W_o = W_o or (lambda t: dec.output(t, bias=False))

    def start(self, enc: Encoded) -> tuple:
        return self.model.init_state(enc), None

    def readout(self, enc: Encoded, state: tuple) -> tuple:
        s, v = state
        na, l2, B = self.na, self.l2, enc.mask.shape[0]
        P = self.times_S(s)  # [R, n' + 2l + 2n]
        if self.att is None:
            Q = self.times_C(enc.c).repeat_interleave(groups(s, B), 0)  # [R, 2l + 3n]
            alpha = None
        else:
            R, (Tx, ctx) = s.shape[0], enc.h.shape[1:]
            out = s.new_empty(R, ctx, dtype=self.cd), s.new_empty(R, Tx)  # c in the compute dtype
            with torch.autocast(s.device.type, enabled=False):
                c, alpha = attend(enc.Uh, P[:, :na], self.att.v_a, enc.h, enc.mask, out)
            Q = self.times_C(c)
        t_tilde = torch.add(P[:, na : na + l2], Q[:, :l2])  # its units in `pairs` order
        if v is not None:
            t_tilde += v
        z = self.times_W_o(torch.maximum(t_tilde[:, : l2 // 2], t_tilde[:, l2 // 2 :]))
        return z, self.dec.b_y, False, alpha, (s, P[:, na + l2 :], Q[:, l2:])

    def advance(self, carry: tuple, y: Tensor) -> tuple:
        s, g, x = carry  # s_{i-1}, [U_r s; U_z s], [C c; C_z c; C_r c]
        if self.words is None:
            e = self.times_Y(self.dec.embed(y))  # [R, 3n + 2l]
        else:
            e = self.words.index_select(0, y)
        return next_gru_state(e[:, : 3 * self.n], x, g, s, self.times_U), e[:, 3 * self.n :]


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
    for name, q in model.named_parameters():
        if q.is_meta:
            continue
        # drawn in row-major order whatever the storage layout (W_o is column-major), then copied
        p = q if q.is_contiguous() else torch.empty(q.shape, dtype=q.dtype, device=q.device)
        _init_one(name.rsplit(".", 1)[-1], p, scheme)
        if p is not q:
            q.copy_(p)


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


def build_model(cfg: ModelConfig) -> EncoderDecoder:
    """RNNsearch or RNNencdec (``cfg.arch``), initialised per App. B.1, on the default device."""
    model = (RNNsearch if cfg.arch == "RNNsearch" else RNNencdec)(cfg)
    init_parameters(model, cfg.init)
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
