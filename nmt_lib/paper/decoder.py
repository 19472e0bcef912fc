"""The decoder (§3.1, App. A.2.2): a conditional paper GRU with a maxout deep output.

GroundHog's step order (PAPER.md §2.4, §7 A1), for ``i = 1..T_y``:

1. attention from the previous state: ``c_i, α_i = attend(s_{i-1}, h)`` (RNNencdec: ``c_i = c``);
2. deep output ``t̃_i = U_o s_{i-1} + b_o + V_o ē(y_{i-1}) + C_o c_i`` (previous-word term 0 at
   ``i = 1``: no BOS), ``t_i = maxout_2(t̃_i)`` over adjacent pairs, ``2l -> l``;
3. ``p(y_i | ·) = softmax(W_o t_i + b_y)``, ``W_o = W2 W1`` (GroundHog's rank factorisation) or the
   paper's full ``W_o`` when ``output_rank is None``;
4. state update with the word just emitted and the same context::

       r_i = σ(W_r ē(y_i) + U_r s_{i-1} + C_r c_i)
       z_i = σ(W_z ē(y_i) + U_z s_{i-1} + C_z c_i)
       s̃_i = tanh(W ē(y_i) + b + U (r_i ∘ s_{i-1}) + C c_i)
       s_i = (1 - z_i) ∘ s_{i-1} + z_i ∘ s̃_i          (copied past the sentence end)

``s_0 = tanh(W_s h←_1 + b_s)`` (RNNsearch) or ``tanh(W_s c + b_s)`` (RNNencdec).

Not the paper's (a deviation of the Multi30k testbed, ``model.dropout``, default 0 = none): while
training, dropout on the target embeddings ``ē(y)`` and on the deep output ``t_i`` before ``W_o``
(GroundHog's place for its ``dropout`` option); the recurrence itself is never dropped. The model drives
these steps over a reference in training (:func:`nmt_lib.paper.steps.teacher_forced`) and one word
at a time in a search (:mod:`nmt_lib.paper.steps`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .attention import Attention
from .gru import GRU, gru_step


class Decoder(nn.Module):
    """Target embedding, decoder GRU with context in every gate, ``s_0``, attention, deep output.

    Args:
        K_y: target vocabulary rows; m, n, l: as the paper; ctx_size: size of ``c_i`` (2n or n).
        n_align: ``n'`` of the alignment model, or None for no attention (RNNencdec).
        output_rank: rank of ``W_o = W2 W1`` (GroundHog 620), or None for the paper's full ``W_o``.
        init_size: size of the input of ``W_s`` (n: ``h←_1`` or ``c``).
        embedding_bias, gate_bias: see :class:`~nmt_lib.paper.encoder.Encoder` and :class:`GRU`.
        dropout: dropout on ``ē(y)`` and ``t_i`` while training (module docstring; 0: none).
        attention: the attention's function (:class:`~nmt_lib.paper.attention.Attention`).
    """

    def __init__(
        self,
        K_y: int,
        m: int,
        n: int,
        ctx_size: int,
        l: int,
        n_align: int | None,
        output_rank: int | None,
        init_size: int,
        embedding_bias: bool = True,
        gate_bias: bool = False,
        dropout: float = 0.0,
        attention="additive",
    ):
        super().__init__()
        self.p = dropout
        self.E = nn.Parameter(torch.empty(K_y, m))
        self.b_E = nn.Parameter(torch.zeros(m)) if embedding_bias else None
        self.gru = GRU(m, n, gate_bias)  # W, W_z, W_r, U, U_z, U_r, b (+ b_z, b_r)
        self.C = nn.Parameter(torch.empty(n, ctx_size))
        self.C_z = nn.Parameter(torch.empty(n, ctx_size))
        self.C_r = nn.Parameter(torch.empty(n, ctx_size))
        self.W_s = nn.Parameter(torch.empty(n, init_size))
        self.b_s = nn.Parameter(torch.zeros(n))
        self.attention = None if n_align is None else Attention(n, ctx_size, n_align, attention)
        self.U_o = nn.Parameter(torch.empty(2 * l, n))
        self.b_o = nn.Parameter(torch.zeros(2 * l))
        self.V_o = nn.Parameter(torch.empty(2 * l, m))
        self.C_o = nn.Parameter(torch.empty(2 * l, ctx_size))
        if output_rank is None:
            self.W_o = nn.Parameter(torch.empty(K_y, l))
        else:
            self.W1 = nn.Parameter(torch.empty(output_rank, l))
            self.W2 = nn.Parameter(torch.empty(K_y, output_rank))
        self.b_y = nn.Parameter(torch.zeros(K_y))
        self.output_rank = output_rank

    def embed(self, y: Tensor) -> Tensor:
        """``ē(y)``: ``[...]`` long -> ``[..., m]`` (dropped while training, ``dropout``)."""
        e = F.embedding(y, self.E)
        return self.drop(e if self.b_E is None else e + self.b_E)

    def drop(self, t: Tensor) -> Tensor:
        """Dropout of probability ``p`` while training; ``t`` itself with ``p = 0`` (the paper)."""
        return F.dropout(t, self.p, self.training) if self.p else t

    def init_state(self, h_init: Tensor) -> Tensor:
        """``s_0 = tanh(W_s h_init + b_s)``: ``[B, n] -> [B, n]`` (App. A.2.2).

        Kept in float32 at least under autocast, so that the recurrent state is never rounded to
        bf16/fp16 between steps (the matmuls still run in the autocast dtype)."""
        s0 = torch.tanh(F.linear(h_init, self.W_s, self.b_s))
        return s0.float() if s0.dtype in (torch.float16, torch.bfloat16) else s0

    def context_weight(self) -> Tensor:
        """``[3n, ctx]`` = ``[C; C_z; C_r]``, matching the GRU's ``[W; W_z; W_r]`` order."""
        return torch.cat([self.C, self.C_z, self.C_r])

    def attend(
        self, s_prev: Tensor, h: Tensor, Uh: Tensor, x_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """``c_i [G * B, 2n], α_i [G * B, Tx]`` from ``s_{i-1} [G * B, n]`` (App. A.1.2), ``G``
        consecutive states per sentence of ``h [B, Tx, 2n]``."""
        return self.attention(s_prev, h, Uh, x_mask)

    def deep_output(self, s_prev: Tensor, e_prev: Tensor | None, c: Tensor) -> Tensor:
        """``t_i = maxout_2(U_o s_{i-1} + b_o + V_o ē(y_{i-1}) + C_o c_i)`` (App. A.2.2, GroundHog).

        Args:
            s_prev: ``[..., n]``; e_prev: ``[..., m]`` ``ē(y_{i-1})`` or None (first step: term 0);
            c: ``[..., ctx]`` (broadcastable).
        Returns:
            ``[..., l]``: the max over adjacent pairs of the ``2l`` pre-activations.
        """
        t_tilde = F.linear(s_prev, self.U_o, self.b_o) + F.linear(c, self.C_o)  # [..., 2l]
        if e_prev is not None:
            t_tilde = t_tilde + F.linear(e_prev, self.V_o)
        return maxout(t_tilde)

    def logits(self, s_prev: Tensor, e_prev: Tensor | None, c: Tensor) -> Tensor:
        """Deep output with maxout (:meth:`deep_output`), before the softmax (App. A.2.2).

        Returns:
            ``[..., K_y]`` = ``W_o t_i + b_y``, ``W_o = W2 W1`` when ``output_rank`` is set
            (``t_i`` dropped while training, ``dropout``).
        """
        return self.output(self.drop(self.deep_output(s_prev, e_prev, c)))

    def output(self, t: Tensor) -> Tensor:
        """``W_o t_i + b_y``: ``[..., l] -> [..., K_y]`` (:meth:`logits` after the deep output)."""
        if self.output_rank is None:
            return F.linear(t, self.W_o, self.b_y)
        return F.linear(F.linear(t, self.W1), self.W2, self.b_y)

    def step_state(self, s_prev: Tensor, y: Tensor, c: Tensor) -> Tensor:
        """``s_i`` from ``s_{i-1} [B, n]``, the emitted word ``y_i [B]`` and ``c_i [B, ctx]``: the
        GRU step (:func:`~nmt_lib.paper.gru.gru_step`) with ``[C; C_z; C_r] c_i`` added to its input
        pre-activations ``[W; W_z; W_r] ē(y_i) + b``."""
        a = self.gru.project(self.embed(y)) + F.linear(c, self.context_weight())  # [B, 3n]
        return gru_step(a, s_prev, *self.gru.recurrent_weights())


def log_softmax(logits: Tensor) -> Tensor:
    """``log softmax`` over the last dim, computed in float32 at least (bf16/fp16 upcast): every
    model's next-word distribution."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(-1)


def maxout(t_tilde: Tensor) -> Tensor:
    """The max over adjacent pairs of the last dimension, ``[..., 2l] -> [..., l]``: the maximum of
    the even and the odd units (as ``t_tilde.unflatten(-1, (-1, 2)).amax(-1)``)."""
    return torch.maximum(t_tilde[..., 0::2], t_tilde[..., 1::2])
