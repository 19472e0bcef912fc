"""Whether a dictionary helps the ``<unk>`` replacement (:func:`unk_dictionary`): a profile's test
translations with their copied source words looked up in a dictionary counted on its training
pairs, beside the plain replacement's (``python -m nmt_experiments.replicate --unk-dictionary``)."""

from __future__ import annotations

import sys
from pathlib import Path

from nmt_lib.data import prepare, train_pairs
from nmt_lib.io import read_json, write_json
from nmt_lib.profile import load_runs as load
from nmt_lib.scoring import score
from nmt_lib.unk import UNK_WORD, dictionary, through

from ..core.results import results_path, run_dir

#: What :func:`unk_dictionary` writes into a results directory.
UNK_DICTIONARY = "unk_dictionary.json"


def _lines(path: Path) -> list[list[str]]:
    return [x.split() for x in path.read_text(encoding="utf-8").splitlines()]


def unk_dictionary(
    profile, results_dir=None, data_dir=None, min_pairs=2, min_dice=0.3
) -> dict | None:
    """Whether a dictionary helps the ``<unk>`` replacement (:func:`nmt_lib.unk.dictionary`),
    measured on the runs of ``profile`` whose test translations have their ``<unk>`` replaced
    (``hyp.test.unk_replaced.tok.txt``): the dictionary is counted on the training pairs of the
    first such run's data for the source words that any of them copied, and each run's test BLEU
    with its copied words looked up in it is set beside the plain replacement's. Writes
    ``unk_dictionary.json`` into the results directory and returns it (None, writing nothing, where
    no run has its ``<unk>`` replaced). The runs share their target shortlist (a profile's runs
    share one: :mod:`nmt_lib.data`, step 4)."""
    prof = load(profile, data_dir) if isinstance(profile, str) else profile
    out = results_path(prof.name, results_dir)
    runs = _replaced_runs(out)
    if not runs:
        return None
    cfg = prof.runs[next(iter(runs))].data
    prep = prepare(cfg)
    copied = {a for before, after in runs.values() for (a,) in _copies(before, after)}
    table = dictionary(train_pairs(cfg), copied, prep.trg_vocab, min_pairs, min_dice)
    idx, lang = range(len(prep.test)), cfg.trg_lang
    scores = {}
    for name, (before, after) in runs.items():
        looked = [through(b, a, table) for b, a in zip(before, after, strict=True)]
        n = _copies(before, after, looked)
        scores[name] = {
            "copied": len(n),
            "looked_up": sum(a != x for a, x in n),
            "unk_replaced": score(after, prep.test, idx, lang),
            "dictionary": score(looked, prep.test, idx, lang),
        }
    result = {
        "counted_on": {
            "train": list(cfg.train),
            "max_len": cfg.max_len,
            "max_train_pairs": cfg.max_train_pairs,
            "trg_words": cfg.trg_words,
        },
        "min_pairs": min_pairs,
        "min_dice": min_dice,
        "copied_words": len(copied),
        "entries": table,
        "runs": scores,
    }
    write_json(out / UNK_DICTIONARY, result)
    return result


def _replaced_runs(out: Path) -> dict[str, tuple[list, list]]:
    """``{run: (its test translations, the same with their <unk> replaced)}`` (tokens) of the runs
    of ``out`` that have both."""
    runs = {}
    for name in read_json(out / "manifest.json")["runs"]:
        d = run_dir(out, name)
        if (d / "hyp.test.unk_replaced.tok.txt").is_file():
            runs[name] = (
                _lines(d / "hyp.test.tok.txt"),
                _lines(d / "hyp.test.unk_replaced.tok.txt"),
            )
    return runs


def _copies(before: list[list[str]], after: list[list[str]], *more) -> list[tuple[str, ...]]:
    """At each ``<unk>`` of ``before`` that ``after`` replaced, in order: ``after``'s word and the
    words of ``more`` (translations of the same lengths) at the same place."""
    return [
        (a, *m)
        for hb, ha, *hm in zip(before, after, *more, strict=True)
        for b, a, *m in zip(hb, ha, *hm, strict=True)
        if b == UNK_WORD and a != UNK_WORD
    ]


def print_unk_dictionary(profile, results_dir, data_dir) -> int:
    """``--unk-dictionary``: :func:`unk_dictionary`, and each run's two scores printed."""
    r = unk_dictionary(profile, results_dir, data_dir)
    if r is None:
        print(
            f"[replicate] no run of {profile} has its <unk> replaced "
            "(hyp.test.unk_replaced.tok.txt): nothing to measure",
            file=sys.stderr,
        )
        return 1
    for name, x in r["runs"].items():
        print(
            f"[replicate] {name}: <unk> replaced {x['unk_replaced']['tok']['score']:.2f}, "
            f"through the dictionary {x['dictionary']['tok']['score']:.2f} "
            f"({x['looked_up']} of {x['copied']} copied words looked up)"
        )
    return 0
