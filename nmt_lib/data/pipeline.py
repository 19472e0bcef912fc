"""From the data files to the prepared store (:mod:`nmt_lib.data.store`): :func:`prepare`, whose
steps the package's docstring lists (:mod:`nmt_lib.data`), and :func:`train_pairs`, the kept
training pairs as words.

The text is streamed and the ids go through temporary files in chunks (:class:`_Side`): memory
holds the word-count tables and a few bytes per pair, never the sentences. The store is built
under a temporary name and renamed when complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from array import array
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

import numpy as np

from ..config import DataConfig
from ..io import NO_SPACE, naming, sha256_file, write_json
from . import corpus, files, heldout, readers, text
from .store import (
    PREPARED_FILES,
    Prepared,
    load_prepared,
    prepare_packed,
    prepared_key,
    prepared_settings,
    read_eval,
)
from .vocab import UNK, Vocab

REASONS = ("empty", "in_dev_test", "too_long")


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
    """Step 3 (:mod:`nmt_lib.data`): ``(source words, target words, in_window, keep)`` for each
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
    """Filter and numericalize the training pairs into ``out`` (steps 3-5 of :mod:`nmt_lib.data`)."""
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


def _dev_test(found: files.Located, cfg: DataConfig, tok_dir: Path, workers, progress):
    """Dev, test and the views (``data.views``) as read (tokenized), and the sets of their sources
    and references that no training pair may share (step 3)."""
    dev = read_eval("dev", found.dev, cfg, tok_dir, workers, progress)
    test = read_eval("test", found.test, cfg, tok_dir, workers, progress)
    views = {n: read_eval(n, parts, cfg, tok_dir, workers, progress) for n, parts in found.views}
    sets = (dev, test, *views.values())
    held = (
        {s for d in sets for s in d["src_tok"]},
        {r for d in sets for r in d["ref_tok"]},
    )
    return dev, test, views, held


def train_pairs(cfg: DataConfig) -> Iterator[tuple[list[str], list[str]]]:
    """The training pairs that :func:`prepare` keeps, as words (tokenized), in order: for a study of
    the words themselves, which the prepared ids (shortlists) no longer hold (:mod:`nmt_lib.unk`'s
    dictionary). Needs the data files (not a pack)."""
    if cfg.packed:
        raise ValueError("train_pairs reads the data files; a pack holds ids only")
    tok_dir = cfg.resolved_cache_dir() / "tok"
    found = files.locate(cfg, cfg.resolved_data_dir())
    *_, dev_test = _dev_test(found, cfg, tok_dir, None, False)
    train, _ = train_inputs(found, cfg, tok_dir, None, False)
    try:
        for xw, yw, _, keep in _pairs(train, dev_test, cfg, {}):
            if keep:
                yield xw, yw
    finally:
        _close(train)


def train_inputs(found: files.Located, cfg: DataConfig, tok_dir: Path, workers, progress):
    """The training files' (lazily) tokenized lines and their cache keys, corpus by corpus."""
    train, train_keys = [], []
    for tf in found.train:
        parts, keys = [], []
        for sp, tp in tf.pairs:
            if tf.plain:  # whole lines: a file cut short is refused before it is read
                for p in (sp, tp):
                    readers.check_whole_lines(p)
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
    numericalize (cached) the data of ``cfg``; the steps of :mod:`nmt_lib.data`. ``workers``: tokenizer
    processes (default: the usable cores); ``progress``: tqdm bars (None = only on a terminal);
    ``verify``: check the sha256 of every prepared file it loads (:func:`check_prepared`)."""
    t0 = time.perf_counter()
    data_dir, cache = cfg.resolved_data_dir(), cfg.resolved_cache_dir()
    tok_dir = cache / "tok"
    if cfg.packed:
        if cfg.views:
            raise corpus.DataError(
                f"data.views {list(cfg.views)}: a pack ({cfg.packed}) holds its own dev and test "
                "sets only; the views need the data files"
            )
        return prepare_packed(cfg, tok_dir, workers, progress, verify)
    found = files.locate(cfg, data_dir)
    dev, test, views, dev_test = _dev_test(found, cfg, tok_dir, workers, progress)
    train, train_keys = train_inputs(found, cfg, tok_dir, workers, progress)
    t_eval = time.perf_counter() - t0

    settings = prepared_settings(cfg)
    key = prepared_key(train_keys, dev, test, settings, list(views.values()))
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
            sums = {
                f: {"bytes": (tmp / f).stat().st_size, "sha256": sha256_file(tmp / f)}
                for f in PREPARED_FILES
            }
            write_json(
                tmp / "meta.json",
                {"key": key, "settings": settings, "train": stats, "files": sums},
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
    prep = load_prepared(out, cfg, data_dir, settings, dev, test, verify, views)
    sets = (*found.test, *found.dev, *(ev for _, parts in found.views for ev in parts))
    read = {name: c["read"] for name, c in prep.stats["train"]["corpora"].items()}
    drawn = {ev.name: corpus.CORPORA[ev.name].drawn for ev in sets if ev.name in corpus.CORPORA}
    heldout.check_unread({name: d for name, d in drawn.items() if d is not None}, read)
    return prep
