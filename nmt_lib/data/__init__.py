"""From WMT'14 files to minibatches, as the paper prepared its data (§4.1, §4.2, App. B.2; GroundHog).

:func:`prepare` runs the whole pipeline once and caches the result under ``<cache_dir>/prep/<key>/``:

1. locate the files (:mod:`nmt_lib.data.corpus`); dev = newstest2012 + newstest2013 (6003 sentences),
   test = newstest2014 full (3003); on Multi30k (the second testbed, plain text), dev = val (1,014),
   test = test_2016_flickr + test_2017_flickr (2,000, each sentence naming its part);
2. Moses-tokenize every file (:mod:`nmt_lib.data.text`, cached per file in shards; a training file is
   tokenized only as far as step 3 reads it);
3. stream the training pairs, corpus after corpus in the configured order, and drop (never truncate)
   a pair when a side is empty, when its source or its target also occurs in dev or test, or when a
   side has more than ``max_len`` words (EOS not counted; PAPER.md A8). ``max_train_pairs`` keeps the
   first N pairs that survive these filters;
4. count words and keep the ``src_words``/``trg_words`` most frequent per language (§4.1; ties by
   code point). The counts are taken over the first ``max_train_pairs`` non-empty pairs not in
   dev/test *before* the length filter (all of them when there is no cap), so the -30 and -50 models
   of a profile share one vocabulary and one No-UNK test subset, as GroundHog's models share one;
5. store the kept pairs as flat id arrays + offsets (``.npy``, uint16 when the rows fit, memory-mapped
   by :class:`TrainSet`). The text is streamed and the ids go through temporary files in chunks:
   memory holds the word-count tables and a few bytes per pair, never the sentences.

Pretokenized corpora (the LIUM selection, "already tokenized" upstream) are split on whitespace only.

The key of the cache directory is a hash of the inputs' sha256 (via the tokenized files' keys), the
tokenizer settings and every setting above, so nothing stale is ever reused. The directory is built
under a temporary name and renamed when complete; its ``meta.json`` records the size and sha256 of
every file in it. Loading checks the sizes and the vocabularies' sha256 (and with ``verify`` the
id arrays' sha256 too), so a damaged or edited cache is refused with the file's name, never used.
An input's sha256 is remembered per (path, size, mtime) (:func:`nmt_lib.data.text.file_info`);
:func:`verify_inputs` hashes the inputs again, for a file edited behind an unchanged size and time
(training does whenever it prepares the data itself or resumes: 0.7 s for the lite profile's
137 MiB of inputs).

:class:`TrainIterator` batches as GroundHog's ``get_homogenous_batch_iter`` (PAPER.md §3, A7): read
``sort_k_batches * batch_size`` pairs, sort them by max(len_x, len_y), cut into minibatches, emit them
in ascending length. Deviation: GroundHog shuffles the corpus once offline and loops over it; we draw a
seeded permutation per epoch (``seed + epoch``), or the epoch-0 permutation every epoch with
``reshuffle=False`` (GroundHog's behaviour). The sort is stable (GroundHog's ``argsort`` is not).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path

import numpy as np
import torch

from . import corpus, text
from ..config import DataConfig
from ..io import NO_SPACE, naming, sha256_file, write_json
from .vocab import EOS, PAD, UNK, Vocab

FORMAT = 1  # bump when the prepared layout or the pipeline's output changes
REASONS = ("empty", "in_dev_test", "too_long")


# --------------------------------------------------------------------------------------- batches
@dataclass
class Batch:
    """A padded minibatch, batch-first. ``x``/``y`` [B,Tx]/[B,Ty] long with EOS and ``<pad>`` = 0;
    masks bool, True on real tokens (EOS included). ``y``/``y_mask`` are None for source-only batches.
    """

    x: torch.Tensor
    x_mask: torch.Tensor
    y: torch.Tensor | None = None
    y_mask: torch.Tensor | None = None

    def to(self, device, non_blocking: bool = False) -> Batch:
        """The same batch on ``device``."""

        def mv(t):
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return Batch(mv(self.x), mv(self.x_mask), mv(self.y), mv(self.y_mask))

    @property
    def n_trg_tokens(self) -> int:
        """Target tokens in the batch, EOS included (the loss is summed over these; PAPER.md §3)."""
        return 0 if self.y_mask is None else int(self.y_mask.sum())


def pad(seqs: Sequence[Sequence[int]], add_eos: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack id sequences into ``ids`` [B,T] long (``<pad>`` = 0) and ``mask`` [B,T] bool; T is the
    longest sequence (+1 with ``add_eos``, which appends EOS to each)."""
    T = max(len(s) for s in seqs) + add_eos
    ids = np.full((len(seqs), T), PAD, dtype=np.int64)
    mask = np.zeros((len(seqs), T), dtype=bool)
    for b, s in enumerate(seqs):
        n = len(s)
        ids[b, :n] = s
        if add_eos:
            ids[b, n] = EOS
        mask[b, : n + add_eos] = True
    return torch.from_numpy(ids), torch.from_numpy(mask)


def eval_batches(
    x_ids: Sequence[Sequence[int]], y_ids: Sequence[Sequence[int]] | None, batch_size: int
) -> Iterator[Batch]:
    """Batches of ``batch_size`` sentences in input order; ids already end in EOS (EvalSet.x/y)."""
    for i in range(0, len(x_ids), batch_size):
        x, x_mask = pad(x_ids[i : i + batch_size])
        y = y_mask = None
        if y_ids is not None:
            y, y_mask = pad(y_ids[i : i + batch_size])
        yield Batch(x, x_mask, y, y_mask)


# ------------------------------------------------------------------------------------- train set
class TrainSet:
    """Numericalized training pairs in ``path``: ``{src,trg}.ids.npy`` (flat ids, no EOS) and
    ``{src,trg}.offsets.npy`` (int64, n+1), memory-mapped read-only."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.src_ids, self.trg_ids, self.src_offsets, self.trg_offsets = map(self._load, (
            "src.ids.npy", "trg.ids.npy", "src.offsets.npy", "trg.offsets.npy"))  # fmt: skip
        for side in ("src", "trg"):
            ids, offsets = getattr(self, f"{side}_ids"), getattr(self, f"{side}_offsets")
            if (offsets.ndim != 1 or len(offsets) != len(self.src_offsets) or not len(offsets)
                    or offsets[0] != 0 or offsets[-1] != len(ids)):  # fmt: skip
                raise self._damaged(f"{side}.ids.npy", "its offsets do not fit it")
        self.src_len = np.diff(self.src_offsets).astype(np.int32)  # [N] words, EOS not counted
        self.trg_len = np.diff(self.trg_offsets).astype(np.int32)

    def _load(self, name: str) -> np.ndarray:
        try:
            return np.load(self.path / name, mmap_mode="r")
        except (OSError, ValueError, EOFError) as e:
            raise self._damaged(name, f"unreadable: {e}") from None

    def _damaged(self, name: str, why: str) -> corpus.DataError:
        return corpus.DataError(f"{self.path / name}: damaged prepared data ({why}): delete "
                                f"{self.path} to prepare the data again")  # fmt: skip

    def __len__(self) -> int:
        return len(self.src_len)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Source and target ids of pair ``i`` (no EOS)."""
        so, to = self.src_offsets, self.trg_offsets
        return self.src_ids[so[i] : so[i + 1]], self.trg_ids[to[i] : to[i + 1]]


class TrainIterator:
    """Endless GroundHog-style minibatches over a :class:`TrainSet` (App. B.2; PAPER.md §3, A7).

    Epoch ``e`` visits the pairs in the order of a permutation drawn with seed ``seed + e`` (``seed``
    every epoch if ``reshuffle=False``), ``sort_k_batches * batch_size`` pairs at a time, each group
    sorted by max(len_x, len_y) and cut into batches emitted shortest first. The last batch of an
    epoch may be smaller. :meth:`state_dict` is the exact position: a resumed run sees the same batches.
    """

    def __init__(
        self,
        train: TrainSet,
        batch_size: int,
        sort_k_batches: int,
        seed: int,
        reshuffle: bool = False,
    ):
        if len(train) == 0:
            raise ValueError("empty training set")
        self.train, self.batch_size, self.sort_k_batches = train, batch_size, sort_k_batches
        self.seed, self.reshuffle = seed, reshuffle
        self.key = np.maximum(train.src_len, train.trg_len)
        self.updates_per_epoch = math.ceil(len(train) / batch_size)
        self._epoch, self._batch = 0, 0  # position: next batch to emit
        self._perm_epoch, self._perm = None, None
        self._group_id, self._group = None, None

    @classmethod
    def from_config(cls, train: TrainSet, cfg) -> TrainIterator:
        """The iterator a :class:`~nmt_lib.config.DataConfig` describes (batch size, sort groups,
        seed, reshuffle)."""
        return cls(train, cfg.batch_size, cfg.sort_k_batches, cfg.seed, reshuffle=cfg.reshuffle)

    @property
    def epoch(self) -> float:
        """Epochs done, fractional (batches emitted / updates per epoch)."""
        return self._epoch + self._batch / self.updates_per_epoch

    def state_dict(self) -> dict:
        return {
            "epoch": self._epoch,
            "batch": self._batch,
            "seed": self.seed,
            "reshuffle": self.reshuffle,
            "n_pairs": len(self.train),
            "batch_size": self.batch_size,
            "sort_k_batches": self.sort_k_batches,
        }

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        for k in ("seed", "reshuffle", "n_pairs", "batch_size", "sort_k_batches"):
            if state[k] != mine[k]:
                raise ValueError(f"iterator state has {k}={state[k]!r}, this iterator {mine[k]!r}")
        self._epoch, self._batch = int(state["epoch"]), int(state["batch"])

    def _permutation(self) -> np.ndarray:
        if self._perm_epoch != self._epoch:
            seed = self.seed + (self._epoch if self.reshuffle else 0)
            self._perm = np.random.default_rng(seed).permutation(len(self.train))
            self._perm_epoch, self._group_id = self._epoch, None
        return self._perm

    def _batch_indices(self) -> np.ndarray:
        k, g = divmod(self._batch, self.sort_k_batches)
        perm = self._permutation()
        if self._group_id != k:
            size = self.sort_k_batches * self.batch_size
            group = perm[k * size : (k + 1) * size]
            self._group = group[np.argsort(self.key[group], kind="stable")]
            self._group_id = k
        return self._group[g * self.batch_size : (g + 1) * self.batch_size]

    def __iter__(self) -> TrainIterator:
        return self

    def __next__(self) -> Batch:
        idx = self._batch_indices()
        self._batch += 1
        if self._batch == self.updates_per_epoch:
            self._epoch, self._batch = self._epoch + 1, 0
        pairs = [self.train.pair(int(i)) for i in idx]
        x, x_mask = pad([p[0] for p in pairs], add_eos=True)
        y, y_mask = pad([p[1] for p in pairs], add_eos=True)
        return Batch(x, x_mask, y, y_mask)


# -------------------------------------------------------------------------------------- eval set
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


def _read_eval(
    name: str, files: Sequence[corpus.EvalFiles], cfg: DataConfig, tok_dir: Path, workers, progress
) -> dict:
    """Raw and tokenized text of one or more SGML test sets, concatenated in order."""
    out = {"ids": [], "src_raw": [], "ref_raw": [], "src_tok": [], "ref_tok": [], "keys": []}
    for f in files:
        if f.plain:  # one sentence per line (Multi30k): ids (part, "", line number)
            pairs = corpus.read_plain_pair(f.src, f.ref)
            src = [corpus.Segment("", str(i), a) for i, (a, _) in enumerate(pairs, 1)]
            ref = [corpus.Segment("", str(i), b) for i, (_, b) in enumerate(pairs, 1)]
        else:
            src, ref = list(corpus.read_sgml(f.src)), list(corpus.read_sgml(f.ref))
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


# ----------------------------------------------------------------------------- preparing training
def _aligned(a: Iterator[str], b: Iterator[str], path_a: Path, path_b: Path):
    """Zip two line streams; unequal lengths raise DataError naming both files and counts."""
    n = 0
    for x, y in zip_longest(a, b):
        if x is None or y is None:
            na = n + (x is not None) + sum(1 for _ in a)
            nb = n + (y is not None) + sum(1 for _ in b)
            raise _mismatch(path_a, na, path_b, nb)
        n += 1
        yield x, y


def _mismatch(path_a: Path, na: int, path_b: Path, nb: int) -> corpus.DataError:
    return corpus.DataError(
        f"line counts differ: {path_a} has {na} lines, {path_b} has {nb}; the two sides of a "
        "parallel corpus must be line-aligned"
    )


class _Side:
    """Provisional ids (first-seen order) of one language, buffered to raw files in a temp dir."""

    def __init__(self, tmp: Path, name: str):
        self.table: dict[str, int] = {}
        self.ids_path, self.len_path = tmp / f"{name}.raw", tmp / f"{name}.len"
        self._ids_f, self._len_f = open(self.ids_path, "wb"), open(self.len_path, "wb")
        self._ids, self._lens = array("i"), array("i")

    def add(self, tokens: list[str]) -> None:
        table = self.table
        self._ids.extend([table.setdefault(w, len(table)) for w in tokens])
        self._lens.append(len(tokens))
        if len(self._ids) > 1 << 20:
            self.flush()

    def flush(self) -> None:
        self._ids.tofile(self._ids_f)
        self._lens.tofile(self._len_f)
        del self._ids[:], self._lens[:]

    def close(self) -> None:
        self.flush()
        self._ids_f.close()
        self._len_f.close()


_CHUNK = 1 << 16  # pairs per numpy chunk when finishing


def _chunks(side: _Side, lens: np.ndarray):
    """Stream the raw ids back, ``_CHUNK`` pairs at a time: (first pair, pair lengths, ids)."""
    with open(side.ids_path, "rb") as f:
        for c0 in range(0, len(lens), _CHUNK):
            n = lens[c0 : c0 + _CHUNK]
            yield c0, n, np.fromfile(f, dtype=np.int32, count=int(n.sum()))


def _finish_side(side: _Side, flags: np.ndarray, n_words: int, out: Path, name: str) -> dict:
    """Count words over the window pairs, build the shortlist, write the kept pairs' final ids.

    Two sequential passes over the raw ids in chunks, so memory does not grow with the corpus."""
    lens = np.fromfile(side.len_path, dtype=np.int32)
    window, kept = (flags & 1).astype(bool), (flags & 2).astype(bool)
    counts = np.zeros(len(side.table), dtype=np.int64)
    for c0, n, raw in _chunks(side, lens):
        counts += np.bincount(raw[np.repeat(window[c0 : c0 + len(n)], n)], minlength=len(counts))
    words = list(side.table)
    vocab = Vocab.build(
        {words[i]: int(counts[i]) for i in np.flatnonzero(counts)}, n_words, int(window.sum())
    )
    vocab.save(out / f"{name}.vocab.txt")
    lookup = np.full(len(words), UNK, dtype=np.int64)
    for row, w in enumerate(vocab.itos[3:], 3):
        lookup[side.table[w]] = row
    dtype = np.uint16 if len(vocab) <= 1 << 16 else np.int32
    kept_lens = lens[kept]
    total = int(kept_lens.sum())
    unk_tokens = unk_sents = 0
    with open(out / f"{name}.ids.npy", "wb") as f:
        header = {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": (total,)}
        np.lib.format.write_array_header_1_0(f, header)
        for c0, n, raw in _chunks(side, lens):
            keep = kept[c0 : c0 + len(n)]
            vals = lookup[raw[np.repeat(keep, n)]]
            f.write(vals.astype(dtype).tobytes())
            if len(vals):
                is_unk = vals == UNK
                starts = np.concatenate([[0], np.cumsum(n[keep])[:-1]])
                unk_tokens += int(is_unk.sum())
                unk_sents += int((np.add.reduceat(is_unk, starts) > 0).sum())
    offsets = np.zeros(len(kept_lens) + 1, dtype=np.int64)
    np.cumsum(kept_lens, out=offsets[1:])
    np.save(out / f"{name}.offsets.npy", offsets)
    return {
        "words": total,
        "types": len(words),
        "types_counted": int((counts > 0).sum()),
        "shortlist_coverage": 1 - vocab.counts[UNK] / max(int(counts.sum()), 1),
        "oov_token_rate": unk_tokens / max(total, 1),
        "oov_sentence_rate": unk_sents / max(len(kept_lens), 1),
        "length_hist": np.bincount(kept_lens).tolist(),
    }


def _pairs(train: list, dev_test: tuple[set, set], cfg: DataConfig, per_corpus: dict):
    """Step 3 (module docstring): ``(source words, target words, in_window, keep)`` for each
    non-empty training pair, not in dev or test, that counts towards the vocabularies (``in_window``:
    among the first ``max_train_pairs``) or is kept (``keep``: no side over ``max_len``), corpus by
    corpus, until ``max_train_pairs`` are kept; what it reads and drops counted in ``per_corpus``."""
    cap, max_len = cfg.max_train_pairs, cfg.max_len
    n_window = n_kept = 0
    for name, parts in train:
        st = per_corpus[name] = {"lines": 0, "read": 0, **dict.fromkeys(REASONS, 0), "kept": 0}
        for (sp, tp), (s_lines, t_lines), n_lines in parts:
            st["lines"] += n_lines
            if cap is not None and n_kept >= cap:
                continue
            for xs, ys in _aligned(s_lines, t_lines, sp, tp):
                st["read"] += 1
                if not xs or not ys:
                    st["empty"] += 1
                    continue
                if xs in dev_test[0] or ys in dev_test[1]:
                    st["in_dev_test"] += 1
                    continue
                xw, yw = xs.split(), ys.split()
                in_window = cap is None or n_window < cap
                keep = len(xw) <= max_len and len(yw) <= max_len
                n_window += in_window
                if not keep:
                    st["too_long"] += 1
                    if not in_window:
                        continue
                yield xw, yw, in_window, keep
                if keep:
                    st["kept"] += 1
                    n_kept += 1
                    if cap is not None and n_kept >= cap:
                        break


def _close(train: list) -> None:
    """Stop the tokenizers of the training parts left unread (cap reached, or an error)."""
    for _, parts in train:
        for _, lines, _ in parts:
            for it in lines:
                it.close()


def _build_train(out: Path, train: list, dev_test: tuple[set, set], cfg: DataConfig) -> dict:
    """Filter and numericalize the training pairs into ``out`` (see the module docstring)."""
    src, trg = _Side(out, "src"), _Side(out, "trg")
    flags = array("B")
    per_corpus: dict[str, dict] = {}
    try:
        for xw, yw, in_window, keep in _pairs(train, dev_test, cfg, per_corpus):
            src.add(xw)
            trg.add(yw)
            flags.append(in_window | (keep << 1))
    finally:
        src.close()
        trg.close()
        _close(train)
    n_kept = sum(c["kept"] for c in per_corpus.values())
    if n_kept == 0:
        raise corpus.DataError(
            f"no training pair left after filtering (max_len={cfg.max_len}): {per_corpus}"
        )
    f = np.frombuffer(flags, dtype=np.uint8)
    n_window = int((f & 1).sum())
    sides = {
        "src": _finish_side(src, f, cfg.src_words, out, "src"),
        "trg": _finish_side(trg, f, cfg.trg_words, out, "trg"),
    }
    for p in (src.ids_path, src.len_path, trg.ids_path, trg.len_path):
        p.unlink()
    total = {k: sum(c[k] for c in per_corpus.values()) for k in ("lines", "read", *REASONS)}
    return {
        "pairs": n_kept,
        "lines": total["lines"],
        "lines_read": total["read"],
        "dropped": {r: total[r] for r in REASONS},
        "vocab_pairs": n_window,
        "corpora": per_corpus,
        **sides,
    }


# ------------------------------------------------------------------------------------- prepare
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


def _key(train_keys: list, dev: dict, test: dict, settings: dict) -> str:
    """The prepared data's key: its training files' keys, dev and test's, and the settings."""
    obj = {"format": FORMAT, "train": train_keys, "eval": dev["keys"] + test["keys"], **settings}
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _dev_test(found: corpus.Located, cfg: DataConfig, tok_dir: Path, workers, progress):
    """Dev and test as read (tokenized), and the sets of their sources and references that no
    training pair may share (step 3)."""
    dev = _read_eval("dev", found.dev, cfg, tok_dir, workers, progress)
    test = _read_eval("test", found.test, cfg, tok_dir, workers, progress)
    return dev, test, (set(dev["src_tok"] + test["src_tok"]), set(dev["ref_tok"] + test["ref_tok"]))


def train_pairs(cfg: DataConfig) -> Iterator[tuple[list[str], list[str]]]:
    """The training pairs that :func:`prepare` keeps, as words (tokenized), in order: for a study of
    the words themselves, which the prepared ids (shortlists) no longer hold (:mod:`nmt_lib.unk`'s
    dictionary). Needs the data files (not a pack)."""
    if cfg.packed:
        raise ValueError("train_pairs reads the data files; a pack holds ids only")
    tok_dir = cfg.resolved_cache_dir() / "tok"
    found = corpus.locate(cfg, cfg.resolved_data_dir())
    _, _, dev_test = _dev_test(found, cfg, tok_dir, None, False)
    train, _ = _train_inputs(found, cfg, tok_dir, None, False)
    try:
        for xw, yw, _, keep in _pairs(train, dev_test, cfg, {}):
            if keep:
                yield xw, yw
    finally:
        _close(train)


def _train_inputs(found: corpus.Located, cfg: DataConfig, tok_dir: Path, workers, progress):
    """The training files' (lazily) tokenized lines and their cache keys, corpus by corpus."""
    train, train_keys = [], []
    for tf in found.train:
        parts, keys = [], []
        for sp, tp in tf.pairs:
            if tf.plain:  # whole lines: a file cut short is refused before it is read
                for p in (sp, tp):
                    corpus.check_whole_lines(p)
            ns, nt = (text.file_info(p, tok_dir).lines for p in (sp, tp))
            if ns != nt:
                raise _mismatch(sp, ns, tp, nt)
            if tf.pretokenized:
                lines = (text.pretokenized_lines(sp), text.pretokenized_lines(tp))
                keys.append(
                    ["pretokenized", *(text.file_info(p, tok_dir).sha256 for p in (sp, tp))]
                )
            else:  # lazy: a part is tokenized only if the build reads it
                lines = tuple(
                    text.tokenized(p, lang, tok_dir, workers, progress)
                    for p, lang in ((sp, cfg.src_lang), (tp, cfg.trg_lang))
                )
                keys.append(
                    [
                        text.cache_key(sp, cfg.src_lang, tok_dir),
                        text.cache_key(tp, cfg.trg_lang, tok_dir),
                    ]
                )
            parts.append(((sp, tp), lines, ns))
        train.append((tf.name, parts))
        train_keys.append([tf.name, keys])
    return train, train_keys


def prepare(
    cfg: DataConfig, workers: int | None = None, progress: bool | None = None, verify: bool = False
) -> Prepared:
    """Locate, read, tokenize (cached), drop dev/test overlaps, filter, build the shortlists and
    numericalize (cached) the data of ``cfg``; see the module docstring. ``workers``: tokenizer
    processes (default: the usable cores); ``progress``: tqdm bars (None = only on a terminal);
    ``verify``: check the sha256 of every prepared file it loads (:func:`check_prepared`)."""
    t0 = time.perf_counter()
    data_dir, cache = cfg.resolved_data_dir(), cfg.resolved_cache_dir()
    tok_dir = cache / "tok"
    if cfg.packed:
        return _prepare_packed(cfg, tok_dir, workers, progress, verify)
    found = corpus.locate(cfg, data_dir)
    dev, test, dev_test = _dev_test(found, cfg, tok_dir, workers, progress)
    train, train_keys = _train_inputs(found, cfg, tok_dir, workers, progress)
    t_eval = time.perf_counter() - t0

    settings = _settings(cfg)
    key = _key(train_keys, dev, test, settings)
    out = cache / "prep" / key[:20]
    if not (out / "meta.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            t1 = time.perf_counter()
            with naming(out.parent, NO_SPACE):  # reading errors keep their own messages
                stats = _build_train(tmp, train, dev_test, cfg)
            # "train" includes tokenizing the training files that were not cached yet
            stats["seconds"] = {"eval": t_eval, "train": time.perf_counter() - t1}
            files = {f: {"bytes": (tmp / f).stat().st_size, "sha256": sha256_file(tmp / f)}
                     for f in PREPARED_FILES}  # fmt: skip
            write_json(
                tmp / "meta.json",
                {"key": key, "settings": settings, "train": stats, "files": files},
            )
            umask = os.umask(0)
            os.umask(umask)
            tmp.chmod(0o777 & ~umask)  # mkdtemp makes 0700 directories
            try:
                os.rename(tmp, out)
            except OSError:  # built concurrently by another process: keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return _prepared(out, cfg, data_dir, settings, dev, test, verify)


#: The files of a prepared-data directory besides ``meta.json``, which records their size and sha256.
PREPARED_FILES = ("src.vocab.txt", "trg.vocab.txt", "src.ids.npy", "trg.ids.npy",
                  "src.offsets.npy", "trg.offsets.npy")  # fmt: skip


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
            raise corpus.DataError(f"{f}: {size} bytes where the prepared data recorded "
                                   f"{rec['bytes']} (truncated or changed): {redo}")  # fmt: skip
        if (full or name.endswith(".txt")) and sha256_file(f) != rec["sha256"]:
            raise corpus.DataError(f"{f}: its contents differ from those recorded when the data "
                                   f"were prepared (sha256): changed or damaged; {redo}")  # fmt: skip
    return meta


def _prepared(out: Path, cfg: DataConfig, data_dir: Path, settings: dict, dev, test,
              verify: bool = False) -> Prepared:  # fmt: skip
    meta = check_prepared(out, full=verify)
    src_vocab, trg_vocab = Vocab.load(out / "src.vocab.txt"), Vocab.load(out / "trg.vocab.txt")
    dev_set, test_set = _eval_set(dev, src_vocab, trg_vocab), _eval_set(test, src_vocab, trg_vocab)
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
    }
    return Prepared(src_vocab, trg_vocab, TrainSet(out), dev_set, test_set, stats, out, meta["key"])


def fingerprint(prep: Prepared) -> dict:
    """What a checkpoint records of the data it was trained on: the prepared data's key (a hash of
    every input file and setting) and the sha256 of each vocabulary, words in row order."""

    return {"prepared": prep.key, "src_vocab": prep.src_vocab.digest(),
            "trg_vocab": prep.trg_vocab.digest()}  # fmt: skip


# ------------------------------------------------------------------------------------------ packs
PACK = "pack.json"


def _settings(cfg: DataConfig) -> dict:
    names = ("src_lang", "trg_lang", "src_words", "trg_words", "max_len", "max_train_pairs")
    return {k: getattr(cfg, k) for k in names}


def pack(cfg: DataConfig, out: str | os.PathLike) -> Path:
    """Write what training and evaluation with ``cfg`` need into ``out``, for a machine without the
    WMT'14 files (a GPU machine): the prepared training data, copies of the dev and test files, and
    ``pack.json`` with the prepared data's key and the sha256 of every input file. Train there with
    ``data.packed = out``. The pack is written into a new directory beside ``out``, then renamed
    ``out``; an ``out`` that exists must be an empty directory or a pack (which it replaces):
    anything else raises :class:`~nmt_lib.data.corpus.DataError`, before any work, and is left as
    it is."""
    out = Path(out).absolute()
    _check_pack_target(out)
    prep = prepare(cfg)
    found = corpus.locate(cfg)
    root, memo = cfg.resolved_data_dir(), cfg.resolved_cache_dir() / "tok"
    _, train_keys = _train_inputs(found, cfg, memo, None, False)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        shutil.copytree(prep.path, tmp / "prepared")
        for ev in (*found.test, *found.dev):
            for p in (ev.src, ev.ref):
                dest = tmp / "data" / p.relative_to(root)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest)
        write_json(tmp / PACK, {"key": prep.key, "settings": _settings(cfg),
                                "train": list(cfg.train), "train_keys": train_keys,
                                "data_sha256": input_sha256(cfg)})  # fmt: skip
        _check_pack_target(out)  # still empty or a pack
        old = None
        if out.exists():  # set aside (renamed into an empty directory), removed once replaced
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.rename(out, old)
        os.rename(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _check_pack_target(out: Path) -> None:
    """Raise :class:`~nmt_lib.data.corpus.DataError` unless ``out`` is missing, an empty directory,
    or a pack that :func:`pack` wrote (``pack.json`` and its two directories, nothing else)."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise corpus.DataError(f"{out}: exists and is not a directory: pack writes a new directory "
                               "(or replaces a pack of its own); name another one")  # fmt: skip
    entries = sorted(os.listdir(out))
    if not entries:
        return
    if PACK in entries and set(entries) <= {PACK, "prepared", "data"}:
        try:
            if "key" in read_pack(out):
                return
        except (corpus.DataError, TypeError):
            pass
    raise corpus.DataError(
        f"{out}: exists and is not a pack written by `python -m nmt_lib pack` ({len(entries)} "
        f"entries, e.g. {entries[0]!r}): pack replaces only a pack of its own, never anything "
        "else; name a new directory"
    )


def input_sha256(cfg: DataConfig) -> dict[str, str]:
    """The sha256 of every input file of ``cfg`` (dev, test, training), by path relative to its
    data directory; for a pack, as recorded where it was written."""
    if cfg.packed:
        return read_pack(cfg.packed)["data_sha256"]
    root, memo = cfg.resolved_data_dir(), cfg.resolved_cache_dir() / "tok"
    found = corpus.locate(cfg, root)
    paths = [p for ev in (*found.test, *found.dev) for p in (ev.src, ev.ref)]
    paths += [p for tf in found.train for pair in tf.pairs for p in pair]
    return {str(Path(p).relative_to(root)): text.file_info(p, memo).sha256 for p in paths}


def verify_inputs(cfg: DataConfig) -> list[Path]:
    """Hash every input file of ``cfg`` again and compare with the sha256 remembered for its path,
    size and mtime (:func:`nmt_lib.data.text.file_info`). A file whose contents changed behind an
    unchanged size and mtime is forgotten (it is hashed afresh when next used, and so gets new
    prepared data) and returned; the prepared data and checkpoints made from it are stale. A pack
    (``data.packed``) has no input files here: nothing to check (its prepared files are checked
    when loaded)."""
    if cfg.packed:
        return []
    root, memo_dir = cfg.resolved_data_dir(), cfg.resolved_cache_dir() / "tok"
    found = corpus.locate(cfg, root)
    paths = [p for ev in (*found.test, *found.dev) for p in (ev.src, ev.ref)]
    paths += [p for tf in found.train for pair in tf.pairs for p in pair]
    changed = [Path(p) for p in paths if sha256_file(p) != text.file_info(p, memo_dir).sha256]
    if changed:
        memo_path = memo_dir / "files.json"
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        for p in changed:
            memo.pop(str(p.resolve()), None)
        write_json(memo_path, memo)
    return changed


def read_pack(path: str | os.PathLike) -> dict:
    """``pack.json`` of a pack directory; a missing or unreadable one names the file."""
    f = Path(path) / PACK
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise corpus.DataError(f"{f}: not a pack written by `python -m nmt_lib pack` ({e})") from e


def _prepare_packed(cfg: DataConfig, tok_dir: Path, workers, progress, verify=False) -> Prepared:
    """:func:`prepare` from a pack: its prepared training data, its dev and test files."""
    root = Path(cfg.packed)
    pk = read_pack(root)
    settings = _settings(cfg)
    want, got = {**settings, "train": list(cfg.train)}, {**pk["settings"], "train": pk["train"]}
    differ = [f"data.{k} = {got.get(k)!r}, not {v!r}" for k, v in want.items() if got.get(k) != v]
    if differ:
        raise corpus.DataError(f"{root / PACK}: packed with {'; '.join(differ)}")
    data_dir = root / "data"
    found = corpus.locate(replace(cfg, train=()), data_dir)
    dev = _read_eval("dev", found.dev, cfg, tok_dir, workers, progress)
    test = _read_eval("test", found.test, cfg, tok_dir, workers, progress)
    key = _key(pk["train_keys"], dev, test, settings)
    prep = _prepared(root / "prepared", cfg, data_dir, settings, dev, test, verify)
    if not key == prep.key == pk["key"]:
        raise corpus.DataError(
            f"{root}: its prepared data, its dev/test files and {PACK} do not belong together"
        )
    return prep


def data_summary(prep: Prepared) -> dict:
    """Pairs, words, kept/dropped counts per reason, OOV rates (token and sentence level), No-UNK
    subset sizes and sentence-length histograms (index = words) for train, dev and test: a plain,
    JSON-serialisable dict for the book's data page."""
    return json.loads(json.dumps(prep.stats))


__all__ = [
    "Batch",
    "EvalSet",
    "Prepared",
    "TrainIterator",
    "TrainSet",
    "data_summary",
    "eval_batches",
    "pad",
    "prepare",
]
