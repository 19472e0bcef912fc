"""Test sets held out of a training corpus: ``size`` sentence pairs drawn with a fixed ``seed``
from the lines of a training corpus at or after line ``start`` (counted from 0), where a profile's
training never reads (:func:`check_unread`: the prepared data's own count of the lines it read).

The draw is a reservoir sample (Vitter's algorithm R) over the pairs of that range with text on
both sides, kept in the corpus's order: one pass over the file, the same pairs on every machine
that has the same file. It is written once, as a plain-text test set (``<name>.<lang>``, one
sentence per line), into the data cache (:meth:`nmt_lib.config.DataConfig.resolved_cache_dir`),
beside a ``.json`` that records the draw and the line numbers it took; the data directory is only
read.
"""

from __future__ import annotations

import json
import random
from itertools import zip_longest
from pathlib import Path

from ..io import atomic_write
from . import corpus, readers, text
from .corpus import Draw


def draw(src: Path, trg: Path, d: Draw) -> list[tuple[int, str, str]]:
    """The drawn pairs ``(line, source, target)``, in the files' order (``line`` counted from
    0). Fewer than ``d.size`` pairs with text at or after ``d.start`` raise DataError."""
    rng = random.Random(d.seed)
    kept: list[tuple[int, str, str]] = []
    seen = 0
    for i, (a, b) in enumerate(zip_longest(readers.read_lines(src), readers.read_lines(trg))):
        if a is None or b is None:
            raise corpus.DataError(
                f"{src if a is None else trg} ends at line {i}, before {trg if a is None else src}: "
                "the two sides of a parallel corpus must be line-aligned"
            )
        if i < d.start or not a.strip() or not b.strip():
            continue
        if seen < d.size:
            kept.append((i, a, b))
        elif (j := rng.randrange(seen + 1)) < d.size:
            kept[j] = (i, a, b)
        seen += 1
    if seen < d.size:
        raise corpus.DataError(
            f"{src}: {seen} pairs with text from line {d.start} on; the held-out set needs {d.size}"
        )
    return sorted(kept)


def written(name: str, src: Path, trg: Path, d: Draw, langs: tuple[str, str], cache: Path):
    """The held-out set ``name`` as plain files in ``cache`` (drawn and written the first time):
    ``(source file, target file)``. The record beside them (``<name>.json``) names the draw, the
    training files' sha256 and the line numbers; files drawn from other training files are drawn
    again."""
    out = {lang: cache / f"{name}.{lang}" for lang in langs}
    record = cache / f"{name}.json"
    memo = cache.parent / "tok"  # the data cache's memo of file hashes (text.file_info)
    sources = {str(p.name): text.file_info(p, memo).sha256 for p in (src, trg)}
    if record.is_file() and all(p.is_file() for p in out.values()):
        if json.loads(record.read_text(encoding="utf-8")).get("from") == sources:
            return out[langs[0]], out[langs[1]]
    pairs = draw(src, trg, d)
    cache.mkdir(parents=True, exist_ok=True)
    for k, lang in enumerate(langs):
        with atomic_write(out[lang]) as f:
            f.writelines(p[1 + k].rstrip("\n") + "\n" for p in pairs)
    info = {"draw": vars(d), "from": sources, "lines": [p[0] for p in pairs]}
    with atomic_write(record) as f:
        json.dump(info, f)
    return out[langs[0]], out[langs[1]]


def check_unread(held: dict[str, Draw], read: dict[str, int]) -> None:
    """A DataError if the training data read a line that a held-out set may have drawn:
    ``held`` maps each held-out set to its draw, ``read`` each training corpus to the lines its
    preparation read (the prepared data's per-corpus ``read``)."""
    for name, d in held.items():
        if read.get(d.source, 0) > d.start:
            raise corpus.DataError(
                f"the training data reads {read[d.source]:,} lines of {d.source}, past line "
                f"{d.start:,}, where the held-out test set {name} is drawn from: lower "
                "data.max_train_pairs, or leave that corpus out of data.train"
            )
