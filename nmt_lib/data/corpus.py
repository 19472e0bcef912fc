"""The data files: a registry of known corpora (:data:`CORPORA`);
:mod:`nmt_lib.data.files` finds them in a data directory, :mod:`nmt_lib.data.readers` reads them.

A WMT'14 data directory mirrors the official WMT'14 downloads (PAPER.md §1, paper §4.1)::

    test-full/newstest2014-fren-{src,ref}.{en,fr}.sgm    test: newstest2014, 3003 sentences
    dev/newstest2012-{src,ref}.{en,fr}.sgm               dev part 1 (3003)
    dev/newstest2013-{src,ref}.{en,fr}.sgm               dev part 2 (3000)
    train/<corpus>.{en,fr}[.gz|.xz]                      line-aligned training corpora

The second testbed, Multi30k task 1 (Elliott et al. 2016; image captions, CC BY), is a directory of
its own, found by the same rules, holding the release's plain-text files (``data/task1/raw/`` of
github.com/multi30k/dataset)::

    multi30k.task1.train.{en,fr}               train (29,000)      corpus ``multi30k.train``
    multi30k.task1.val.{en,fr}                 dev (1,014)         ``multi30k.val``
    multi30k.task1.test_2016_flickr.{en,fr}    test (1,000)        ``multi30k.test_2016_flickr``
    multi30k.task1.test_2017_flickr.{en,fr}    test (1,000)        ``multi30k.test_2017_flickr``

and ``multi30k.test_flickr``, both Flickr test sets in that order (its sentences keep their part's
name: BLEU per part). Its dev and test sets are plain text (``Corpus.plain``). A test set may also
be drawn from a training corpus's unread lines (``Corpus.drawn``, :mod:`nmt_lib.data.heldout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    """A test set held out of ``source``: ``size`` pairs drawn with ``seed`` from line ``start`` on."""

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
        # in-domain: Europarl from line 1,000,000 on, which no profile reads (heldout.check_unread)
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


KIND_NAMES = {"train": "training corpus", "dev": "dev set", "test": "test set"}


def get_corpus(name: str, kind: str | None = None, registry: dict[str, Corpus] | None = None):
    """The registered corpus ``name``; an unknown name is a DataError listing the known ones."""
    registry = CORPORA if registry is None else registry
    c = registry.get(name)
    if c is None or (kind is not None and c.kind != kind):
        known = sorted(n for n, x in registry.items() if kind is None or x.kind == kind)
        what = KIND_NAMES.get(kind, "corpus")
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
