"""The data files: a registry of known corpora (:data:`CORPORA`) and where they live in a data
directory (:func:`locate`); :mod:`nmt_lib.data.readers` reads them.

A WMT'14 data directory mirrors the official WMT'14 downloads (PAPER.md §1, paper §4.1)::

    test-full/newstest2014-fren-{src,ref}.{en,fr}.sgm    test: newstest2014, 3003 sentences
    dev/newstest2012-{src,ref}.{en,fr}.sgm               dev part 1 (3003)
    dev/newstest2013-{src,ref}.{en,fr}.sgm               dev part 2 (3000)
    train/<corpus>.{en,fr}[.gz|.xz]                      line-aligned training corpora

The second testbed, Multi30k task 1 (Elliott et al. 2016; image captions, CC BY), is a directory of
its own, found by the same rules (``data.data_dir``, else ``NMT_DATA``), holding the release's
plain-text files (``data/task1/raw/<split>.<lang>.gz`` of github.com/multi30k/dataset, named
``multi30k.task1.<split>.<lang>[.gz|.xz]``)::

    multi30k.task1.train.{en,fr}               train (29,000)      corpus ``multi30k.train``
    multi30k.task1.val.{en,fr}                 dev (1,014)         ``multi30k.val``
    multi30k.task1.test_2016_flickr.{en,fr}    test (1,000)        ``multi30k.test_2016_flickr``
    multi30k.task1.test_2017_flickr.{en,fr}    test (1,000)        ``multi30k.test_2017_flickr``

and the test set ``multi30k.test_flickr``, both Flickr test sets in that order (its sentences
keep their part's name: BLEU per part, :mod:`nmt_lib.evaluate`). Its dev and test sets are plain
text (``Corpus.plain``), one sentence per line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

#: Compressions a plain corpus file may carry, in the order they are looked for.
SUFFIXES = ("", ".gz", ".xz")


class DataError(ValueError):
    """Bad or missing input data; the message names the file (and line) and how to fix it."""


@dataclass(frozen=True)
class Archive:
    """An official download: ``members`` maps paths inside the archive to paths in the data dir."""

    url: str
    members: tuple[tuple[str, str], ...]
    sha256: str | None = None  # of the archive, where known
    md5: str | None = None  # where only an md5 is published (sacrebleu's registry)


@dataclass(frozen=True)
class Draw:
    """A test set held out of a training corpus (:mod:`nmt_lib.data.heldout`): ``size`` pairs,
    drawn with ``seed``, from the lines ``start`` on (counted from 0) of ``source``."""

    source: str
    start: int
    size: int
    seed: int


@dataclass(frozen=True)
class Corpus:
    """A named corpus. ``parts`` are path stems in the data dir: a test/dev set ``S`` is the pair of
    files ``S-src.<src>.sgm`` / ``S-ref.<trg>.sgm``; a training part ``P`` is ``P.<lang>[.gz|.xz]``.
    """

    name: str
    kind: str  # "test", "dev" or "train"
    parts: tuple[str, ...]
    archive: Archive | None = None
    note: str = ""  # where it comes from, when there is no archive
    pretokenized: bool = False  # already Moses-tokenized upstream: split on spaces only
    # plain text of whole lines (``<stem>.<lang>[.gz|.xz]``, every line ending in a newline, as
    # Multi30k's files): a dev/test set in that form, not SGML; a last line without its newline is
    # refused as a truncated file
    plain: bool = False
    drawn: Draw | None = None  # a test set drawn from a training corpus, not files of its own


def _sgm(stem: str, langs=("en", "fr")) -> tuple[tuple[str, str], ...]:
    return tuple((f"{stem}-{side}.{lang}.sgm",) * 2 for side in ("src", "ref") for lang in langs)


def _plain(member_stem: str, dest_stem: str, suffix: str = "") -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"{member_stem}.{lang}{suffix}", f"{dest_stem}.{lang}{suffix}") for lang in ("en", "fr")
    )


_WMT14 = "http://www.statmt.org/wmt14"
_WMT13 = "http://www.statmt.org/wmt13"
_DEV = f"{_WMT14}/dev.tgz"
_LIUM = "http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data/bitexts.tgz"
_LIUM_PARTS = ("ccb2_pc30", "crawl", "dev08_11", "ep7_pc45", "nc9", "un2000_pc34")
_OFFLINE = "an excerpt that exists only in offline copies of the data; not downloadable"


_MULTI30K = (
    "Multi30k task 1 (Elliott et al. 2016, CC BY): data/task1/raw/{split}.{{en,fr}}.gz of "
    "https://github.com/multi30k/dataset, decompressed or not, named multi30k.task1.{split}.<lang>"
)
_MULTI30K_TEST = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")


def _multi30k() -> list[Corpus]:
    """Multi30k task 1's splits (module docstring), in a data directory of their own."""

    def one(split: str, kind: str) -> Corpus:
        stem = f"multi30k.task1.{split}"
        return Corpus(
            f"multi30k.{split}", kind, (stem,), note=_MULTI30K.format(split=split), plain=True
        )

    both = tuple(f"multi30k.task1.{s}" for s in _MULTI30K_TEST[:2])
    flickr = Corpus(
        "multi30k.test_flickr",
        "test",
        both,
        plain=True,
        note=_MULTI30K.format(split="test_{2016,2017}_flickr"),
    )
    return [
        one("train", "train"),
        one("val", "dev"),
        *(one(s, "test") for s in _MULTI30K_TEST),
        flickr,
    ]


#: Every corpus this library knows by name.
CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in (
        Corpus(
            "newstest2014",
            "test",
            ("test-full/newstest2014-fren",),
            # md5 as published in sacrebleu's dataset registry ("wmt14/full").
            Archive(
                f"{_WMT14}/test-full.tgz",
                _sgm("test-full/newstest2014-fren"),
                md5="a8cd784e006feb32ac6f3d9ec7eb389a",
            ),
        ),
        *(
            Corpus(
                f"newstest{y}",
                "dev",
                (f"dev/newstest{y}",),
                Archive(_DEV, _sgm(f"dev/newstest{y}")),
            )
            for y in (2012, 2013)
        ),
        # The older news test sets: the "dev08_11" part of the paper's training data (PAPER.md §1).
        *(
            Corpus(n, "train", (f"train/{n}",), Archive(_DEV, _plain(f"dev/{n}", f"train/{n}")))
            for n in (
                "news-test2008",
                "newstest2009",
                "newstest2010",
                "newstest2011",
                "newssyscomb2009",
            )
        ),
        Corpus(
            "europarl-v7.fr-en",
            "train",
            ("train/europarl-v7.fr-en",),
            Archive(
                f"{_WMT13}/training-parallel-europarl-v7.tgz",
                _plain("training/europarl-v7.fr-en", "train/europarl-v7.fr-en"),
            ),
        ),
        Corpus(
            "commoncrawl.fr-en",
            "train",
            ("train/commoncrawl.fr-en",),
            Archive(
                f"{_WMT13}/training-parallel-commoncrawl.tgz",
                _plain("commoncrawl.fr-en", "train/commoncrawl.fr-en"),
            ),
        ),
        Corpus(
            "undoc.2000.fr-en",
            "train",
            ("train/undoc.2000.fr-en",),
            Archive(
                f"{_WMT13}/training-parallel-un.tgz",
                _plain("un/undoc.2000.fr-en", "train/undoc.2000.fr-en"),
            ),
        ),
        Corpus(
            "news-commentary-v9.fr-en",
            "train",
            ("train/news-commentary-v9.fr-en",),
            Archive(
                f"{_WMT14}/training-parallel-nc-v9.tgz",
                _plain("training/news-commentary-v9.fr-en", "train/news-commentary-v9.fr-en"),
            ),
        ),
        Corpus(
            "giga-fren.release2.fixed",
            "train",
            ("train/giga-fren.release2.fixed",),
            Archive(
                "http://www.statmt.org/wmt10/training-giga-fren.tar",
                _plain("giga-fren.release2.fixed", "train/giga-fren.release2.fixed", ".gz"),
            ),
        ),
        # The paper's 348M-word selection (§4.1, footnote 5): ~12M pairs, already tokenized upstream.
        Corpus(
            "bitexts.selected",
            "train",
            tuple(f"train/bitexts.selected/{p}" for p in _LIUM_PARTS),
            Archive(
                _LIUM,
                tuple(
                    m
                    for p in _LIUM_PARTS
                    for m in _plain(f"bitexts.selected/{p}", f"train/bitexts.selected/{p}", ".gz")
                ),
            ),
            pretokenized=True,
        ),
        *(
            Corpus(n, "train", (f"train/{n}",), note=_OFFLINE)
            for n in (
                "europarl-v7.first3000",
                "giga-fren.head30000",
                "giga-fren.after30000.max10words",
                "news-commentary-v8.first5000",
            )
        ),
        Corpus(
            "toy", "train", ("train/toy",), note="written by nmt_lib.data.fixtures.write_toy_wmt"
        ),
        # An in-domain test set: Europarl pairs from line 1,000,000 on, which no profile here reads
        # (lite's 400,000 training pairs stop before line 400,000 of Europarl: heldout.check_unread)
        Corpus(
            "europarl-v7.heldout",
            "test",
            (),
            note="3,003 pairs held out of europarl-v7.fr-en (nmt_lib.data.heldout)",
            plain=True,
            drawn=Draw("europarl-v7.fr-en", 1_000_000, 3003, 2014),
        ),
        *_multi30k(),
    )
}


_KIND_NAMES = {"train": "training corpus", "dev": "dev set", "test": "test set"}


def get_corpus(name: str, kind: str | None = None, registry: dict[str, Corpus] | None = None):
    """The registered corpus ``name``; an unknown name is a DataError listing the known ones."""
    registry = CORPORA if registry is None else registry
    c = registry.get(name)
    if c is None or (kind is not None and c.kind != kind):
        known = sorted(n for n, x in registry.items() if kind is None or x.kind == kind)
        what = _KIND_NAMES.get(kind, "corpus")
        raise DataError(f"unknown {what} {name!r}; known: {', '.join(known)}")
    return c


def how_to_get(c: Corpus, data_dir: Path) -> str:
    """Where a corpus comes from and the command that fetches it."""
    if c.archive is None:
        return f"{c.name} is {c.note}"
    return (
        f"it comes from {c.archive.url}; fetch it with: "
        f"python -m nmt_lib.data.download --data-dir {data_dir} {c.name}"
    )


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
    drawn: Draw | None = None  # held out of a training corpus: src and ref are in the data cache


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

    def eval_files(name, kind):
        return _eval_files(name, kind, data_dir, langs, missing, cfg.resolved_cache_dir())

    test = eval_files(cfg.test, "test")
    dev = tuple(part for n in cfg.dev for part in eval_files(n, "dev"))
    views = tuple((n, eval_files(n, "test")) for n in cfg.views)
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
    """The held-out test set ``c``, drawn from its training corpus into ``cache/heldout`` (once)."""
    from .heldout import written  # it reads with the readers, which import this module

    source = _train_files(c.drawn.source, data_dir, langs, missing)
    if c.drawn.source in missing:
        return EvalFiles(c.name, Path(), Path(), True, c.drawn)
    src, ref = written(c.name, *source.pairs[0], c.drawn, langs, cache / "heldout")
    return EvalFiles(c.name, src, ref, True, c.drawn)


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
            f"  {_KIND_NAMES[c.kind]} {name}: {', '.join(paths)}",
            f"    {how_to_get(c, data_dir)}",
        ]
    fetch = [n for n, (c, _) in missing.items() if c.archive is not None]
    if len(fetch) > 1:
        lines.append(
            f"fetch all: python -m nmt_lib.data.download --data-dir {data_dir} {' '.join(fetch)}"
        )
    return DataError("\n".join(lines))
