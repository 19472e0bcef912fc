"""Translating raw text with a trained model (``python -m nmt_lib translate``, the book's examples):
Moses tokenization, the shortlist, EOS, beam search, detokenization; optionally a line of
alignments under each translation and each ``<unk>`` replaced by its source word."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from .config import SearchConfig
from .data.readers import normal
from .data.text import detokenize, tokenize
from .decoding import decode
from .likelihood import replace_corpus
from .loading import Loaded


@dataclass(frozen=True)
class Output:
    """What :func:`translate_lines` gives besides plain translations.

    ignore_unk: never emit ``<unk>`` (the search forbids it); alignment: under each translation, a
    line pairing every generated word with the source word it attends to most
    (:func:`alignment_line`); replace_unk: each ``<unk>`` replaced by the source word it attends to
    most (:mod:`nmt_lib.unk`; models with attention).
    """

    ignore_unk: bool = False
    alignment: bool = False
    replace_unk: bool = False


def translate_lines(
    loaded: Loaded,
    lines: Sequence[str],
    search: SearchConfig | None = None,
    output: Output = Output(),
    precision: str = "fp32",
) -> list[str]:
    """Raw source sentences -> detokenized translations by the model ``loaded`` (its languages,
    vocabularies; its model makes its own decoding steps), with ``search`` (default: its run's) and ``output``'s options, in
    ``precision``. Each line is read :func:`~nmt_lib.data.readers.normal` (NFC, no byte-order
    mark), as the training data were. Empty lines give empty translations. With ``output.alignment``, each translation
    is followed by its :func:`alignment_line` (``chat←cat 0.82``; ``</s>``: the end of the
    sentence)."""
    model, data = loaded.model, loaded.cfg.data
    device = next(model.parameters()).device
    lines = [normal(line) for line in lines]
    toks = [tokenize(line, data.src_lang) if line.strip() else [] for line in lines]
    xs = [loaded.src_vocab.encode(t, eos=True) for t in toks]
    search = loaded.cfg.search if search is None else search
    hyps = decode(
        model,
        xs,
        search,
        ignore_unk=output.ignore_unk,
        return_alpha=output.alignment,
        device=device,
        precision=precision,
    )
    replaced = None
    if output.replace_unk:
        replaced = replace_corpus(model, xs, hyps, toks, loaded.trg_vocab, 64, device, precision)
    out = []
    for k, (t, h) in enumerate(zip(toks, hyps, strict=True)):
        words = loaded.trg_vocab.decode(h.tokens) if replaced is None else replaced[k]
        out.append(detokenize(words, data.trg_lang) if t else "")
        if output.alignment:
            out.append(alignment_line(words, t, h.alpha) if t else "  ")
    return out


def alignment_line(words: Sequence[str], src: Sequence[str], alpha) -> str:
    """``translate_lines``'s line under a translation: each generated word (of ``words``) with
    the source word (of ``src``, tokenized; ``</s>`` after it) of largest weight in its row of
    ``alpha [len(words) or more, len(src) + 1]`` (None: no attention, an empty line), in words as
    written (``l'``, not Moses's escaped ``l&apos;``)."""
    src = [*src, "</s>"]
    if alpha is None:
        return "  "
    pairs = [
        f"{html.unescape(w)}←{html.unescape(src[int(row.argmax())])} {float(row.max()):.2f}"
        for w, row in zip(words, alpha.float(), strict=False)
    ]
    return "  " + " | ".join(pairs)
