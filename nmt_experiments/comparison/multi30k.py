"""The comparison on the Multi30k testbed (``results/multi30k/``, the study profile
``studies/multi30k.toml``): each model's BLEU on each Flickr test set, and the claims judged on
each of them by the rules of :mod:`nmt_experiments.core.claims`.

Its test set holds both Flickr sets (``multi30k.test_flickr``); each run's ``bleu.json`` has the
BLEU of each (``parts``) and its ``bleu_by_length.json`` each sentence's set, so that a claim is
judged on one set's sentences alone (:meth:`nmt_experiments.core.judge.Judge.of`). Its sentences are
short (about 12 words, the longest about 40), so Figure 2's claims are restated for that range:
BLEU on sentences of :data:`LONG` words or more against those of fewer than :data:`SHORT`.

``python -m nmt_experiments.comparison.multi30k [--out DIR]`` writes ``comparison.csv`` and
``claims.csv`` (with their ``.md``), Figure 2 on each Flickr set and each attention model's
alignments (Figure 3) into the results directory.
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

from ..core import alignment, figures, plots, tables
from ..core.claims import FLOOR, MARGIN, NOT_TESTABLE, verdict_counts
from ..core.judge import Judge
from ..core.markdown import write_table
from ..core.options import add_out
from ..core.results import convergence_text, run_dir, stale_text
from . import runs as comparison
from . import verdicts

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
    """One row per model: its seeds and, on each Flickr test set, tokenized BLEU (the mean over
    seeds and their standard deviation) and detokenized BLEU (sacreBLEU, the mean)."""
    rows = []
    for model, runs in comparison.models(out).items():
        parts = [read_json(run_dir(out, r) / "bleu.json")["parts"] for r in runs]
        row = {"model": model, "seeds": len(runs)}
        for p in PARTS:
            year = p.removeprefix("multi30k.")
            sd = tables.mean_sd([b[p]["tok"]["score"] for b in parts])[1]
            row[f"{year} BLEU"] = tables.mean_of([b[p]["tok"]["score"] for b in parts])
            row[f"{year} BLEU sd"] = None if sd is None else round(sd, 2)
            row[f"{year} sacreBLEU"] = tables.mean_of([b[p]["detok"]["score"] for b in parts])
        rows.append(row)
    return rows


def claims(out: Path = RESULTS, n_samples: int = 1000) -> list[dict]:
    """The comparison's claims (:func:`nmt_experiments.comparison.verdicts.claims`) on each Flickr test
    set, Figure 2's with :data:`SHORT` and :data:`LONG`; a ``test set`` column says which."""
    return [
        {"test set": p.removeprefix("multi30k."), **row}
        for p in PARTS
        for row in verdicts.claims(out, n_samples, SHORT, LONG, part=p)
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


def attention_models(out: Path = RESULTS) -> dict[str, str]:
    """``{attention model: its first seed's run}``."""
    first = {m: runs[0] for m, runs in comparison.models(out).items()}
    return {m: r for m, r in first.items() if comparison.has_attention(out, r)}


def attention_rows(out: Path = RESULTS) -> list[dict]:
    """The alignments of each attention model's first seed, summed up
    (:func:`nmt_experiments.core.alignment.attention_rows`)."""
    return alignment.attention_rows(out, attention_models(out))


def alignment_panels(out: Path = RESULTS, sentences: int = 2) -> list[dict]:
    """Figure 3 on Multi30k: the alignments of each attention model's first seed on the
    ``sentences`` shortest test captions among those whose attention every run stored (the
    paper's rule draws them: ``attention.json``), the same captions for every model."""
    first = attention_models(out)
    records = {m: read_json(run_dir(out, r) / "attention.json") for m, r in first.items()}
    some = next(iter(first))
    drawn = [r for r in records[some] if r["index"] is not None and r.get("alpha")]
    chosen = sorted(drawn, key=lambda r: (len(r["src_tokens"]), r["index"]))[:sentences]
    parts = read_json(run_dir(out, first[some]) / "bleu_by_length.json")["parts"]
    panels = []
    for m in first:
        by_index = {r["index"]: r for r in records[m] if r["index"] is not None}
        for r in chosen:
            part = parts[r["index"]]  # the caption's Flickr set, and its line there
            where = (
                f"{part.removeprefix('multi30k.')}, caption {parts[: r['index']].count(part) + 1}"
            )
            title = f"{m}\n{where}"
            panels.append({**figures.attention_panel(by_index[r["index"]]), "title": title})
    return panels


def alignments(out: Path = RESULTS, sentences: int = 2):
    """:func:`alignment_panels` drawn as Figure 3, one row per attention model."""
    return plots.fig3_alignments(alignment_panels(out, sentences), ncols=sentences, cell=0.16)


def below_floor(out: Path = RESULTS, part: str = PARTS[0]) -> dict[str, float]:
    """The models below the learning floor on one Flickr set, with their BLEU on its captions of
    fewer than :data:`nmt_experiments.core.claims.SHORT` words (the floor's measure)."""
    groups = comparison.models(out)
    return Judge.of(out, groups, n_samples=1, part=part).below(list(groups))


def lesson(both: list[dict]) -> str:
    """What the two testbeds' verdicts say together (the rows of :func:`side_by_side`): how many
    claims each decides, which of those WMT'14 could not test Multi30k decides and how, and where
    the two Flickr sets, and the two testbeds, agree."""
    wmt, first, second = (c for c in both[0] if c not in ("claim", "decided"))
    decided = lambda r, c: r[c] not in (None, NOT_TESTABLE)  # noqa: E731
    opened = [r for r in both if not decided(r, wmt) and decided(r, first)]
    sets = [r for r in both if decided(r, first) and decided(r, second)]
    agree_sets = sum(r[first] == r[second] for r in sets)
    beds = [r for r in both if decided(r, wmt) and decided(r, first)]
    differ = [r for r in beds if r[wmt] != r[first]]
    text = (
        f"Of the {len(both)} claims, WMT'14 at its budget decides "
        f"{sum(decided(r, wmt) for r in both)}, Multi30k {sum(decided(r, first) for r in both)} on "
        f"{first.removeprefix('Multi30k ')} and {sum(decided(r, second) for r in both)} on "
        f"{second.removeprefix('Multi30k ')}. "
    )
    if opened:
        text += (
            f"Of those WMT'14 could not test, Multi30k's {first.removeprefix('Multi30k ')} decides "
            f"{len(opened)}: {verdict_counts([r[first] for r in opened])}. "
        )
    if sets:
        text += (
            f"Where both Flickr sets decide a claim, their verdicts agree on {agree_sets} of "
            f"{len(sets)}. "
        )
    if beds:
        text += f"Where both testbeds decide a claim, they agree on {len(beds) - len(differ)} of "
        text += f"{len(beds)}"
        shown = "; ".join(
            f"{r['claim']} ({r[wmt]} on WMT'14, {r[first]} on Multi30k)" for r in differ
        )
        text += f"; they differ on {shown}. " if differ else ". "
    return text


def note(out: Path = RESULTS) -> str:
    """The tables' note: the testbed, the budget, the lengths and the rules."""
    return (
        "Profile `multi30k` (Multi30k task 1 En→Fr; test_2016_flickr and test_2017_flickr, 1,000 "
        f"captions each, tokenized BLEU unless sacreBLEU), "
        f"{convergence_text(out) or 'each run trained until early stopping or its cap ended it'}. "
        + (f"{stale}. " if (stale := stale_text(out, PROFILE)) else "")
        + "Seeds: the mean over them. 95% intervals: 1000 resamples of the seeds "
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
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.comparison.multi30k", description=__doc__
    )
    add_out(ap, type=Path, default=RESULTS, help="default: results/multi30k")
    out = ap.parse_args(argv).out
    write_table(out, "comparison", table(out), note(out))
    write_table(out, "claims", claims(out), note(out))
    for p in PARTS:
        fig = figure(out, p)
        plots.save(fig, out / f"fig2_bleu_by_length.{p.removeprefix('multi30k.')}.png")
        plt.close(fig)
    fig = alignments(out)
    plots.save(fig, out / "fig3_alignments.png")
    plt.close(fig)
    print(f"[multi30k] wrote comparison and claims into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
