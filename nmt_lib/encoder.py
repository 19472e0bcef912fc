"""The encoder (§3.2, App. A.2.1): a bidirectional paper GRU over the embedded source.

::

    ē(x_j) = Ē x_j + b_Ē                       shared by both directions (GroundHog: learned bias)
    h→_j = GRU→(ē(x_j), h→_{j-1}),  h←_j = GRU←(ē(x_j), h←_{j+1}),  h→_0 = h←_{T_x+1} = 0
    h_j = [h→_j; h←_j]                          annotations, 2n, EOS included

Padding (GroundHog): the state is copied at masked positions. Sentences are right-padded, so the
backward direction, run from ``T_x`` down to 1, keeps its zero state over the padding and
effectively starts at each sentence's own last real token (its EOS).

RNNencdec uses only the forward direction: ``c = h→_{T_x}`` (§2.3, A.2.2).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import kernels
from .gru import GRU, embedding, fast_gru_scan


class Encoder(nn.Module):
    """Source embedding ``E_bar [K_x, m]`` (+ ``b_E [m]``) and one or two paper GRUs.

    Args:
        K_x: source vocabulary rows; m: embedding size; n: hidden units per direction.
        bidirectional: True (RNNsearch) or False (RNNencdec: forward direction only).
        embedding_bias: GroundHog's learned embedding bias; gate_bias: see :class:`GRU`.
    """

    def __init__(
        self,
        K_x: int,
        m: int,
        n: int,
        bidirectional: bool = True,
        embedding_bias: bool = True,
        gate_bias: bool = False,
    ):
        super().__init__()
        self.n = n
        self.E_bar = nn.Parameter(torch.empty(K_x, m))
        self.b_E = nn.Parameter(torch.zeros(m)) if embedding_bias else None
        self.forward_gru = GRU(m, n, gate_bias)
        self.backward_gru = GRU(m, n, gate_bias) if bidirectional else None

    def embed(self, x: Tensor) -> Tensor:
        """``ē(x_j)``: ``[B, Tx]`` long -> ``[B, Tx, m]``."""
        e = embedding(x, self.E_bar)
        return e if self.b_E is None else e + self.b_E

    def forward(self, x: Tensor, x_mask: Tensor) -> Tensor:
        """Annotations.

        Args:
            x: ``[B, Tx]`` long source ids (EOS included, right-padded); x_mask: ``[B, Tx]`` bool.
        Returns:
            ``[B, Tx, 2n]`` = ``[h→_j; h←_j]`` (bidirectional) or ``[B, Tx, n]`` = ``h→_j``.
        """
        grus = [self.forward_gru] + ([self.backward_gru] if self.backward_gru is not None else [])
        D, (B, T), n = len(grus), x.shape, self.n
        W = torch.cat([g.input_weight() for g in grus])  # [D*3n, m]
        b = torch.cat([g.input_bias() for g in grus])  # [D*3n]
        # time-major ([Tx, ·]): the recurrence reads each step's rows in one block
        a = nn.functional.linear(self.embed(x.t()), W, b)  # [Tx, B, D*3n]: one matmul, all of them
        a, mask = a.view(T, B, D, 3 * n).transpose(1, 2), x_mask.t()[:, None]  # [Tx, D, B, ·]
        if D == 2:  # the backward direction reads x_{Tx} .. x_1
            fwd, bwd = a.unbind(1)
            a = torch.stack([fwd, bwd.flip(0)], 1)
            mask = torch.cat([mask, mask.flip(0)], 1)
        U_rz, U = zip(*(g.recurrent_weights() for g in grus), strict=True)
        h0 = x_mask.new_zeros(D, B, n, dtype=self.E_bar.dtype)  # the parameters' dtype, not bf16
        h = fast_gru_scan(a.permute(1, 2, 0, 3), h0, torch.stack(U_rz), torch.stack(U),
                          mask.permute(1, 2, 0), kernels)  # fmt: skip  # [D, B, Tx, n]
        if D == 1:
            return h[0]
        return torch.cat([h[0], h[1].flip(1)], dim=-1)  # [B, Tx, 2n]

    @staticmethod
    def last_forward(h_fwd: Tensor) -> Tensor:
        """``h→_{T_x}``, the forward state after reading EOS: ``[B, Tx, n] -> [B, n]``.

        States are copied over the padding, so the last column holds each sentence's own last
        real state.
        """
        return h_fwd[:, -1]
