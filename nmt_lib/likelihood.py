"""The likelihoods of given translations: the model teacher-forced on (source, target) pairs.

Table 2's per-sentence NLL (:func:`sentence_nll`), the source word each word of a translation
attends to most (:func:`alignments`), and with it each ``<unk>`` of decoded translations replaced
(:func:`replace_corpus`, :mod:`nmt_lib.unk`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .data import pad
from .data.vocab import UNK
from .runtime import autocast
from .unk import replace


def sentence_nll(
    model,
    xs: Sequence[Sequence[int]],
    ys: Sequence[Sequence[int]],
    batch_size: int = 64,
    device=None,
    precision: str = "fp32",
) -> list[float]:
    """Per-sentence NLL in nats of reference ``ys`` given ``xs`` (id lists with EOS); their mean is
    Table 2's "average per-sentence conditional log-probability" (sign flipped)."""
    out = [0.0] * len(xs)
    for idx, logp, _ in teacher_forced(model, xs, ys, batch_size, device, precision):
        for i, v in zip(idx, (-logp.float().sum(1)).tolist(), strict=True):
            out[i] = v
    return out


@torch.no_grad()
def teacher_forced(model, xs, ys, batch_size: int = 64, device=None, precision: str = "fp32"):
    """The model teacher-forced on the pairs ``(xs[i], ys[i])`` (id lists) in batches of similar
    length, in eval mode: yields ``(indices, logp [B, Ty], alpha [B, Ty, Tx] or None)`` per batch."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    order = sorted(range(len(xs)), key=lambda i: len(xs[i]) + len(ys[i]))
    try:
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            x, x_mask, y, y_mask = (
                t.to(device) for t in (*pad([xs[i] for i in idx]), *pad([ys[i] for i in idx]))
            )
            with autocast(torch.device(device), precision):
                logp, alpha = model(x, x_mask, y, y_mask)
            yield idx, logp, alpha
    finally:
        model.train(was_training)


def alignments(
    model,
    xs: Sequence[Sequence[int]],
    ys: Sequence[Sequence[int]],
    batch_size: int = 64,
    device=None,
    precision: str = "fp32",
) -> list[list[int]] | None:
    """For each source ``x`` (ids, EOS included) and its translation ``y`` (ids, as decoded), the
    source position that each word of ``y`` attends to most; None for a model without attention."""
    out: list[list[int]] = [[] for _ in xs]
    todo = [i for i in range(len(xs)) if len(ys[i])]
    pairs = teacher_forced(
        model, [xs[i] for i in todo], [ys[i] for i in todo], batch_size, device, precision
    )
    for idx, _, alpha in pairs:
        if alpha is None:
            pairs.close()
            return None
        for k, row in zip(idx, alpha.float().argmax(-1).tolist(), strict=True):
            out[todo[k]] = row[: len(ys[todo[k]])]
    return out


def replace_corpus(
    model, xs, hyps, src_tokens, trg_vocab, batch_size=64, device=None, precision="fp32"
) -> list[list[str]] | None:
    """The decoded ``hyps`` (:class:`~nmt_lib.search.Hypothesis`, EOS dropped) as tokens with
    their ``<unk>`` replaced (:func:`nmt_lib.unk.replace`); None for a model without attention."""
    ys = [h.tokens for h in hyps]
    align = alignments(model, xs, ys, batch_size, device, precision)
    if align is None:
        return None
    out = []
    for h, src, a in zip(hyps, src_tokens, align, strict=True):
        words = trg_vocab.decode(h.tokens)  # EOS dropped
        out.append(replace(words, src, a) if UNK in h.tokens else words)
    return out
