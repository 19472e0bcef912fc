"""The decoding step of the models before and after the paper, whose decoder reads the previous word
before it predicts the next (the LSTMs, the Transformer), unlike the paper's, which reads it after
(:mod:`nmt_lib.paper.steps`).

Such a model has one step function, ``model.step(enc, state, y_prev) -> (logp, state, alpha)``: it
reads ``y_{i-1}`` (None at the first step: a zero embedding, as the paper's models have no previous
word there), computes its new state and from it ``log p(y_i | y_<i, x)`` ``[R, K]`` (float32), and
the alignment ``[R, Tx]`` (None without attention). Its state is a tuple of per-row tensors of its
own type (an LSTM's ``h`` and ``c``, Luong et al.'s ``h̃`` too, the Transformer's key/value cache).
:class:`ReadFirstSteps` drives it with the step protocol of :mod:`nmt_lib.paper.steps`: the state
of the protocol is ``(the model's state, y_prev)``, and ``carry`` is the new state, which a beam
reorders and the next step continues from.
"""

from __future__ import annotations

from torch import Tensor

from ..paper.steps import Steps


class ReadFirstSteps(Steps):
    """The step protocol for a model with ``init_state`` and ``step``: ``scores`` are the float32
    log-probabilities ``[R, K]`` (:class:`~nmt_lib.paper.steps.Steps`'s ``start`` and
    ``best_words``); ``carry`` is the model's new state (its tensors)."""

    def readout(self, enc, state: tuple) -> tuple:
        s, y_prev = state
        logp, s_new, alpha = self.model.step(enc, s, y_prev)
        return logp, alpha, tuple(s_new)

    def advance(self, carry: tuple, y: Tensor) -> tuple:
        return self.model.State(*carry), y
