"""The gated recurrent unit of the paper (App. A.1.1), and PyTorch's variant for comparison.

The paper's GRU (Cho et al. 2014a v3, GroundHog ``RecurrentLayer``) is **reset-before**: the reset
gate multiplies the previous state *before* the recurrent matrix, and the update gate weights the
*new* candidate::

    r_t = σ(W_r x_t + U_r h_{t-1})
    z_t = σ(W_z x_t + U_z h_{t-1})
    h̃_t = tanh(W x_t + b + U (r_t ∘ h_{t-1}))
    h_t = (1 - z_t) ∘ h_{t-1} + z_t ∘ h̃_t

``torch.nn.GRU`` (cuDNN) is **reset-after**, ``r ∘ (W_hn h + b_hn)``, a different function unless
``U`` is diagonal (PAPER.md §8). :func:`reset_after_gru` reproduces it for the tests; it is NOT the
paper's GRU and no model uses it.

Pre-activations are packed in the order ``[candidate; z; r]`` (``[W; W_z; W_r] x``), and the fused
recurrent matrix is ``[U_r; U_z]``. Extra inputs (the decoder's context ``[C; C_z; C_r] c_i``) are
added to the packed pre-activations by the caller. :func:`gru_step` and :func:`gru_scan` are the
definitions, and what the reference backend runs; :func:`nmt_lib.fast.scan.fast_gru_scan` computes
the same function faster. Imports only torch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def gru_step(a: Tensor, h_prev: Tensor, U_rz: Tensor, U: Tensor) -> Tensor:
    """One reset-before GRU step (App. A.1.1), state not masked.

    Args:
        a: ``[..., B, 3n]`` input pre-activations ``[W x + b; W_z x; W_r x]`` plus any extra terms.
        h_prev: ``[..., B, n]`` previous state.
        U_rz: ``[..., n, 2n]`` = ``[U_r; U_z]ᵀ`` (transposed for ``h @ U_rz``).
        U: ``[..., n, n]`` = ``Uᵀ``.
    Returns:
        ``[..., B, n]`` the new state.
    """
    n = h_prev.shape[-1]
    a_h, a_z, a_r = a.split(n, dim=-1)  # [..., B, n] each
    g = torch.matmul(h_prev, U_rz)  # [..., B, 2n]: U_r h, U_z h in one matmul
    r = torch.sigmoid(a_r + g[..., :n])
    z = torch.sigmoid(a_z + g[..., n:])
    h_tilde = torch.tanh(a_h + torch.matmul(r * h_prev, U))  # reset BEFORE U
    return (1 - z) * h_prev + z * h_tilde


def gru_scan(a: Tensor, h0: Tensor, U_rz: Tensor, U: Tensor, mask: Tensor | None = None) -> Tensor:
    """Run :func:`gru_step` over time, copying the state where ``mask`` is False (GroundHog).

    Args:
        a: ``[..., B, T, 3n]`` input pre-activations of every step (computed in one matmul).
        h0: ``[..., B, n]`` initial state.
        U_rz, U: as in :func:`gru_step`.
        mask: ``[..., B, T]`` bool, True on real tokens; None = no padding.
    Returns:
        ``[..., B, T, n]`` the states ``h_1..h_T``.
    """
    h, out = h0, []
    for t in range(a.shape[-2]):
        h_new = gru_step(a[..., t, :], h, U_rz, U)  # [..., B, n]
        h = h_new if mask is None else torch.where(mask[..., t, None], h_new, h)
        out.append(h)
    return torch.stack(out, dim=-2)


class GRU(nn.Module):
    """Parameters of one paper GRU (App. A.1.1, A.2.1), named as the paper.

    ``W, W_z, W_r``: ``[n, input_size]``; ``U, U_z, U_r``: ``[n, n]``; ``b``: ``[n]`` the candidate
    bias (GroundHog). ``gate_bias=True`` adds ``b_z, b_r`` (not in GroundHog).
    """

    def __init__(self, input_size: int, n: int, gate_bias: bool = False):
        super().__init__()
        self.n = n
        for name in ("W", "W_z", "W_r"):
            setattr(self, name, nn.Parameter(torch.empty(n, input_size)))
        for name in ("U", "U_z", "U_r"):
            setattr(self, name, nn.Parameter(torch.empty(n, n)))
        self.b = nn.Parameter(torch.zeros(n))
        self.b_z = nn.Parameter(torch.zeros(n)) if gate_bias else None
        self.b_r = nn.Parameter(torch.zeros(n)) if gate_bias else None

    def input_weight(self) -> Tensor:
        """``[3n, input_size]`` = ``[W; W_z; W_r]``."""
        return torch.cat([self.W, self.W_z, self.W_r])

    def input_bias(self) -> Tensor:
        """``[3n]`` = ``[b; b_z; b_r]`` (zeros for the gates without a bias)."""
        if self.b_z is None:
            return torch.cat([self.b, self.b.new_zeros(2 * self.n)])
        return torch.cat([self.b, self.b_z, self.b_r])

    def recurrent_weights(self) -> tuple[Tensor, Tensor]:
        """``(U_rz [n, 2n], U [n, n])``, transposed for :func:`gru_step`."""
        return torch.cat([self.U_r, self.U_z]).t(), self.U.t()

    def project(self, x: Tensor) -> Tensor:
        """Input pre-activations of every step: ``[..., input_size] -> [..., 3n]``, one matmul."""
        return nn.functional.linear(x, self.input_weight(), self.input_bias())

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        h0: Tensor | None = None,
        extra: Tensor | None = None,
    ) -> Tensor:
        """Run over a sequence.

        Args:
            x: ``[B, T, input_size]``.
            mask: ``[B, T]`` bool or None; the state is copied where False.
            h0: ``[B, n]`` or None (zeros).
            extra: ``[B, 3n]`` or ``[B, T, 3n]`` added to all pre-activations (e.g. ``C c``).
        Returns:
            ``[B, T, n]``.
        """
        a = self.project(x)  # [B, T, 3n]
        if extra is not None:
            a = a + (extra.unsqueeze(1) if extra.dim() == 2 else extra)
        if h0 is None:
            h0 = self.U.new_zeros(x.shape[0], self.n)  # the parameters' dtype (not autocast's)
        return gru_scan(a, h0, *self.recurrent_weights(), mask)


def reset_after_gru(
    x: Tensor, h0: Tensor, W_ih: Tensor, W_hh: Tensor, b_ih: Tensor, b_hh: Tensor
) -> Tensor:
    """PyTorch's reset-after GRU (``torch.nn.GRU``), NOT the paper's: for the §8 comparison only.

    ``r = σ(W_ir x + b_ir + W_hr h + b_hr)``, ``z`` likewise,
    ``ñ = tanh(W_in x + b_in + r ∘ (W_hn h + b_hn))``, ``h' = (1 - z) ∘ ñ + z ∘ h``.

    Args:
        x: ``[B, T, input_size]``; h0: ``[B, n]``.
        W_ih: ``[3n, input_size]``, W_hh: ``[3n, n]``, b_ih, b_hh: ``[3n]``, torch's (r, z, n) order.
    Returns:
        ``[B, T, n]``.
    """
    gi = nn.functional.linear(x, W_ih, b_ih)  # [B, T, 3n]
    h, out = h0, []
    for t in range(x.shape[1]):
        i_r, i_z, i_n = gi[:, t].chunk(3, dim=-1)
        h_r, h_z, h_n = nn.functional.linear(h, W_hh, b_hh).chunk(3, dim=-1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n_t = torch.tanh(i_n + r * h_n)  # reset AFTER the recurrent matrix
        h = (1 - z) * n_t + z * h
        out.append(h)
    return torch.stack(out, dim=1)
