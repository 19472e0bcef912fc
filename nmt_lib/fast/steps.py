"""The decoding step of :mod:`nmt_lib.paper.steps`, computed faster: :class:`DecodeSteps` (the same
function as :class:`nmt_lib.paper.steps.Steps`; the tests compare logits, weights and states),
:func:`word_projections` (its word products tabulated once for many searches) and
:func:`best_words` (the best words of the logits without storing a log-softmax).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..paper.attention import groups
from ..paper.model import Encoded, EncoderDecoder
from ..paper.steps import exclude
from .attention import attend
from .decoder import next_gru_state
from .scan import compute_dtype


class DecodeSteps:
    """The decoding step of :class:`nmt_lib.paper.steps.Steps` (its protocol), the same function computed
    faster: the products that share an input in one matmul each, their weights concatenated and
    cast to the compute dtype once per search (fewer, larger matmuls; the figures: bench/README.md,
    "Decoding step"), without autograd:

    * ``s_{i-1}`` -> ``[W_a s | U_o s + b_o | U_r s; U_z s]``: attention, deep output, and the gates
      of the next state (which are read from the rows of the hypotheses kept);
    * ``c_i`` -> ``[C_o c | C c; C_z c; C_r c]``: deep output and next state (RNNencdec: for each
      sentence, not each hypothesis, ``c`` being fixed);
    * ``ē(y_i)`` -> ``[W ē + b; W_z ē + b_z; W_r ē + b_r | V_o ē]`` once, at the state update, the
      ``V_o`` part kept in the state for the next step's deep output.

    These products, ``U (r ∘ s)`` and the output layer's go through ``fused``'s
    :func:`~nmt_lib.fast.kernels.right_product` where it applies (bf16 on a CPU, float32 on an AMD one):
    AMX tiles where the CPU has them (not for the output layer: ``torch.matmul`` was faster at its
    shape), else oneDNN's prepacked weights.

    With ``words`` (:func:`word_projections`), the last is read from its rows.

    The scores of :meth:`readout` are the logits ``z [G * B, K]`` in the compute dtype and the bias
    ``b_y`` apart, ``(z, b_y)``: :meth:`best_words` adds the bias and normalises a few rows at a
    time, in cache, instead of storing a float32 log-softmax of every row. ``fused``:
    :mod:`nmt_lib.fast.kernels` or None (PyTorch only).
    """

    def __init__(self, model: EncoderDecoder, words: Tensor | None = None, fused=None):
        dec, gru = model.decoder, model.decoder.gru
        self.model, self.dec, self.att = model, dec, dec.attention
        self.n, self.l2 = gru.n, dec.U_o.shape[0]
        cd = compute_dtype(dec.U_o)
        na = 0 if self.att is None else self.att.W_a.shape[0]
        W_a = [] if self.att is None else [self.att.W_a]
        zeros = dec.b_o.new_zeros
        # the weights transposed, row-major: bf16 matmuls on CPUs run faster (bench/README.md)
        rows = lambda ws: torch.cat(ws).t().to(cd).contiguous()  # noqa: E731
        # the deep output's units reordered, pairs (2i, 2i+1) -> (i, l + i): the maxout is then the
        # max of two halves, faster than of the strided pairs (the same numbers; bench/README.md)
        pairs = torch.arange(self.l2, device=dec.b_o.device).view(-1, 2).t().flatten()
        self.S = rows([*W_a, dec.U_o[pairs], gru.U_r, gru.U_z])
        self.b_S = torch.cat([zeros(na), dec.b_o[pairs], zeros(2 * self.n)]).to(cd)
        self.C = rows([dec.C_o[pairs], dec.context_weight()])
        self.Y = rows([gru.input_weight(), dec.V_o[pairs]])
        self.b_Y = torch.cat([gru.input_bias(), zeros(self.l2)]).to(cd)
        self.U = rows([gru.U])
        self.na, self.cd, self.words, self.fused = na, cd, words, fused
        # kernels.right_product where it applies: AMX tiles, or else oneDNN's prepacked weights,
        # both faster than torch.matmul at a decoding worker's rows; not the AMX tiles for the
        # output layer, where torch.matmul is faster (bench/README.md, "AMX tile products")
        product = fused.right_product if fused is not None else (lambda *a, **k: None)
        self.times_S = product(self.S, self.b_S) or (lambda s: torch.addmm(self.b_S, s, self.S))
        self.times_C = product(self.C) or (lambda c: torch.matmul(c, self.C))
        self.times_Y = product(self.Y, self.b_Y) or (lambda e: torch.addmm(self.b_Y, e, self.Y))
        self.times_U = product(self.U) or self.U
        W_o = None if dec.output_rank is not None else product(dec.W_o.to(cd).t(), amx_tiles=False)
        self.times_W_o = W_o or (lambda t: output_without_bias(dec, t))

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
                c, alpha = attend(enc.Uh, P[:, :na], self.att.v_a, enc.h, enc.mask, out, self.fused)
            Q = self.times_C(c)
        t_tilde = torch.add(P[:, na : na + l2], Q[:, :l2])  # its units in `pairs` order
        if v is not None:
            t_tilde += v
        z = self.times_W_o(torch.maximum(t_tilde[:, : l2 // 2], t_tilde[:, l2 // 2 :]))
        return (z, self.dec.b_y), alpha, (s, P[:, na + l2 :], Q[:, l2:])

    def best_words(self, scores: tuple, k: int, no_eos: Tensor, ignore_unk: bool):
        z, b = scores
        return best_words(z, min(k, z.shape[1]), no_eos, ignore_unk, b, fused=self.fused)

    def advance(self, carry: tuple, y: Tensor) -> tuple:
        s, g, x = carry  # s_{i-1}, [U_r s; U_z s], [C c; C_z c; C_r c]
        if self.words is None:
            e = self.times_Y(self.dec.embed(y))  # [R, 3n + 2l]
        else:
            e = self.words.index_select(0, y)
        s = next_gru_state(e[:, : 3 * self.n], x, g, s, self.times_U, self.fused)
        return s, e[:, 3 * self.n :]


def output_without_bias(dec, t: Tensor) -> Tensor:
    """``W_o t`` (``W2 W1 t``), the output layer without ``b_y``, which :func:`best_words` adds."""
    if dec.output_rank is None:
        return torch.nn.functional.linear(t, dec.W_o)
    return torch.nn.functional.linear(torch.nn.functional.linear(t, dec.W1), dec.W2)


def word_projections(steps: DecodeSteps, rows: int | None = None) -> Tensor | None:
    """What ``steps`` computes from each word it advances by, ``[W ē + b; W_z ē + b_z; W_r ē + b_r
    | V_o ē]`` (its order and dtype), for every target word at once: ``[K, 3n + 2l]``, from which
    the steps then read rows instead of multiplying. The same function: the same product of the
    same rows, in a matmul of other height. None where ``rows``, the number of hypotheses the
    searches will advance in all, is below ``K``: the table would cost more than it saves (at
    bench-small it is ~1 MFLOP a row, ~10 % of a beam step's)."""
    K = steps.dec.E.shape[0]
    if rows is not None and rows < K:
        return None
    words = torch.arange(K, device=steps.dec.E.device)
    with torch.no_grad():
        return steps.times_Y(steps.dec.embed(words))


def best_words(
    x: Tensor,
    k: int,
    no_eos: Tensor,
    ignore_unk: bool,
    bias: Tensor | None = None,
    normalized: bool = False,
    fused=None,
) -> tuple[Tensor, Tensor]:
    """The ``k`` most probable words of each row and their float32 log-probabilities, best first,
    with ``<pad>``, ``<unk>`` (if ``ignore_unk``) and, on rows where ``no_eos [R]``, EOS excluded.

    ``x [R, K]`` (may be overwritten): logits (``+ bias [K]``), or log-probabilities when ``normalized``.
    Logits are normalised over the whole vocabulary, the excluded words included (as GroundHog's
    log-softmax before its masks), in float32 at least: each row's log-sum-exp, a few rows at a
    time in cache (on a CPU), then the best words of the logits; the log-softmax is never stored.
    On a CPU with the compiled kernel (``fused``: :mod:`nmt_lib.fast.kernels`) all of it in one
    pass instead; on a GPU, where each operation's launch costs more than its work, in as few
    operations as can be. The same words as :func:`nmt_lib.paper.steps.best_words` of the
    log-softmax."""
    fast = None if fused is None else fused.best_words(x, k, no_eos, ignore_unk, bias, normalized)
    if fast is not None:
        return fast
    R, K = x.shape
    dtype = torch.promote_types(x.dtype, torch.float32)
    if x.device.type != "cpu":
        wide = x.to(dtype) if bias is None else torch.add(x, bias.to(dtype))  # upcast, + bias
        wide = wide if normalized else torch.log_softmax(wide, 1)
        exclude(wide, no_eos, ignore_unk)
        v, j = wide.topk(k, dim=1)
        return v.float(), j
    wide = x if x.dtype == dtype else torch.empty(R, K, dtype=dtype, device=x.device)
    top = lse = None  # each row's max and log Σ exp(x - max): log p = (x - max) - lse, accurately
    if not normalized:
        top, lse = wide.new_empty(R, 1), wide.new_empty(R, 1)
    step = max(1, (1 << 19) // K) if x.device.type == "cpu" else R
    for i in range(0, R, step):  # upcast, bias, log-sum-exp: 2 MB at a time, in cache
        r = slice(i, i + step)
        xr = wide[r] if wide is x else wide[r].copy_(x[r])
        if bias is not None:
            xr += bias
        if lse is not None:
            torch.amax(xr, 1, keepdim=True, out=top[r])
            torch.sum((xr - top[r]).exp_(), 1, keepdim=True, out=lse[r]).log_()
    exclude(wide, no_eos, ignore_unk)
    v, j = topk_rows(wide, k)
    return (v.float(), j) if lse is None else (((v - top) - lse).float(), j)


def topk_rows(x: Tensor, k: int, g: int = 8) -> tuple[Tensor, Tensor]:
    """``x.topk(k, dim=1)`` of a ``[R, K]`` tensor, the same values (indices may differ among
    ties), faster on a CPU for K in the thousands (bench/README.md, "Decoding step"). The columns are cut into ``g`` strided
    slices; the ``k`` best of all columns lie among the ``k`` column groups ``{j, j + w, ...}``
    (``w = K // g``) with the largest maxima, found the same way on the ``[R, w]`` maxima, so only
    ``g * k`` candidates (and the ``K - g w`` tail columns) are sorted."""
    R, K = x.shape
    w = K // g
    if w < 8 * k:
        return x.topk(k, dim=1)
    v = x[:, : g * w].view(R, g, w)
    _, groups = topk_rows(v.amax(1), k, g)  # [R, k]
    cand = v.gather(2, groups[:, None, :].expand(-1, g, -1)).reshape(R, g * k)
    cand = torch.cat([cand, x[:, g * w :]], 1)  # the tail columns: candidates as they are
    val, j = cand.topk(k, dim=1)
    inner = j.clamp(max=g * k - 1)
    idx = torch.where(j < g * k, inner // k * w + groups.gather(1, inner % k), j - g * k + g * w)
    return val, idx
