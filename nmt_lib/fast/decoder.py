"""The decoder of :mod:`nmt_lib.paper.decoder` over a reference (teacher forcing), computed faster:
:func:`teacher_forced` is the paper's :func:`nmt_lib.paper.steps.teacher_forced` of the decoder's
steps given the encoding (the same function; the tests compare values and gradients on both
backends).

* the input projections of all steps in one matmul;
* the recurrence with a hand-written backward through time (:func:`attention_decoder_scan`,
  :func:`~nmt_lib.fast.scan.fast_gru_scan`), rows dropped as sentences end;
* the deep output and the softmax of all real (non-padding) positions at once after the loop
  (:mod:`nmt_lib.fast.output`'s :func:`~nmt_lib.fast.output.target_log_prob`, rows padded to a
  multiple of 64: :func:`~nmt_lib.fast.output.padded_rows`).

Also :func:`next_gru_state`, the decoder's GRU step without autograd that the fast decoding steps
use (:mod:`nmt_lib.fast.steps`). ``fused``: :mod:`nmt_lib.fast.kernels` or None (PyTorch only);
``tile``: :func:`~nmt_lib.fast.scan.active_rows`'s row multiple.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from ..paper.decoder import Decoder, log_softmax
from ..paper.steps import target_log_prob as smoothed
from .attention import attend, attend_backward
from .output import padded_rows, target_log_prob
from .scan import (
    ROW_TILE,
    active_rows,
    compute_dtype,
    elementwise,
    embedding,
    fast_gru_scan,
    in_transposed_layout,
    product,
    right_products,
    static_shapes,
    transposed,
)


def teacher_forced(
    dec: Decoder,
    s0: Tensor,
    y: Tensor,
    y_mask: Tensor,
    h: Tensor | None = None,
    Uh: Tensor | None = None,
    x_mask: Tensor | None = None,
    c: Tensor | None = None,
    fused=None,
    tile: int = ROW_TILE,
    smoothing: float = 0.0,
) -> tuple[Tensor, Tensor | None]:
    """The paper decoder's steps over the reference ``y`` from ``s0``, faster (module docstring).
    The decoder's dropout (``model.dropout``, while training) drops ``ē(y)`` once for both its uses
    and ``t_i``; label smoothing (``smoothing``, :func:`~nmt_lib.paper.steps.target_log_prob`)
    takes the whole distribution, in plain PyTorch.

    Args:
        dec: the paper decoder whose parameters are used.
        s0: ``[B, n]``; y: ``[B, Ty]`` long (EOS included); y_mask: ``[B, Ty]`` bool.
        h, Uh, x_mask: ``[B, Tx, 2n]``, ``[B, Tx, n']``, ``[B, Tx]`` (attention), or
        c: ``[B, ctx]`` the fixed context (RNNencdec).
    Returns:
        ``logp [B, Ty]`` float32 (0 at padding), ``alpha [B, Ty, Tx]`` (0 at padding) or None.
    """
    # time-major ([Ty, B, ·]): the recurrence reads each step's rows in one block
    e = embedding(y.t(), dec.E)  # [Ty, B, m]
    e = dec.drop(e if dec.b_E is None else e + dec.b_E)  # model.dropout, while training
    a = dec.gru.project(e)  # [Ty, B, 3n]: input pre-activations of all steps, one matmul
    s_prev, c_all, alpha = _states(dec, a, s0, y_mask, h, Uh, x_mask, c, fused, tile)
    e_prev = torch.cat([torch.zeros_like(e[:1]), e[:-1]])  # ē(y_{i-1}), 0 at i=1
    return _output_log_prob(dec, s_prev, e_prev, c, c_all, y, y_mask, fused, smoothing), alpha


def _states(dec: Decoder, a: Tensor, s0, y_mask, h, Uh, x_mask, c, fused, tile) -> tuple:
    """The recurrence of :func:`teacher_forced` over the input pre-activations ``a [Ty, B, 3n]``:
    ``s_0 .. s_{Ty-1} [Ty, B, n]``, ``c_1 .. c_Ty [Ty, B, ctx]`` and ``alpha [B, Ty, Tx]`` (0 at
    padding); the last two None for a fixed context ``c`` (RNNencdec)."""
    U_rz, U = dec.gru.recurrent_weights()
    if dec.attention is None:
        a = a + F.linear(c, dec.context_weight())  # fixed context: once
        s = fast_gru_scan(a.transpose(0, 1), s0, U_rz, U, y_mask, fused, tile).transpose(0, 1)
        return torch.cat([s0[None], s[:-1]]), None, None  # s_0 .. s_{Ty-1} [Ty, B, n]
    att = dec.attention
    W_s = torch.cat([dec.gru.U_r, dec.gru.U_z, att.W_a]).t()  # one matmul of s_{i-1}
    C_in = dec.context_weight().t()
    s_prev, c_all, alpha = attention_decoder_scan(
        a.transpose(0, 1), s0, y_mask, h, Uh, x_mask, W_s, C_in, U, att.v_a, fused, tile
    )
    s_prev, c_all = s_prev.transpose(0, 1), c_all.transpose(0, 1)  # [Ty, B, ·]
    return s_prev, c_all, alpha.masked_fill(~y_mask[..., None], 0.0)


def _output_log_prob(dec: Decoder, s_prev, e_prev, c, c_all, y, y_mask, fused, smoothing) -> Tensor:
    """After the loop of :func:`teacher_forced`: the deep output and the softmax of all the real
    positions at once (rows padded: :func:`~nmt_lib.fast.output.padded_rows`), ``logp [B, Ty]``
    float32, 0 at padding. ``s_prev``, ``e_prev`` ``[Ty, B, ·]``; the contexts ``c_all [Ty, B, ctx]``,
    or None and the fixed ``c [B, ctx]``."""
    # the N real positions (time-major order), then copies of the first up to 64k; all the
    # positions, padding too, where the shapes must not depend on the mask (its logp is dropped)
    if static_shapes(y_mask):
        N = y_mask.numel()
        real = torch.arange(N, device=y_mask.device)
    else:
        real, N = padded_rows(y_mask.t())
    # index_select: its backward (index_add_) is faster than indexing's (index_put_, which sorts
    # the indices, repeated ones here)
    rows = lambda x: x.flatten(0, 1).index_select(0, real)  # noqa: E731
    c_rows = c.index_select(0, real % c.shape[0]) if c_all is None else rows(c_all)
    t = dec.drop(dec.deep_output(rows(s_prev), rows(e_prev), c_rows))  # [64k, l]
    if smoothing:  # every word's log-probability: the plain way
        logp = smoothed(log_softmax(dec.output(t)), rows(y.t()), smoothing)[:N]
    else:
        u, W = (t, dec.W_o) if dec.output_rank is None else (F.linear(t, dec.W1), dec.W2)
        logp = target_log_prob(u, W, dec.b_y, rows(y.t()), fused)[:N]  # [N] float32
    if N == y_mask.numel():  # every position
        return logp.view(y.t().shape).masked_fill(~y_mask.t(), 0.0).t()
    return logp.new_zeros(y.t().shape).masked_scatter(y_mask.t(), logp).t()


def next_gru_state(a: Tensor, x: Tensor, g: Tensor, s_prev: Tensor, U, fused=None) -> Tensor:
    """The decoder's GRU step without autograd (decoding), from its pre-activations ``[B, ·]``:
    ``a = [W; W_z; W_r] ē(y_i) + b``, ``x = [C; C_z; C_r] c_i``, ``g = [U_r s; U_z s]`` of
    ``s_{i-1}``, and ``U`` (as ``(r ∘ s) @ U``; or a function computing that product, e.g.
    :func:`nmt_lib.fast.kernels.amx_product`'s); the elementwise work in
    :func:`~nmt_lib.fast.scan.elementwise` (``fused``'s where it applies) in ``s_{i-1}``'s dtype."""
    n, (gates, update, _, _) = s_prev.shape[-1], elementwise(fused)
    r, z, h_tilde, s = (torch.empty_like(s_prev) for _ in range(4))
    rs = torch.empty_like(r, dtype=compute_dtype(g))
    gates(a, x, g, s_prev, r, z, rs)
    u = U(rs) if callable(U) else torch.matmul(rs, U)
    update(a[:, :n], x[:, :n], u, z, s_prev, None, h_tilde, s)
    return s


def attention_decoder_scan(
    a: Tensor,
    s0: Tensor,
    y_mask: Tensor,
    h: Tensor,
    Uh: Tensor,
    x_mask: Tensor,
    W_s: Tensor,
    C_in: Tensor,
    U: Tensor,
    v_a: Tensor,
    fused=None,
    tile: int = ROW_TILE,
) -> tuple[Tensor, Tensor, Tensor]:
    """The recurrence of RNNsearch's decoder over a reference (steps 1 and 4 of the module
    docstring) with a hand-written backward through time, as :func:`~nmt_lib.fast.scan.fast_gru_scan`.

    Per step: ``[U_r s; U_z s; W_a s]`` in one matmul of ``s_{i-1}``; ``c_i, α_i`` (App. A.1.2);
    the GRU update with ``[C; C_z; C_r] c_i`` in every gate, the state copied past the sentence
    end. The matmuls run in :func:`~nmt_lib.fast.scan.compute_dtype` (bf16 under autocast; the per-step
    ones by :func:`~nmt_lib.fast.scan.right_products`: AMX tiles or prepacked weights), and so does
    ``c_i = Σ_j α_ij h_j`` (the compiled kernel accumulates it in float32 and rounds it once); all
    else (the energies and softmax too) in ``s0``'s dtype. The attention step is :func:`~nmt_lib.fast.attention.attend` and
    the GRU's elementwise work :func:`~nmt_lib.fast.scan.elementwise` (both compiled where they apply),
    forward and backward; ``tanh(W_a s_{i-1} + U_a h_j)`` is computed in cache (a sentence, or a few
    at a time) and recomputed in the backward rather than stored (``[Ty, B, Tx, n']``).

    Args:
        a: ``[B, Ty, 3n]`` = ``[W; W_z; W_r] ē(y_i) + b`` (any view: on a CPU, a time-major one is
        read in place); s0: ``[B, n]``; y_mask: ``[B, Ty]``;
        h, Uh, x_mask: ``[B, Tx, ctx]``, ``[B, Tx, n']``, ``[B, Tx]`` bool;
        W_s: ``[n, 2n + n']`` = ``[U_r; U_z; W_a]ᵀ``; C_in: ``[ctx, 3n]`` = ``[C; C_z; C_r]ᵀ``;
        U: ``[n, n]`` = ``Uᵀ``; v_a: ``[n']``.
    Returns:
        ``s_0..s_{Ty-1} [B, Ty, n]``, ``c_1..c_Ty [B, Ty, ctx]`` (compute dtype), ``α [B, Ty, Tx]``
        (``s0``'s dtype): views of time-major tensors.
    """
    cd, sd = compute_dtype(U), s0.dtype
    # time-major: the CPU kernels read a view of a bf16 a (autocast) as it is; elsewhere the PyTorch
    # functions would convert each step's rows, so a is converted once, into time-major order
    a = a.transpose(0, 1) if a.device.type == "cpu" else a.to(sd).transpose(0, 1).contiguous()
    S, C, A = _AttentionDecoderScan.apply(
        a,
        s0,
        y_mask.t().unsqueeze(-1),
        h.to(cd),
        Uh.to(sd),
        x_mask,
        W_s.to(cd),
        C_in.to(cd),
        U.to(cd),
        v_a.to(sd),
        fused,
        tile,
    )
    return S.transpose(0, 1), C.transpose(0, 1), A.transpose(0, 1)


class _AttentionDecoderScan(torch.autograd.Function):
    """Time-major: ``a [Ty, B, 3n]`` (any view, in any float dtype: the kernels read it in place, the
    sums are computed in ``s0``'s dtype), ``mask [Ty, B, 1]``; returns ``S, C, A`` time-major.

    Step ``i`` computes only the first ``k_i`` rows (:func:`~nmt_lib.fast.scan.active_rows`): the
    sentences after the last one still running are past their end, where the state is copied and
    ``c_i``, ``α_i`` are not computed but 0 (the caller reads only real positions)."""

    @staticmethod
    def forward(ctx, a, s0, mask, h, Uh, x_mask, W_s, C_in, U, v_a, fused, tile):
        (Ty, B, _), n, cd = a.shape, s0.shape[-1], U.dtype
        S = s0.new_empty(Ty, B, n)  # s_0 .. s_{Ty-1}
        C = h.new_zeros(Ty, B, h.shape[-1])  # c_1 .. c_Ty
        A = s0.new_zeros(Ty, B, h.shape[1])  # α_1 .. α_Ty
        Q = s0.new_empty(Ty, B, Uh.shape[-1])  # W_a s_{i-1}
        R, Z, St = torch.empty_like(S), torch.empty_like(S), torch.empty_like(S)
        RS = S.new_zeros(S.shape, dtype=cd)  # r_i ∘ s_{i-1}, the input of U
        ks = active_rows(mask, tile)
        s = s0.clone()
        s_c = s0.to(cd, copy=True) if cd != s.dtype else None  # s in the compute dtype
        gates, update, _, _ = elementwise(fused)
        times_W_s, times_C_in, times_U = (right_products(w, fused) for w in (W_s, C_in, U))
        with torch.autocast(s0.device.type, enabled=False):
            for i, k in enumerate(ks):
                S[i] = s
                s_k = s[:k]
                g = times_W_s(s_k if s_c is None else s_c[:k])  # U_r s, U_z s, W_a s
                Q[i, :k] = g[:, 2 * n :]
                c, _ = attend(Uh[:k], Q[i, :k], v_a, h[:k], x_mask[:k], (C[i, :k], A[i, :k]), fused)
                if i == Ty - 1:  # s_Ty is not returned, nor read: its update is skipped
                    break
                x = times_C_in(c)  # [k, 3n]: [C; C_z; C_r] c
                gates(a[i, :k], x, g[:, : 2 * n], s_k, R[i, :k], Z[i, :k], RS[i, :k])
                u = times_U(RS[i, :k])  # U (r ∘ s)
                update(
                    a[i, :k, :n],
                    x[:, :n],
                    u,
                    Z[i, :k],
                    s_k,
                    mask[i, :k],
                    St[i, :k],
                    s_k,
                    None if s_c is None else s_c[:k],
                )
        ctx.save_for_backward(mask, h, Uh, x_mask, W_s, C_in, U, v_a, S, C, A, Q, R, Z, St, RS)
        ctx.ks, ctx.fused = ks, fused
        return S, C, A

    @staticmethod
    def backward(ctx, dS, dC, dA):
        mask, h, Uh, x_mask, W_s, C_in, U, v_a, S, C, A, Q, R, Z, St, RS = ctx.saved_tensors
        (Ty, B, n), cd, fused = S.shape, U.dtype, ctx.fused
        d_pre = S.new_empty(*S.shape[:-1], 3 * n)  # ∂L/∂pre-activations [candidate; z; r]
        same = cd == d_pre.dtype  # else d_pre again in the compute dtype, for the matmuls
        d_pre_c = d_pre if same else torch.empty_like(d_pre, dtype=cd)
        d_g = S.new_empty(*S.shape[:-1], W_s.shape[-1], dtype=cd)  # ∂L/∂[U_r s; U_z s; W_a s]
        d_c = torch.empty_like(C)  # ∂L/∂c_i, in the compute dtype (as c_i)
        d_cand = S.new_empty(B, n, dtype=cd)  # ∂L/∂pre-activation of the candidate, for U
        d_sum = torch.zeros_like(Uh)  # Σ_i ∂L/∂e_ij (1 - t_ij²) = ∂L/∂(U_a h_j) / v_a
        dv = torch.zeros_like(Q[0])  # each sentence's ∂L/∂v_a, summed over the steps
        ds = torch.zeros_like(S[0])  # ∂L/∂s_i through the steps after i
        _, _, back_update, back_reset = elementwise(fused)
        times_W_s_t, times_C_in_t, times_U_t = (right_products(w.mT, fused) for w in (W_s, C_in, U))
        for i in reversed(range(Ty)):
            k = ctx.ks[i]
            if k < B:  # the rows past their end: s_i = s_{i-1}; c_i, α_i are 0, not computed
                ds[k:] += dS[i, k:]
                for d in (d_pre, d_pre_c, d_g, d_c):  # d_pre_c may be d_pre: zeroed twice
                    d[i, k:] = 0
            s, r, z, s_tilde, alpha = S[i, :k], R[i, :k], Z[i, :k], St[i, :k], A[i, :k]
            if i == Ty - 1:  # no update of s_Ty (forward): only c_Ty's gradient, the rest 0
                for d in (d_pre, d_pre_c, d_g[..., : 2 * n]):
                    d[i, :k] = 0
                d_c[i, :k] = dC[i, :k]
            else:  # the GRU update (past the sentence end s_i = s_{i-1}: only ds passes), then r
                back_update(ds[:k], mask[i, :k], z, s_tilde, s, d_pre[i, :k], d_cand[:k])
                d_rs = times_U_t(d_cand[:k])
                back_reset(
                    d_rs,
                    s,
                    r,
                    d_pre[i, :k],
                    d_g[i, :k, : 2 * n],
                    ds[:k],
                    None if same else d_pre_c[i, :k],
                )
                torch.add(times_C_in_t(d_pre_c[i, :k]), dC[i, :k], out=d_c[i, :k])
            attend_backward(
                Uh[:k],
                Q[i, :k],
                v_a,
                h[:k],
                d_c[i, :k],
                alpha,
                dA[i, :k],
                d_sum[:k],
                d_g[i, :k, 2 * n :],
                dv[:k],
                fused,
            )  # d_g: ∂L/∂(W_a s)
            ds[:k] += times_W_s_t(d_g[i, :k]) + dS[i, :k]
        # the weight gradients: one matmul over all steps and sentences each, [k, N] @ [N, k']
        rows = lambda x: x.reshape(-1, x.shape[-1])  # noqa: E731
        dW_s = product(transposed(rows(S), cd, fused), rows(d_g), fused)
        dC_in = product(transposed(rows(C), cd, fused), rows(d_pre_c), fused)
        dU = product(transposed(rows(RS), cd, fused), rows(d_pre_c[..., :n]), fused)
        dW_s, dC_in, dU = (in_transposed_layout(d, fused) for d in (dW_s, dC_in, dU))
        dh = torch.bmm(A.permute(1, 2, 0).to(cd), d_c.transpose(0, 1))  # c_i = Σ_j α_ij h_j
        return d_pre, ds, None, dh, d_sum * v_a, None, dW_s, dC_in, dU, dv.sum(0), None, None
