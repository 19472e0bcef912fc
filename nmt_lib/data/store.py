"""The prepared store: what :func:`~nmt_lib.data.pipeline.prepare` writes under
``<cache_dir>/prep/<key>/`` and loads again, and the packs' reading side.

* :class:`TrainSet`: the training pairs as flat id arrays and offsets (``.npy``, memory-mapped);
* :class:`EvalSet`: dev or test in file order, read from their files (:func:`read_eval`);
* :class:`Prepared`: the vocabularies, the training set, dev, test and their statistics
  (:func:`load_prepared`), under a key that hashes every input and setting (:func:`prepared_key`);
* :func:`check_prepared`: the directory's files against the sizes and sha256 that its ``meta.json``
  records, so that a damaged or edited store is refused with the file's name, never used;
* :func:`read_pack`, :func:`prepare_packed`: a pack (:func:`nmt_lib.data.packs.pack`) loaded as
  prepared data.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..config import DataConfig
from ..io import sha256_file
from . import corpus, files, readers, text
from .vocab import UNK, Vocab

FORMAT = 1  # bump when the prepared layout or the pipeline's output changes


class TrainSet:
    """Numericalized training pairs in ``path``: ``{src,trg}.ids.npy`` (flat ids, no EOS) and
    ``{src,trg}.offsets.npy`` (int64, n+1), memory-mapped read-only."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.src_ids, self.trg_ids, self.src_offsets, self.trg_offsets = map(
            self._load, ("src.ids.npy", "trg.ids.npy", "src.offsets.npy", "trg.offsets.npy")
        )
        for side in ("src", "trg"):
            ids, offsets = getattr(self, f"{side}_ids"), getattr(self, f"{side}_offsets")
            if (
                offsets.ndim != 1
                or len(offsets) != len(self.src_offsets)
                or not len(offsets)
                or offsets[0] != 0
                or offsets[-1] != len(ids)
            ):
                raise self._damaged(f"{side}.ids.npy", "its offsets do not fit it")
        self.src_len = np.diff(self.src_offsets).astype(np.int32)  # [N] words, EOS not counted
        self.trg_len = np.diff(self.trg_offsets).astype(np.int32)

    def _load(self, name: str) -> np.ndarray:
        try:
            return np.load(self.path / name, mmap_mode="r")
        except (OSError, ValueError, EOFError) as e:
            raise self._damaged(name, f"unreadable: {e}") from None

    def _damaged(self, name: str, why: str) -> corpus.DataError:
        return corpus.DataError(
            f"{self.path / name}: damaged prepared data ({why}): delete "
            f"{self.path} to prepare the data again"
        )

    def __len__(self) -> int:
        return len(self.src_len)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Source and target ids of pair ``i`` (no EOS)."""
        so, to = self.src_offsets, self.trg_offsets
        return self.src_ids[so[i] : so[i + 1]], self.trg_ids[to[i] : to[i + 1]]


@dataclass
class EvalSet:
    """A dev or test set in file order. ``ids``: (set, docid, segid) per sentence; ``x``/``y`` end in
    EOS; ``no_unk``: source and reference entirely in the shortlists (App. Table 1 caption)."""

    name: str
    ids: list[tuple[str, str, str]]
    src_raw: list[str]
    ref_raw: list[str]
    src_tok: list[list[str]]
    ref_tok: list[list[str]]
    x: list[list[int]]
    y: list[list[int]]
    no_unk: list[bool]

    def __len__(self) -> int:
        return len(self.src_raw)


def read_eval(
    name: str, parts: Sequence[files.EvalFiles], cfg: DataConfig, tok_dir: Path, workers, progress
) -> dict:
    """Raw and tokenized text of one or more test sets (SGML or plain), concatenated in order."""
    out = {"ids": [], "src_raw": [], "ref_raw": [], "src_tok": [], "ref_tok": [], "keys": []}
    for f in parts:
        if f.plain:  # one sentence per line (Multi30k): ids (part, "", line number)
            pairs = readers.read_plain_pair(f.src, f.ref)
            src = [readers.Segment("", str(i), a) for i, (a, _) in enumerate(pairs, 1)]
            ref = [readers.Segment("", str(i), b) for i, (_, b) in enumerate(pairs, 1)]
        else:
            src, ref = list(readers.read_sgml(f.src)), list(readers.read_sgml(f.ref))
        if len(src) != len(ref) or any(a[:2] != b[:2] for a, b in zip(src, ref, strict=True)):
            raise corpus.DataError(
                f"{f.src} ({len(src)} segments) and {f.ref} ({len(ref)} segments) do not have the "
                "same documents and segments in the same order"
            )
        for side, path, lang in (("src", f.src, cfg.src_lang), ("ref", f.ref, cfg.trg_lang)):
            out[f"{side}_tok"] += list(text.tokenized(path, lang, tok_dir, workers, progress))
            out["keys"].append(text.cache_key(path, lang, tok_dir))
        out["ids"] += [(f.name, s.docid, s.segid) for s in src]
        out["src_raw"] += [s.text for s in src]
        out["ref_raw"] += [s.text for s in ref]
    out["name"] = name
    return out


def _eval_set(d: dict, src_vocab: Vocab, trg_vocab: Vocab) -> EvalSet:
    src_tok = [s.split() for s in d["src_tok"]]
    ref_tok = [s.split() for s in d["ref_tok"]]
    x = [src_vocab.encode(t, eos=True) for t in src_tok]
    y = [trg_vocab.encode(t, eos=True) for t in ref_tok]
    no_unk = [UNK not in a and UNK not in b for a, b in zip(x, y, strict=True)]
    return EvalSet(d["name"], d["ids"], d["src_raw"], d["ref_raw"], src_tok, ref_tok, x, y, no_unk)


def _eval_stats(ev: EvalSet) -> dict:
    def side(ids: list[list[int]]) -> dict:
        lens = [len(s) - 1 for s in ids]
        unk = [s.count(UNK) for s in ids]
        n_tok = max(sum(lens), 1)
        return {
            "words": sum(lens),
            "oov_token_rate": sum(unk) / n_tok,
            "oov_sentence_rate": sum(u > 0 for u in unk) / max(len(ids), 1),
            "length_hist": np.bincount(lens).tolist() if lens else [],
        }

    parts: dict[str, int] = {}
    for s, _, _ in ev.ids:
        parts[s] = parts.get(s, 0) + 1
    return {
        "pairs": len(ev),
        "parts": parts,
        "no_unk": int(sum(ev.no_unk)),
        "src": side(ev.x),
        "trg": side(ev.y),
    }


@dataclass
class Prepared:
    """The result of :func:`prepare`: vocabularies, the training set on disk, dev/test, stats."""

    src_vocab: Vocab
    trg_vocab: Vocab
    train: TrainSet
    dev: EvalSet
    test: EvalSet
    stats: dict
    path: Path  # the prepared cache directory
    key: str  # its full key (a hash of every input file and setting)
    views: dict[str, EvalSet] = field(default_factory=dict)  # data.views, by name


def prepared_key(train_keys: list, dev: dict, test: dict, settings: dict, views=()) -> str:
    """The prepared data's key: its training files' keys, dev and test's (and the views', where
    there are: their pairs are dropped from training too), and the settings."""
    obj = {"format": FORMAT, "train": train_keys, "eval": dev["keys"] + test["keys"], **settings}
    if views:
        obj["views"] = [v["keys"] for v in views]
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def prepared_settings(cfg: DataConfig) -> dict:
    names = ("src_lang", "trg_lang", "src_words", "trg_words", "max_len", "max_train_pairs")
    return {k: getattr(cfg, k) for k in names}


#: The files of a prepared-data directory besides ``meta.json``, which records their size and sha256.
PREPARED_FILES = (
    "src.vocab.txt",
    "trg.vocab.txt",
    "src.ids.npy",
    "trg.ids.npy",
    "src.offsets.npy",
    "trg.offsets.npy",
)


def check_prepared(out: str | os.PathLike, full: bool = False) -> dict:
    """``meta.json`` of the prepared-data directory ``out``, once its files are checked against it:
    their sizes, the vocabularies' sha256 and, with ``full``, every file's sha256 (the id arrays of
    a large corpus take seconds). A missing, damaged or edited file raises
    :class:`~nmt_lib.data.corpus.DataError` naming it. Directories prepared before the sizes and sums
    were recorded are checked as far as :class:`TrainSet` can."""
    out = Path(out)
    redo = f"delete {out} to prepare the data again"
    try:
        meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise corpus.DataError(f"{out / 'meta.json'}: unreadable ({e}): {redo}") from None
    for name, rec in meta.get("files", {}).items():
        f = out / name
        try:
            size = f.stat().st_size
        except OSError as e:
            raise corpus.DataError(f"{f}: missing from the prepared data ({e}): {redo}") from None
        if size != rec["bytes"]:
            raise corpus.DataError(
                f"{f}: {size} bytes where the prepared data recorded "
                f"{rec['bytes']} (truncated or changed): {redo}"
            )
        if (full or name.endswith(".txt")) and sha256_file(f) != rec["sha256"]:
            raise corpus.DataError(
                f"{f}: its contents differ from those recorded when the data "
                f"were prepared (sha256): changed or damaged; {redo}"
            )
    return meta


def load_prepared(
    out: Path,
    cfg: DataConfig,
    data_dir: Path,
    settings: dict,
    dev,
    test,
    verify: bool = False,
    views: dict | None = None,
) -> Prepared:
    meta = check_prepared(out, full=verify)
    src_vocab, trg_vocab = Vocab.load(out / "src.vocab.txt"), Vocab.load(out / "trg.vocab.txt")
    dev_set, test_set = _eval_set(dev, src_vocab, trg_vocab), _eval_set(test, src_vocab, trg_vocab)
    view_sets = {n: _eval_set(v, src_vocab, trg_vocab) for n, v in (views or {}).items()}
    stats = {
        "data_dir": str(data_dir),
        "prepared": str(out),
        "settings": settings,
        "tokenizer": dict(text.SETTINGS),
        "train_corpora": list(cfg.train),
        "vocab": {"src_rows": len(src_vocab), "trg_rows": len(trg_vocab)},
        "train": meta["train"],
        "dev": _eval_stats(dev_set),
        "test": _eval_stats(test_set),
        **({"views": {n: _eval_stats(v) for n, v in view_sets.items()}} if view_sets else {}),
    }
    return Prepared(
        src_vocab, trg_vocab, TrainSet(out), dev_set, test_set, stats, out, meta["key"], view_sets
    )


def fingerprint(prep: Prepared) -> dict:
    """What a checkpoint records of the data it was trained on: the prepared data's key (a hash of
    every input file and setting) and the sha256 of each vocabulary, words in row order."""

    return {
        "prepared": prep.key,
        "src_vocab": prep.src_vocab.digest(),
        "trg_vocab": prep.trg_vocab.digest(),
    }


def data_summary(prep: Prepared) -> dict:
    """Pairs, words, kept/dropped counts per reason, OOV rates (token and sentence level), No-UNK
    subset sizes and sentence-length histograms (index = words) for train, dev and test: a plain,
    JSON-serialisable dict for the book's data page."""
    return json.loads(json.dumps(prep.stats))


PACK = "pack.json"


def read_pack(path: str | os.PathLike) -> dict:
    """``pack.json`` of a pack directory; a missing or unreadable one names the file."""
    f = Path(path) / PACK
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise corpus.DataError(f"{f}: not a pack written by `python -m nmt_lib pack` ({e})") from e


def prepare_packed(cfg: DataConfig, tok_dir: Path, workers, progress, verify=False) -> Prepared:
    """:func:`prepare` from a pack: its prepared training data, its dev and test files."""
    root = Path(cfg.packed)
    pk = read_pack(root)
    settings = prepared_settings(cfg)
    want, got = {**settings, "train": list(cfg.train)}, {**pk["settings"], "train": pk["train"]}
    differ = [f"data.{k} = {got.get(k)!r}, not {v!r}" for k, v in want.items() if got.get(k) != v]
    if differ:
        raise corpus.DataError(f"{root / PACK}: packed with {'; '.join(differ)}")
    data_dir = root / "data"
    found = files.locate(replace(cfg, train=()), data_dir)
    dev = read_eval("dev", found.dev, cfg, tok_dir, workers, progress)
    test = read_eval("test", found.test, cfg, tok_dir, workers, progress)
    key = prepared_key(pk["train_keys"], dev, test, settings)
    prep = load_prepared(root / "prepared", cfg, data_dir, settings, dev, test, verify)
    if not key == prep.key == pk["key"]:
        raise corpus.DataError(
            f"{root}: its prepared data, its dev/test files and {PACK} do not belong together"
        )
    return prep
