"""RNNsearch's attention step (:mod:`nmt_lib.paper.attention`), computed faster, without autograd:
``c_i, α_i`` from ``W_a s_{i-1}`` a few sentences at a time in cache (:func:`attend_in_pieces`), or
in one pass by the compiled kernel (:func:`attend`), and the backward of that step for the
decoder's hand-written backward through time (:func:`attend_backward`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..paper.attention import context, groups, masked_softmax


def piece_rows(Uh: Tensor, G: int = 1) -> int:
    """Sentences per piece: on a CPU, a ``[rows, G, Tx, n']`` float32 temporary of ~1 MB stays in
    cache; on a GPU, all at once."""
    if Uh.device.type != "cpu":
        return Uh.shape[0]
    return max(1, (1 << 18) // (G * Uh.shape[1] * Uh.shape[2]))


@torch.no_grad()
def energies_in_pieces(Uh: Tensor, Ws: Tensor, v_a: Tensor) -> Tensor:
    """:func:`~nmt_lib.paper.attention.alignment_scores` given ``Ws = W_a s_{i-1}`` ``[G * B, n']``, without autograd, in
    ``Uh``'s dtype (autocast off), a few sentences at a time: the ``[rows, G, Tx, n']`` temporary
    ``tanh(W_a s_{i-1} + U_a h_j)`` stays in cache instead of making three trips through memory
    (bench/README.md, "Memory: allocator and oneDNN's kernel cache"), and each sentence's
    ``U_a h_j`` is read once for its ``G`` states. ``Uh [B, Tx, n']`` -> ``[G * B, Tx]``."""
    (B, Tx, n_a), v_a = Uh.shape, v_a.to(Uh.dtype)
    Ws = Ws.to(Uh.dtype).reshape(B, groups(Ws, B), 1, n_a)  # [B, G, 1, n']
    rows = piece_rows(Uh, Ws.shape[1])
    e, buf = Uh.new_empty(Ws.shape[:2] + (Tx,)), Uh.new_empty(min(rows, B), Ws.shape[1], Tx, n_a)
    with torch.autocast(Uh.device.type, enabled=False):
        for i in range(0, B, rows):
            t = torch.add(Uh[i : i + rows, None], Ws[i : i + rows], out=buf[: min(rows, B - i)])
            torch.matmul(t.tanh_(), v_a, out=e[i : i + rows])
    return e.view(-1, Tx)


@torch.no_grad()
def attend_in_pieces(Uh: Tensor, Ws: Tensor, v_a: Tensor, h: Tensor, mask: Tensor):
    """``c_i [G * B, 2n], α_i [G * B, Tx]`` given ``Ws = W_a s_{i-1}`` ``[G * B, n']``, without
    autograd: :func:`energies_in_pieces`, :func:`~nmt_lib.paper.attention.masked_softmax`, :func:`~nmt_lib.paper.attention.context`."""
    alpha = masked_softmax(energies_in_pieces(Uh, Ws, v_a), mask)
    return context(alpha, h), alpha


def attend(Uh: Tensor, Ws: Tensor, v_a: Tensor, h: Tensor, mask: Tensor, out=None, fused=None):
    """:func:`attend_in_pieces` (``c_i, α_i`` from ``Ws = W_a s_{i-1}``), in one
    pass where the compiled kernel applies (``fused``: :func:`nmt_lib.fast.kernels.attend`: float32 ``Uh`` on a
    CPU; it accumulates ``c_i`` from the float32 ``α_i``, where the PyTorch operations round
    ``α_i`` to ``h``'s dtype first); into ``out = (c, α)`` when given."""
    fast = (
        None if fused is None else fused.attend(Uh, Ws.to(Uh.dtype), v_a.to(Uh.dtype), h, mask, out)
    )
    if fast is not None:
        return fast
    c, alpha = attend_in_pieces(Uh, Ws, v_a, h, mask)
    if out is None:
        return c, alpha
    return out[0].copy_(c), out[1].copy_(alpha)


def attend_backward(Uh, q, v_a, h, d_c, alpha, d_alpha, d_sum, d_q, dv, fused=None) -> None:
    """The backward of :func:`attend` for one state per sentence: ``∂L/∂α = h ∂L/∂c + d_alpha``
    (None: 0), the softmax's backward ``∂L/∂e``, and that of ``e = v_aᵀ tanh(q + U_a h_j)`` a few
    sentences at a time, ``t`` recomputed: writes ``∂L/∂q`` into ``d_q [B, n']`` (``q = W_a s``)
    and adds ``∂L/∂e ∘ (1 - t²)`` to ``d_sum [B, Tx, n']`` and each sentence's part of ``∂L/∂v_a``
    to ``dv [B, n']``, in place. In one pass where the compiled kernel applies
    (``fused``: :func:`nmt_lib.fast.kernels.attend_backward`)."""
    if fused is not None and fused.attend_backward(
        Uh, q, v_a, h, d_c, alpha, d_alpha, d_sum, d_q, dv
    ):
        return
    d_a = torch.bmm(h, d_c.unsqueeze(-1)).squeeze(-1)
    d_a = d_a if d_alpha is None else d_a + d_alpha
    d_e = alpha * (d_a - (alpha * d_a).sum(-1, keepdim=True))  # softmax'
    B, rows = Uh.shape[0], piece_rows(Uh)
    buf = Uh.new_empty(2, min(rows, B), *Uh.shape[1:])
    one = torch.ones((), dtype=Uh.dtype, device=Uh.device)
    for i in range(0, B, rows):
        r, k = slice(i, i + rows), min(rows, B - i)
        t = torch.add(Uh[r], q[r, None], out=buf[0, :k]).tanh_()
        dv[r] += torch.bmm(d_e[r].unsqueeze(1), t).squeeze(1)
        sech2 = torch.addcmul(one, t, t, value=-1, out=buf[1, :k])  # tanh' = 1 - t²
        d_sum[r].addcmul_(d_e[r].unsqueeze(-1), sech2)
        d_q[r] = torch.bmm(d_e[r].unsqueeze(1), sech2).squeeze(1) * v_a
