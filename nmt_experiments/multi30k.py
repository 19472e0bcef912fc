"""The comparison on the Multi30k testbed (``results/multi30k/``, the study profile
``studies/multi30k.toml``): each model's BLEU on each Flickr test set, and the claims judged on
each of them by the rules of :mod:`nmt_experiments.claims`.

Its test set holds both Flickr sets (``multi30k.test_flickr``); each run's ``bleu.json`` has the
BLEU of each (``parts``) and its ``bleu_by_length.json`` each sentence's set, so that a claim is
judged on one set's sentences alone (:meth:`nmt_experiments.claims.Judge.of`). Its sentences are
short (about 12 words, the longest about 40), so Figure 2's claims are restated for that range:
BLEU on sentences of :data:`LONG` words or more against those of fewer than :data:`SHORT`.

``python -m nmt_experiments.multi30k [--results-dir DIR]`` writes ``comparison.csv`` and
``claims.csv`` (with their ``.md``) into the results directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from nmt_lib.config import home
from nmt_lib.io import read_json

from . import comparison
from .claims import FLOOR, MARGIN
from .markdown import write_table
from .results import run_dir

RESULTS = home() / "results" / "multi30k"

#: The Flickr test sets, each judged on its own: 2016's is the tutorials' set.
PARTS = ("multi30k.test_2016_flickr", "multi30k.test_2017_flickr")

#: Figure 2's lengths restated for Multi30k's short captions (source words).
SHORT, LONG = 10, 20


def table(out: Path = RESULTS) -> list[dict]:
    """One row per model: its seeds and, on each Flickr test set, tokenized and detokenized
    (sacreBLEU) BLEU, the mean over seeds."""
    rows = []
    for model, runs in comparison.models(out).items():
        parts = [read_json(run_dir(out, r) / "bleu.json")["parts"] for r in runs]
        row = {"model": model, "seeds": len(runs)}
        for p in PARTS:
            year = p.removeprefix("multi30k.")
            for kind in ("tok", "detok"):
                score = np.mean([b[p][kind]["score"] for b in parts])
                row[f"{year} {'sacreBLEU' if kind == 'detok' else 'BLEU'}"] = round(float(score), 2)
        rows.append(row)
    return rows


def claims(out: Path = RESULTS, n_samples: int = 1000) -> list[dict]:
    """The comparison's claims (:func:`nmt_experiments.comparison.claims`) on each Flickr test
    set, Figure 2's with :data:`SHORT` and :data:`LONG`; a ``test set`` column says which."""
    return [
        {"test set": p.removeprefix("multi30k."), **row}
        for p in PARTS
        for row in comparison.claims(out, n_samples, SHORT, LONG, part=p)
    ]


def note(out: Path = RESULTS) -> str:
    """The tables' note: the testbed, the budget, the lengths and the rules."""
    return (
        "Profile `multi30k` (Multi30k task 1 En→Fr; test_2016_flickr and test_2017_flickr, 1,000 "
        "captions each, tokenized BLEU unless sacreBLEU), every model trained to convergence (val "
        "NLL with patience). Seeds: the mean over them. 95% intervals: 1000 resamples of the seeds "
        f"and of the test set's sentences. Margin: {MARGIN:g} BLEU; learning floor: {FLOOR:g} "
        f"BLEU. Figure 2 restated for captions: sentences of {LONG} words or more against those of "
        f"fewer than {SHORT}."
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nmt_experiments.multi30k", description=__doc__)
    ap.add_argument("--results-dir", type=Path, default=RESULTS)
    out = ap.parse_args(argv).results_dir
    write_table(out, "comparison", table(out), note(out))
    write_table(out, "claims", claims(out), note(out))
    print(f"[multi30k] wrote comparison and claims into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
