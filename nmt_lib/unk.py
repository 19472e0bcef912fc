"""Unknown words replaced through the alignment: beyond the paper.

A model with a shortlist of K target words writes ``<unk>`` for every word outside it. Right after the
paper, its group (Jean et al., 2015) and Luong et al. (2015, "Addressing the Rare Word Problem") put
the alignment to work: each ``<unk>`` of a translation is replaced by the source word that the
attention weights point at when it was generated, ``x_{argmax_j alpha_ij}`` (names, numbers and
rare words are often written the same in both languages). A model without attention (RNNencdec) has
no such pointer, and keeps its ``<unk>``.

The weights are read by teacher forcing the translation through the model (:func:`alignments`): the
same ``alpha_ij`` as the search computed when it chose each word, since a step's weights depend only
on the source and the words before it. So an evaluation that resumed its decoding from a journal
(which keeps no weights) replaces the same words as one that did not.
"""

from __future__ import annotations

from collections.abc import Sequence

from .evaluate import teacher_forced
from .vocab import SPECIALS, UNK

UNK_WORD = SPECIALS[UNK]


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
    pairs = teacher_forced(model, [xs[i] for i in todo], [ys[i] for i in todo], batch_size,
                           device, precision)  # fmt: skip
    for idx, _, alpha in pairs:
        if alpha is None:
            pairs.close()
            return None
        for k, row in zip(idx, alpha.float().argmax(-1).tolist(), strict=True):
            out[todo[k]] = row[: len(ys[todo[k]])]
    return out


def replace(words: Sequence[str], src: Sequence[str], align: Sequence[int]) -> list[str]:
    """``words`` (a translation, tokens) with each ``<unk>`` replaced by the source token
    ``src[align[i]]`` that it attends to most (``src``: the source tokens, without EOS); an
    ``<unk>`` that attends most to the source's end of sentence stays."""
    return [
        src[j] if w == UNK_WORD and j < len(src) else w for w, j in zip(words, align, strict=False)
    ]


def replace_corpus(model, xs, hyps, src_tokens, trg_vocab, batch_size=64, device=None,
                   precision="fp32") -> list[list[str]] | None:  # fmt: skip
    """The decoded ``hyps`` (:class:`~nmt_lib.search.Hypothesis`, EOS dropped) as tokens with
    their ``<unk>`` replaced (:func:`replace`); None for a model without attention."""
    ys = [h.tokens for h in hyps]
    align = alignments(model, xs, ys, batch_size, device, precision)
    if align is None:
        return None
    out = []
    for h, src, a in zip(hyps, src_tokens, align, strict=True):
        words = trg_vocab.decode(h.tokens)  # EOS dropped
        out.append(replace(words, src, a) if UNK in h.tokens else words)
    return out
