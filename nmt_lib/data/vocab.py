"""Shortlist vocabularies (paper §4.1): the most frequent words of each language, the rest is <unk>.

Rows (CONTRIBUTING.md, PAPER.md A5): ``<pad>`` = 0 (GroundHog's unused row 0), ``<unk>`` = 1,
``</s>`` = 2 (EOS), then the shortlist words by descending count, ties broken by code-point order of
the word so that the same counts always give the same vocabulary. 30,001 rows = 29,998 words + 3, as
GroundHog's ``n_sym = 30001``.

Saved as UTF-8 text, one ``word<TAB>count`` per row in row order; the specials carry the number of
out-of-shortlist tokens (``<unk>``) and of sentences (``</s>``) counted.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..io import atomic_write

PAD, UNK, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<unk>", "</s>")


class Vocab:
    """A word <-> row mapping with the three specials first."""

    def __init__(self, words: Sequence[str], counts: Sequence[int] | None = None):
        """``words``: the shortlist in row order, without specials; ``counts``: one per row
        (specials included) or None."""
        self.itos: list[str] = [*SPECIALS, *words]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary words must be unique and must not be special symbols")
        self.counts: list[int] = list(counts) if counts is not None else [0] * len(self.itos)
        if len(self.counts) != len(self.itos):
            raise ValueError(f"{len(self.counts)} counts for {len(self.itos)} rows")

    @classmethod
    def build(cls, counts: Mapping[str, int], n_words: int, n_sentences: int = 0) -> Vocab:
        """The ``n_words`` most frequent words of ``counts`` (ties: code-point order)."""
        ranked = sorted(
            ((c, w) for w, c in counts.items() if w not in SPECIALS), key=lambda t: (-t[0], t[1])
        )
        top = ranked[:n_words]
        n_unk = sum(c for c, _ in ranked[n_words:])
        return cls([w for _, w in top], [0, n_unk, n_sentences, *(c for c, _ in top)])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def digest(self) -> str:
        """The sha256 of the words in row order (one per line, specials included): what a
        checkpoint records of the vocabularies it was trained with."""
        return hashlib.sha256("\n".join(self.itos).encode()).hexdigest()

    def encode(self, tokens: Iterable[str], eos: bool = False) -> list[int]:
        """Rows of ``tokens``; words outside the shortlist become ``<unk>``; EOS appended if asked."""
        get = self.stoi.get
        ids = [get(w, UNK) for w in tokens]
        if eos:
            ids.append(EOS)
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids`` up to the first EOS (excluded), skipping ``<pad>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i != PAD:
                out.append(self.itos[i])
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write ``word<TAB>count`` lines atomically."""
        with atomic_write(path) as f:
            for w, c in zip(self.itos, self.counts, strict=True):
                f.write(f"{w}\t{c}\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        """Read a file written by :meth:`save`; malformed lines raise ValueError(file:line)."""
        path = Path(path)
        words, counts = [], []
        with open(path, encoding="utf-8", newline="\n") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
                    raise ValueError(f"{path}:{lineno}: expected 'word<TAB>count', got {line!r}")
                words.append(parts[0])
                counts.append(int(parts[1]))
        if tuple(words[:3]) != SPECIALS:
            raise ValueError(f"{path}: the first rows must be {SPECIALS}, got {words[:3]}")
        return cls(words[3:], counts)
