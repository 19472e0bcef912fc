"""Where a config's files are: :func:`locate` finds every file of a
:class:`~nmt_lib.config.DataConfig` in its data directory (the layouts of :mod:`nmt_lib.data.corpus`)
and names every missing one at once, with how to get it. A test set held out of a training corpus
(``Corpus.drawn``) is drawn into the data cache the first time it is needed
(:mod:`nmt_lib.data.heldout`).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .corpus import CORPORA, KIND_NAMES, SUFFIXES, Corpus, DataError, get_corpus, how_to_get
from .heldout import written


def find_plain(stem: Path) -> Path | None:
    """The first of ``stem``, ``stem.gz``, ``stem.xz`` that exists."""
    for suffix in SUFFIXES:
        p = Path(f"{stem}{suffix}")
        if p.is_file():
            return p
    return None


class EvalFiles(NamedTuple):
    name: str
    src: Path
    ref: Path
    plain: bool = False  # plain text, one sentence per line (Corpus.plain), not SGML


class TrainFiles(NamedTuple):
    name: str
    pairs: tuple[tuple[Path, Path], ...]  # (source file, target file) per part
    pretokenized: bool
    plain: bool = False  # whole lines only (Corpus.plain): a last line without newline is refused


class Located(NamedTuple):
    test: tuple[EvalFiles, ...]  # the test set's parts, in order (one, but multi30k.test_flickr)
    dev: tuple[EvalFiles, ...]
    train: tuple[TrainFiles, ...]
    views: tuple[tuple[str, tuple[EvalFiles, ...]], ...] = ()  # (name, parts) of each data.views


def locate(cfg, data_dir: Path | None = None) -> Located:
    """Find every file ``cfg`` (a DataConfig) needs; report *all* missing files at once, each with
    its corpus, expected path and how to get it. A training name that is not registered is accepted
    when ``train/<name>.<lang>[.gz|.xz]`` exists (a corpus of your own). A test set held out of a
    training corpus (``Corpus.drawn``) is drawn into the data cache the first time it is needed."""
    data_dir = Path(data_dir or cfg.resolved_data_dir())
    missing: dict[str, tuple[Corpus, list[str]]] = {}  # corpus name -> (corpus, missing paths)
    langs = cfg.src_lang, cfg.trg_lang
    at = data_dir, langs, missing, cfg.resolved_cache_dir() / "heldout"
    test = _eval_files(cfg.test, "test", *at)
    dev = tuple(part for n in cfg.dev for part in _eval_files(n, "dev", *at))
    views = tuple((n, _eval_files(n, "test", *at)) for n in cfg.views)
    train = tuple(_train_files(n, data_dir, langs, missing) for n in cfg.train)
    if missing:
        raise _missing_files(missing, data_dir)
    return Located(test, dev, train, views)


def _eval_files(
    name: str, kind: str, data_dir: Path, langs, missing: dict, cache: Path
) -> tuple[EvalFiles, ...]:
    """The parts of the test or dev set ``name``; its files that are not there go into ``missing``."""
    (s, t), (c, parts) = langs, (get_corpus(name, kind), [])
    if c.drawn is not None:
        return (_drawn_files(c, data_dir, langs, missing, cache),)
    for stem in c.parts:
        if c.plain:  # <stem>.<lang>[.gz|.xz], named by its part when the set has several
            src, ref = (
                find_plain(data_dir / f"{stem}.{lang}") or data_dir / f"{stem}.{lang}"
                for lang in (s, t)
            )
            part = name if len(c.parts) == 1 else f"multi30k.{stem.rsplit('.', 1)[-1]}"
        else:
            src, ref = data_dir / f"{stem}-src.{s}.sgm", data_dir / f"{stem}-ref.{t}.sgm"
            part = name
        for p in (src, ref):
            if not p.is_file():
                where = f"{p}[.gz|.xz]" if c.plain else str(p)
                missing.setdefault(name, (c, []))[1].append(where)
        parts.append(EvalFiles(part, src, ref, c.plain))
    return tuple(parts)


def _drawn_files(c: Corpus, data_dir: Path, langs, missing: dict, cache: Path) -> EvalFiles:
    """The held-out test set ``c``, drawn from its training corpus into ``cache`` (once)."""
    source = _train_files(c.drawn.source, data_dir, langs, missing)
    if c.drawn.source in missing:
        return EvalFiles(c.name, Path(), Path(), True)
    return EvalFiles(c.name, *written(c.name, *source.pairs[0], c.drawn, langs, cache), True)


def _train_files(name: str, data_dir: Path, langs, missing: dict) -> TrainFiles:
    """The training corpus ``name`` (registered, or of your own under ``train/``); its registered
    files that are not there go into ``missing``."""
    s, t = langs
    c = CORPORA.get(name)
    if c is None or c.kind != "train":
        local = [find_plain(data_dir / "train" / f"{name}.{lang}") for lang in (s, t)]
        if None in local:
            try:
                get_corpus(name, "train")  # raises: unknown name, with the known ones
            except DataError as e:
                raise DataError(
                    f"data.train: {e}; nor is it a corpus of your own "
                    f"({data_dir / 'train' / name}.{s} and .{t}, or .gz/.xz)"
                ) from None
        return TrainFiles(name, (tuple(local),), False)
    pairs = []
    for stem in c.parts:
        found = [find_plain(data_dir / f"{stem}.{lang}") for lang in (s, t)]
        for lang, p in zip((s, t), found, strict=True):
            if p is None:
                where = data_dir / f"{stem}.{lang}"
                missing.setdefault(name, (c, []))[1].append(f"{where}[.gz|.xz]")
        pairs.append(tuple(found))
    return TrainFiles(name, tuple(pairs), c.pretokenized, c.plain)


def _missing_files(missing: dict, data_dir: Path) -> DataError:
    """The error that lists every missing file of ``missing``, by corpus, with how to get each."""
    lines = [
        f"data directory {data_dir} lacks files (use another: --data-dir / data.data_dir, or NMT_DATA):"
    ]
    for name, (c, paths) in missing.items():
        lines += [
            f"  {KIND_NAMES[c.kind]} {name}: {', '.join(paths)}",
            f"    {how_to_get(c, data_dir)}",
        ]
    fetch = [n for n, (c, _) in missing.items() if c.archive is not None]
    if len(fetch) > 1:
        lines.append(
            f"fetch all: python -m nmt_lib.data.download --data-dir {data_dir} {' '.join(fetch)}"
        )
    return DataError("\n".join(lines))
