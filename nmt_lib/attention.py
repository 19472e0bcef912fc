"""The alignment model of RNNsearch (§3.1, App. A.1.2, A.2.2): additive attention.

::

    e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)
    α_ij = exp(e_ij) / Σ_k exp(e_ik)        (over real source positions only)
    c_i  = Σ_j α_ij h_j

No biases (GroundHog). ``U_a h_j`` does not depend on ``i``: it is computed once per sentence
(:meth:`Attention.precompute`) and passed in. Every function also takes ``G`` consecutive decoder
states per sentence (``s_prev [G * B, n]``, the hypotheses of a beam) against ``B`` encoded
sentences, so that the annotations need not be copied for each hypothesis. Pure functions of their
arguments; nothing is cached on the module. :func:`alignment_scores` is the definition;
:func:`energies_in_pieces` and :func:`attend_in_pieces` compute the same without autograd, faster
(decoding, and the training recurrence of ``decoder.py``). Imports only torch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def alignment_scores(s_prev: Tensor, Uh: Tensor, W_a: Tensor, v_a: Tensor) -> Tensor:
    """``e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)`` (App. A.1.2).

    Args:
        s_prev: ``[G * B, n]`` decoder states ``s_{i-1}``, ``G`` consecutive ones per sentence.
        Uh: ``[B, Tx, n']`` precomputed ``U_a h_j``.
        W_a: ``[n', n]``; v_a: ``[n']``.
    Returns:
        ``[G * B, Tx]`` the energies ``e_i·``.
    """
    B, Tx, n_a = Uh.shape
    Ws = nn.functional.linear(s_prev, W_a).view(B, groups(s_prev, B), 1, n_a)  # [B, G, 1, n']
    return torch.matmul(torch.tanh(Uh.unsqueeze(1) + Ws), v_a).view(-1, Tx)  # [G * B, Tx]


def groups(rows: Tensor, B: int) -> int:
    """``G``: how many consecutive rows of ``rows`` belong to each of ``B`` sentences (1 for none)."""
    return rows.shape[0] // B if B else 1


def piece_rows(Uh: Tensor, G: int = 1) -> int:
    """Sentences per piece: on a CPU, a ``[rows, G, Tx, n']`` float32 temporary of ~1 MB stays in
    cache; on a GPU, all at once."""
    if Uh.device.type != "cpu":
        return Uh.shape[0]
    return max(1, (1 << 18) // (G * Uh.shape[1] * Uh.shape[2]))


@torch.no_grad()
def energies_in_pieces(Uh: Tensor, Ws: Tensor, v_a: Tensor) -> Tensor:
    """:func:`alignment_scores` given ``Ws = W_a s_{i-1}`` ``[G * B, n']``, without autograd, in
    ``Uh``'s dtype (autocast off), a few sentences at a time: the ``[rows, G, Tx, n']`` temporary
    ``tanh(W_a s_{i-1} + U_a h_j)`` stays in cache instead of making three trips through memory
    (about 4x faster on a CPU for a beam of 640 rows), and each sentence's ``U_a h_j`` is read once
    for its ``G`` states. ``Uh [B, Tx, n']`` -> ``[G * B, Tx]``."""
    (B, Tx, n_a), v_a = Uh.shape, v_a.to(Uh.dtype)
    Ws = Ws.to(Uh.dtype).reshape(B, groups(Ws, B), 1, n_a)  # [B, G, 1, n']
    rows = piece_rows(Uh, Ws.shape[1])
    e, buf = Uh.new_empty(Ws.shape[:2] + (Tx,)), Uh.new_empty(min(rows, B), Ws.shape[1], Tx, n_a)
    with torch.autocast(Uh.device.type, enabled=False):
        for i in range(0, B, rows):
            t = torch.add(Uh[i : i + rows, None], Ws[i : i + rows], out=buf[: min(rows, B - i)])
            torch.matmul(t.tanh_(), v_a, out=e[i : i + rows])
    return e.view(-1, Tx)


def masked_softmax(e: Tensor, mask: Tensor) -> Tensor:
    """Softmax over source positions with exactly zero weight on padding, in float32 or wider.

    Args:
        e: ``[G * B, Tx]``; mask: ``[B, Tx]`` bool, True on real tokens (at least one per row).
    Returns:
        ``[G * B, Tx]`` the weights ``α_i·`` (rows sum to 1).
    """
    e = e.float() if e.dtype in (torch.float16, torch.bfloat16) else e
    B, Tx = mask.shape
    e = torch.where(mask[:, None], e.view(B, groups(e, B), Tx), float("-inf"))
    return e.softmax(-1).view(-1, Tx)


def context(alpha: Tensor, h: Tensor) -> Tensor:
    """``c_i = Σ_j α_ij h_j`` (Eq. 5): ``alpha [G * B, Tx]``, ``h [B, Tx, 2n]`` -> ``[G * B, 2n]``
    (one ``[G, Tx] @ [Tx, 2n]`` product per sentence)."""
    B, Tx, d = h.shape
    return torch.bmm(alpha.view(B, groups(alpha, B), Tx).to(h.dtype), h).view(-1, d)


@torch.no_grad()
def attend_in_pieces(Uh: Tensor, Ws: Tensor, v_a: Tensor, h: Tensor, mask: Tensor):
    """``c_i [G * B, 2n], α_i [G * B, Tx]`` given ``Ws = W_a s_{i-1}`` ``[G * B, n']``, without
    autograd: :func:`energies_in_pieces`, :func:`masked_softmax`, :func:`context`."""
    alpha = masked_softmax(energies_in_pieces(Uh, Ws, v_a), mask)
    return context(alpha, h), alpha


class Attention(nn.Module):
    """Parameters ``W_a [n', n]``, ``U_a [n', 2n]``, ``v_a [n']`` of the alignment model."""

    def __init__(self, n: int, annotation_size: int, n_align: int):
        super().__init__()
        self.W_a = nn.Parameter(torch.empty(n_align, n))
        self.U_a = nn.Parameter(torch.empty(n_align, annotation_size))
        self.v_a = nn.Parameter(torch.zeros(n_align))

    def precompute(self, h: Tensor) -> Tensor:
        """``U_a h_j`` for every position, once per sentence: ``[B, Tx, 2n] -> [B, Tx, n']``, in
        ``h``'s dtype (float32 under autocast: the tanh over it is fastest in float32)."""
        return nn.functional.linear(h, self.U_a).to(h.dtype)

    def forward(
        self, s_prev: Tensor, h: Tensor, Uh: Tensor, mask: Tensor, attend=attend_in_pieces
    ) -> tuple[Tensor, Tensor]:
        """Context and weights for one decoder step.

        Args:
            s_prev: ``[G * B, n]`` (``G`` consecutive states per sentence, e.g. a beam); h:
            ``[B, Tx, 2n]``; Uh: ``[B, Tx, n']``; mask: ``[B, Tx]`` bool.
            attend: what computes :func:`attend_in_pieces` when decoding (the decoder passes one
            that uses the compiled kernel, ``nmt_lib.decoder.attend``).
        Returns:
            ``c [G * B, 2n]``, ``alpha [G * B, Tx]``.
        """
        if torch.is_grad_enabled():
            alpha = masked_softmax(alignment_scores(s_prev, Uh, self.W_a, self.v_a), mask)
            return context(alpha, h), alpha
        # decoding: the same, faster (h and U_a h_j stay in float32 under autocast)
        Ws = nn.functional.linear(s_prev, self.W_a)
        with torch.autocast(h.device.type, enabled=False):
            return attend(Uh, Ws, self.v_a, h, mask)
