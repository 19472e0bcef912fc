"""Unknown words replaced through the alignment: beyond the paper.

A model with a shortlist of K target words writes ``<unk>`` for every word outside it. Right after the
paper, its group (Jean et al., 2015) and Luong et al. (2015, "Addressing the Rare Word Problem") put
the alignment to work: each ``<unk>`` of a translation is replaced by the source word that the
attention weights point at when it was generated, ``x_{argmax_j alpha_ij}`` (names, numbers and
rare words are often written the same in both languages). A model without attention (RNNencdec) has
no such pointer, and keeps its ``<unk>``.

The weights are read by teacher forcing the translation through the model
(:func:`nmt_lib.likelihood.alignments`): the same ``alpha_ij`` as the search computed when it chose
each word, since a step's weights depend only on the source and the words before it. So an
evaluation that resumed its decoding from a journal (which keeps no weights) replaces the same words
as one that did not.

A copied word can then be looked up in a dictionary of word pairs counted on the training data
(:func:`dictionary`, :func:`through`; Luong et al.'s second step), so that ``Mubarak`` becomes
``Moubarak``; a word not in it stays as copied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Sequence

from .data.vocab import SPECIALS, UNK

UNK_WORD = SPECIALS[UNK]


def replace(words: Sequence[str], src: Sequence[str], align: Sequence[int]) -> list[str]:
    """``words`` (a translation, tokens) with each ``<unk>`` replaced by the source token
    ``src[align[i]]`` that it attends to most (``src``: the source tokens, without EOS); an
    ``<unk>`` that attends most to the source's end of sentence stays."""
    return [
        src[j] if w == UNK_WORD and j < len(src) else w for w, j in zip(words, align, strict=False)
    ]


# ------------------------------------------------------------- through a dictionary (Luong et al.)
def dictionary(
    pairs: Iterable[tuple[Sequence[str], Sequence[str]]],
    words: Iterable[str],
    shortlist: Container[str],
    min_pairs: int = 2,
    min_dice: float = 0.3,
) -> dict[str, str]:
    """A dictionary of aligned word pairs counted on the training ``pairs`` (source words, target
    words), for the source ``words`` that the alignment copied in place of an ``<unk>``: each maps
    to the target word that shares the most pairs with it by Dice's coefficient
    ``2 c(s, t) / (c(s) + c(t))`` (``c``: the pairs a word, or both, occur in), where they share at
    least ``min_pairs`` pairs and the coefficient is at least ``min_dice`` (ties: more pairs, then
    the first in code-point order). Only target words outside the target ``shortlist`` are
    candidates: an ``<unk>`` stands for such a word. Luong et al. (2015) count aligned pairs with
    an aligner; co-occurrence in a sentence pair stands in for it here."""
    wanted = set(words)
    c_s, c_t, c_st = Counter(), Counter(), Counter()
    for src, trg in pairs:
        rare = {w for w in trg if w not in shortlist}
        c_t.update(rare)
        for s in wanted.intersection(src):
            c_s[s] += 1
            c_st.update((s, t) for t in rare)
    best: dict[str, tuple] = {}
    for (s, t), n in c_st.items():
        dice = 2 * n / (c_s[s] + c_t[t])
        if n >= min_pairs and dice >= min_dice:
            key = (-dice, -n, t)
            if s not in best or key < best[s]:
                best[s] = key
    return {s: best[s][2] for s in sorted(best)}


def through(before: Sequence[str], after: Sequence[str], table: dict[str, str]) -> list[str]:
    """A translation whose ``<unk>`` (``before``) were replaced by source words (``after``:
    :func:`replace`), with each such word looked up in ``table`` (:func:`dictionary`; a word not
    in it stays as copied)."""
    return [table.get(a, a) if b == UNK_WORD else a for b, a in zip(before, after, strict=True)]
