"""The alignment model of RNNsearch (§3.1, App. A.1.2, A.2.2): additive attention.

::

    e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)
    α_ij = exp(e_ij) / Σ_k exp(e_ik)        (over real source positions only)
    c_i  = Σ_j α_ij h_j

No biases (GroundHog). ``U_a h_j`` does not depend on ``i``: it is computed once per sentence
(:meth:`Attention.precompute`) and passed in. Every function also takes ``G`` consecutive decoder
states per sentence (``s_prev [G * B, n]``, the hypotheses of a beam) against ``B`` encoded
sentences, so that the annotations need not be copied for each hypothesis. Pure functions of their
arguments; nothing is cached on the module. Imports only torch (the same, faster:
:mod:`nmt_lib.fast.attention`).

The seam: :class:`Attention` computes its context and weights with a function chosen at
construction, by name (:data:`FUNCTIONS`) or as a callable with :func:`additive`'s signature
(a lab's function, ``Attention(n, 2n, n', function=mine)``); the default is the paper's,
:func:`additive`. The fast backend computes the paper's function only (``accelerate`` refuses
another).
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


def additive(
    s_prev: Tensor, h: Tensor, Uh: Tensor, mask: Tensor, W_a: Tensor, v_a: Tensor
) -> tuple[Tensor, Tensor]:
    """The paper's alignment model and context in one function (App. A.1.2, Eq. 5-6): the
    energies :func:`alignment_scores`, the weights :func:`masked_softmax`, the context
    :func:`context`.

    Args:
        s_prev: ``[G * B, n]``; h: ``[B, Tx, 2n]``; Uh: ``[B, Tx, n']`` ``U_a h_j``; mask:
        ``[B, Tx]`` bool; W_a: ``[n', n]``; v_a: ``[n']``.
    Returns:
        ``c [G * B, 2n]``, ``alpha [G * B, Tx]``.
    """
    alpha = masked_softmax(alignment_scores(s_prev, Uh, W_a, v_a), mask)
    return context(alpha, h), alpha


#: The attention functions :class:`Attention` knows by name.
FUNCTIONS = {"additive": additive}


class Attention(nn.Module):
    """Parameters ``W_a [n', n]``, ``U_a [n', 2n]``, ``v_a [n']`` of the alignment model, and the
    function that computes ``c_i`` and ``α_i`` from them: a name of :data:`FUNCTIONS` or a callable
    with :func:`additive`'s signature (the seam, chosen at construction; default the paper's)."""

    def __init__(self, n: int, annotation_size: int, n_align: int, function="additive"):
        super().__init__()
        if not callable(function) and function not in FUNCTIONS:
            raise ValueError(f"no attention function {function!r}; known: {sorted(FUNCTIONS)}")
        self.function = function if callable(function) else FUNCTIONS[function]
        self.W_a = nn.Parameter(torch.empty(n_align, n))
        self.U_a = nn.Parameter(torch.empty(n_align, annotation_size))
        self.v_a = nn.Parameter(torch.zeros(n_align))

    def precompute(self, h: Tensor) -> Tensor:
        """``U_a h_j`` for every position, once per sentence: ``[B, Tx, 2n] -> [B, Tx, n']``, in
        ``h``'s dtype (float32 under autocast: the tanh over it is fastest in float32)."""
        return nn.functional.linear(h, self.U_a).to(h.dtype)

    def forward(self, s_prev: Tensor, h: Tensor, Uh: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Context and weights for one decoder step.

        Args:
            s_prev: ``[G * B, n]`` (``G`` consecutive states per sentence, e.g. a beam); h:
            ``[B, Tx, 2n]``; Uh: ``[B, Tx, n']``; mask: ``[B, Tx]`` bool.
        Returns:
            ``c [G * B, 2n]``, ``alpha [G * B, Tx]``.
        """
        return self.function(s_prev, h, Uh, mask, self.W_a, self.v_a)
