"""The decoding step: how a search drives a model, one target word at a time.

GroundHog's decoder step (PAPER.md §2.4), split where a search chooses the words::

    steps = model.steps()
    state = steps.start(enc)                             # s_0, no previous word
    scores, alpha, carry = steps.readout(enc, state)     # p(y_i | y_<i, x) of every row, α_i
    logp, y = steps.best_words(scores, k, no_eos, ignore_unk)   # the k (<= K) best of every row
    state = steps.advance(carry, y)                      # s_i from s_{i-1}, y_i and c_i

``enc`` is the model's encoding of ``B`` sentences (``model.encode``; ``enc.select(idx)`` keeps
rows ``idx``); a state is a pair, the model's state (``G`` consecutive rows per sentence: ``G = 1``,
or the hypotheses of a beam) and the previous word. ``carry`` is a tuple of per-row tensors, which
a beam reorders (``tuple(t[rows] for t in carry)``) before it advances them. ``scores`` are
whatever the steps' own ``best_words`` reads. ``alpha`` is ``[G * B, Tx]``, or None for a model
without attention.

:class:`Steps` is the definition, on the model's paper functions ``init_state``,
``readout_step`` and ``next_state``: what ``model.steps()`` gives on the reference backend.
:class:`nmt_lib.fast.steps.DecodeSteps` computes the same faster.
:func:`teacher_forced` drives a model's steps over a reference translation: the paper models'
training forward on the reference backend (their definition), and that of a model whose recurrence
cannot run ahead of its outputs (Luong et al.'s input feeding).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..data.vocab import EOS, PAD, UNK


class Searchable:
    """What a search and an evaluation need of a model besides its step functions: its score, from
    ``forward`` (teacher forcing), and its step (:class:`Steps`, for a model with ``encode``,
    ``init_state``, ``readout_step`` and ``next_state``; the models before and after the paper
    give their own, :mod:`nmt_lib.models.steps`)."""

    def score(self, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor) -> Tensor:
        """``log p(y | x)`` per sentence, ``[B]``."""
        return self(x, x_mask, y, y_mask)[0].sum(1)

    def steps(self) -> Steps:
        """The step as a search drives it: :meth:`init_state`, :meth:`readout_step`,
        :meth:`next_state`."""
        return Steps(self)


class Steps:
    """The step of a model with ``init_state``, ``readout_step`` and ``next_state``
    (:class:`~nmt_lib.paper.model.EncoderDecoder`'s): a state is ``(s, y_prev)``, ``scores`` are the
    float32 log-probabilities ``[G * B, K]`` and ``carry`` is ``(s_{i-1}, c_i)``."""

    def __init__(self, model):
        self.model = model

    def start(self, enc) -> tuple:
        return self.model.init_state(enc), None

    def readout(self, enc, state: tuple) -> tuple:
        s, y_prev = state
        logp, c, alpha = self.model.readout_step(enc, s, y_prev)
        return logp, alpha, (s, c)

    def best_words(self, scores: Tensor, k: int, no_eos: Tensor, ignore_unk: bool):
        return best_words(scores, k, no_eos, ignore_unk)

    def advance(self, carry: tuple, y: Tensor) -> tuple:
        s, c = carry
        return self.model.next_state(s, y, c), y


def best_words(logp: Tensor, k: int, no_eos: Tensor, ignore_unk: bool) -> tuple[Tensor, Tensor]:
    """The ``k`` (at most ``K``) most probable words of each row of ``logp [R, K]`` (log-probabilities) and their
    float32 log-probabilities, best first, with ``<pad>``, ``<unk>`` (if ``ignore_unk``) and, on
    rows where ``no_eos [R]``, EOS excluded (GroundHog masks them after its log-softmax)."""
    logp = logp.float().clone()
    exclude(logp, no_eos, ignore_unk)
    return logp.topk(min(k, logp.shape[1]), dim=1)


def exclude(x: Tensor, no_eos: Tensor, ignore_unk: bool) -> None:
    """``<pad>``, ``<unk>`` (if ``ignore_unk``) and EOS on rows where ``no_eos`` to -inf, in place."""
    x[:, PAD] = -math.inf
    if ignore_unk:
        x[:, UNK] = -math.inf
    x[:, EOS].masked_fill_(no_eos, -math.inf)


def target_log_prob(logp: Tensor, y: Tensor, smoothing: float = 0.0) -> Tensor:
    """``log p(y)``: ``logp [..., K]`` (log-probabilities) at the words ``y [...]``, ``[...]``.

    With label smoothing ``ε = smoothing`` (``train.label_smoothing``; not the paper's, which has
    none): minus the cross-entropy of ``p`` against the smoothed target ``q = (1 - ε) [k = y] +
    ε / (K - 1) [k ≠ <pad>]``, whose loss is ``-(1 - ε) log p(y) - ε / (K - 1) Σ_{k ≠ <pad>}
    log p(k)``: what training minimises in place of ``-log p(y)``; ``ε = 0`` is ``log p(y)``."""
    gathered = logp.gather(-1, y[..., None]).squeeze(-1)
    if not smoothing:
        return gathered
    spread = (logp.sum(-1) - logp[..., PAD]) / (logp.shape[-1] - 1)
    return (1 - smoothing) * gathered + smoothing * spread


def teacher_forced(
    model, x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, smoothing: float = 0.0
):
    """``log p(y_i | y_<i, x)`` ``[B, Ty]`` (0 at padding) and the alignments ``[B, Ty, Tx]`` (0 at
    padding; None for a model without attention) of the reference ``y``, through the model's steps
    (``model.steps()``, whose scores are log-probabilities), one target position at a time: for
    the paper's models (:class:`Steps`) the order of the decoder's module docstring,
    (:mod:`nmt_lib.paper.decoder`): attention and readout from ``s_{i-1}`` and ``y_{i-1}``, then
    ``s_i`` from ``y_i`` and the same ``c_i``. The model's state is carried unchanged past each
    sentence's end (a state of fixed shape). ``smoothing``: label smoothing's ``log p(y_i)``
    (:func:`target_log_prob`), for training."""
    enc, steps = model.encode(x, x_mask), model.steps()
    state, logp, alpha = steps.start(enc), [], []
    for i in range(y.shape[1]):
        logp_next, alpha_i, carry = steps.readout(enc, state)
        logp.append(target_log_prob(logp_next, y[:, i], smoothing))
        alpha.append(alpha_i)
        s, y_i = steps.advance(carry, y[:, i])
        state = keep(y_mask[:, i], s, state[0]), y_i  # copied past the sentence end
    logp = torch.stack(logp, 1).masked_fill(~y_mask, 0.0)
    if alpha[0] is None:
        return logp, None
    return logp, torch.stack(alpha, 1).masked_fill(~y_mask[..., None], 0.0)


def keep(mask: Tensor, new, old):
    """``new`` where ``mask [R]``, else ``old``, for a state: a tensor ``[R, ...]`` or a tuple of
    them (the same type back)."""
    if isinstance(new, Tensor):
        return torch.where(mask.view(-1, *[1] * (new.dim() - 1)), new, old)
    return type(new)(*(keep(mask, a, b) for a, b in zip(new, old, strict=True)))
