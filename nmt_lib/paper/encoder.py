"""The encoder (§3.2, App. A.2.1): a bidirectional paper GRU over the embedded source.

::

    ē(x_j) = Ē x_j + b_Ē                       shared by both directions (GroundHog: learned bias)
    h→_j = GRU→(ē(x_j), h→_{j-1}),  h←_j = GRU←(ē(x_j), h←_{j+1}),  h→_0 = h←_{T_x+1} = 0
    h_j = [h→_j; h←_j]                          annotations, 2n, EOS included

Padding (GroundHog): the state is copied at masked positions. Sentences are right-padded, so the
backward direction, run from ``T_x`` down to 1, keeps its zero state over the padding and
effectively starts at each sentence's own last real token (its EOS).

RNNencdec uses only the forward direction: ``c = h→_{T_x}`` (§2.3, A.2.2). The same function,
faster: :func:`nmt_lib.fast.model.encode`.

Not the paper's (a deviation of the Multi30k testbed, ``model.dropout``, default 0 = none): while
training, dropout on ``ē(x_j)``, one mask for both directions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .gru import GRU


class Encoder(nn.Module):
    """Source embedding ``E_bar [K_x, m]`` (+ ``b_E [m]``) and one or two paper GRUs.

    Args:
        K_x: source vocabulary rows; m: embedding size; n: hidden units per direction.
        bidirectional: True (RNNsearch) or False (RNNencdec: forward direction only).
        embedding_bias: GroundHog's learned embedding bias; gate_bias: see :class:`GRU`.
        dropout: dropout on ``ē(x_j)`` while training (module docstring; 0: the paper's none).
    """

    def __init__(
        self,
        K_x: int,
        m: int,
        n: int,
        bidirectional: bool = True,
        embedding_bias: bool = True,
        gate_bias: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.n, self.p = n, dropout
        self.E_bar = nn.Parameter(torch.empty(K_x, m))
        self.b_E = nn.Parameter(torch.zeros(m)) if embedding_bias else None
        self.forward_gru = GRU(m, n, gate_bias)
        self.backward_gru = GRU(m, n, gate_bias) if bidirectional else None

    def embed(self, x: Tensor) -> Tensor:
        """``ē(x_j)``: ``[B, Tx]`` long -> ``[B, Tx, m]`` (dropped while training, ``dropout``)."""
        e = nn.functional.embedding(x, self.E_bar)
        return self.drop(e if self.b_E is None else e + self.b_E)

    def drop(self, e: Tensor) -> Tensor:
        """Dropout of probability ``p`` while training; ``e`` itself with ``p = 0`` (the paper)."""
        return nn.functional.dropout(e, self.p, self.training) if self.p else e

    def forward(self, x: Tensor, x_mask: Tensor) -> Tensor:
        """Annotations.

        Args:
            x: ``[B, Tx]`` long source ids (EOS included, right-padded); x_mask: ``[B, Tx]`` bool.
        Returns:
            ``[B, Tx, 2n]`` = ``[h→_j; h←_j]`` (bidirectional) or ``[B, Tx, n]`` = ``h→_j``.
        """
        e = self.embed(x)  # [B, Tx, m], shared by both directions
        h_fwd = self.forward_gru(e, x_mask)  # [B, Tx, n]: h→_1 .. h→_Tx
        if self.backward_gru is None:
            return h_fwd
        # the backward direction reads x_Tx .. x_1: over the (flipped) padding first, where its
        # state stays 0, then from each sentence's last real token
        h_bwd = self.backward_gru(e.flip(1), x_mask.flip(1)).flip(1)  # h←_1 .. h←_Tx
        return torch.cat([h_fwd, h_bwd], dim=-1)  # [B, Tx, 2n]

    @staticmethod
    def last_forward(h_fwd: Tensor) -> Tensor:
        """``h→_{T_x}``, the forward state after reading EOS: ``[B, Tx, n] -> [B, n]``.

        States are copied over the padding, so the last column holds each sentence's own last
        real state.
        """
        return h_fwd[:, -1]
