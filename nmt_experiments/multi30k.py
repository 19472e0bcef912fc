"""The comparison on the Multi30k testbed (``results/multi30k/``, the study profile
``studies/multi30k.toml``): each model's BLEU on each Flickr test set, and the claims judged on
each of them by the rules of :mod:`nmt_experiments.claims`.

Its test set holds both Flickr sets (``multi30k.test_flickr``); each run's ``bleu.json`` has the
BLEU of each (``parts``) and its ``bleu_by_length.json`` each sentence's set, so that a claim is
judged on one set's sentences alone (:meth:`nmt_experiments.claims.Judge.of`). Its sentences are
short (about 12 words, the longest about 40), so Figure 2's claims are restated for that range:
BLEU on sentences of :data:`LONG` words or more against those of fewer than :data:`SHORT`.

``python -m nmt_experiments.multi30k [--results-dir DIR]`` writes ``comparison.csv`` and
``claims.csv`` (with their ``.md``) and Figure 2 on each Flickr set into the results directory.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from nmt_lib import bleu
from nmt_lib.config import PROFILE_DIR, home, load_profile
from nmt_lib.io import read_json

from . import comparison, plots
from .claims import FLOOR, MARGIN
from .markdown import write_table
from .results import run_dir

RESULTS = home() / "results" / "multi30k"
PROFILE = PROFILE_DIR / "studies" / "multi30k.toml"
#: The comparison on WMT'14 (lite's data and sizes, 3,000 updates): the other testbed.
WMT14 = home() / "results" / "compare"

#: The Flickr test sets, each judged on its own: 2016's is the tutorials' set.
PARTS = ("multi30k.test_2016_flickr", "multi30k.test_2017_flickr")

#: Figure 2's lengths restated for Multi30k's short captions (source words).
SHORT, LONG = 10, 20
#: Figure 2's buckets for the captions: 4 words wide, the last open (24 words or more).
EDGES = (0, 4, 8, 12, 16, 20, 24)


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


def curves(out: Path = RESULTS, part: str = PARTS[0]) -> dict:
    """Figure 2 on one Flickr set: ``{model: (bucket centres, BLEU: the mean over its seeds)}``,
    buckets of :data:`EDGES` (the open last one drawn at its lower edge + 2)."""
    found = {}
    for model, runs in comparison.models(out).items():
        per = []
        for r in runs:
            d = read_json(run_dir(out, r) / "bleu_by_length.json")
            mine = np.array(d["parts"]) == part
            stats, lengths = np.array(d["stats_tok"])[mine], np.array(d["src_len"])[mine]
            per.append(bleu.bleu_by_length(stats, lengths, True, EDGES))
        x = [
            (b["lo"] + (b["hi"] if b["hi"] is not None else b["lo"] + 3)) / 2 + 0.5 for b in per[0]
        ]
        y = [
            float(np.mean([np.nan if p[k]["bleu"] is None else p[k]["bleu"] for p in per]))
            for k in range(len(x))
        ]
        found[model] = (x, y)
    return found


def figure(out: Path = RESULTS, part: str = PARTS[0]):
    """Figure 2 on one Flickr set (:func:`curves`): models with attention solid, without dashed."""
    found = comparison.models(out)
    styles = {
        m: {"ls": "-" if comparison.has_attention(out, runs[0]) else "--", "color": f"C{k}"}
        for k, (m, runs) in enumerate(found.items())
    }
    title = f"Multi30k, {part.removeprefix('multi30k.')}"
    return plots.fig2_bleu_by_length(
        curves(out, part), xmax=EDGES[-1] + 4, title=title, styles=styles
    )


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


def trained(out: Path = RESULTS, profile=PROFILE) -> tuple[int, int]:
    """How many of the study profile's runs are evaluated in ``out``, and how many it has."""
    names = list(load_profile(profile).runs)
    return sum((run_dir(out, n) / "bleu.json").is_file() for n in names), len(names)


def claim_key(claim: str) -> str:
    """A claim as both testbeds state it: Figure 2's long sentences named without their length
    (50 words or more on WMT'14, :data:`LONG` on Multi30k)."""
    return re.sub(r"on sentences of \d+ words or more", "on its longest sentences", claim)


def _read_claims(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def side_by_side(wmt: Path = WMT14, out: Path = RESULTS) -> list[dict]:
    """Each claim of the comparison with its verdict on each testbed, from the committed
    ``claims.csv`` of both: WMT'14 (``wmt``) and each Flickr test set of Multi30k (``out``);
    ``decided`` counts the testbeds on which the claim is decided (reproduced, not reproduced
    or the opposite). A claim one testbed does not judge is blank there."""
    rows: dict[str, dict] = {}
    for r in _read_claims(wmt / "claims.csv"):
        rows[claim_key(r["claim"])] = {"claim": claim_key(r["claim"]), "WMT'14": r["verdict"]}
    for r in _read_claims(out / "claims.csv"):
        row = rows.setdefault(claim_key(r["claim"]), {"claim": claim_key(r["claim"])})
        row[f"Multi30k {r['test set']}"] = r["verdict"]
    cols = ["WMT'14", *(f"Multi30k {p.removeprefix('multi30k.')}" for p in PARTS)]
    return [
        {
            **{c: row.get(c) for c in ["claim", *cols]},
            "decided": sum(row.get(c) not in (None, "not testable here") for c in cols),
        }
        for row in rows.values()
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nmt_experiments.multi30k", description=__doc__)
    ap.add_argument("--results-dir", type=Path, default=RESULTS)
    out = ap.parse_args(argv).results_dir
    write_table(out, "comparison", table(out), note(out))
    write_table(out, "claims", claims(out), note(out))
    for p in PARTS:
        fig = figure(out, p)
        plots.save(fig, out / f"fig2_bleu_by_length.{p.removeprefix('multi30k.')}.png")
        plt.close(fig)
    print(f"[multi30k] wrote comparison and claims into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
