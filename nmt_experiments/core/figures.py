"""The paper's figures, ours beside the paper's, built from ``results/<profile>/`` alone: Figure 2's
curves (:func:`fig2_curves`), Figure 3's panels (:func:`fig3_panels`, one ``attention.json`` record
as words and weights: :func:`attention_panel`) and Appendix C's long sentences
(:func:`long_sentences`). The tables are :mod:`nmt_experiments.core.tables`."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from nmt_lib import bleu
from nmt_lib.io import read_json
from nmt_lib.paper import APPENDIX_C_PREFIXES, MODELS

from .results import run_dir, scored_dir, seed_groups


def fig2_curves(
    out: Path, models=MODELS[:4], view: str | None = None, groups: dict | None = None
) -> tuple[dict, list[int]]:
    """Figure 2's curves from the per-sentence BLEU statistics of each run: ``{model: (bucket
    centres, BLEU: the mean over its seeds)}`` and the bucket edges. Buckets by source length,
    width 10 as the paper's axis suggests; width 2 when the test set has no sentence of 40 words or
    more (toy data). ``view``: on that test set of ``data.views`` instead. ``groups``: ``{model:
    its runs}`` (default: the manifest's, :func:`~nmt_experiments.core.results.seed_groups`)."""
    curves, edges, groups = {}, [], groups or seed_groups(out)
    for name in models:
        per = []
        for run in groups[name]:
            d = read_json(scored_dir(out, run, view) / "bleu_by_length.json")
            width = 10 if max(d["src_len"]) >= 40 else 2
            edges = list(range(0, max(d["src_len"]) + width + 1, width))
            buckets = bleu.bleu_by_length(np.array(d["stats_tok"]), d["src_len"], True, edges)
            per.append(
                [((b["lo"] + b["hi"] + 1) / 2, b["bleu"]) for b in buckets if b["n"] and b["hi"]]
            )
        curves[name] = (
            [x for x, _ in per[0]],
            [float(np.mean([p[k][1] for p in per])) for k in range(len(per[0]))],
        )
    return curves, edges


def fig3_panels(
    out: Path, model: str = "RNNsearch-50", seeds: bool = False
) -> tuple[list[dict], bool]:
    """Figure 3's panels from ``attention.json`` of ``model``: the paper's sentences (b)-(d) when
    the test set has them (then the flag is True), preceded by (a), the paper's "arbitrary
    sentence", where the run translated it; else the three sentences chosen by the paper's rule.
    With ``seeds``, each panel is the translation, among the runs of ``model``'s seeds
    (:func:`seed_groups`), with the smallest share of ``<unk>`` (the first run on a tie), and its
    title names that run: a panel whose translation is all ``<unk>`` shows no alignment."""
    runs = seed_groups(out).get(model, [model]) if seeds else [model]
    per_run = [read_json(run_dir(out, r) / "attention.json") for r in runs]  # paper.FIG3_SOURCES..
    use_paper = all(r["found"] and r.get("alpha") for r in per_run[0][1:4])
    chosen = []
    for k in range(4) if use_paper else range(4, 7):
        options = [(recs[k], run) for recs, run in zip(per_run, runs, strict=True)]
        options = [o for o in options if o[0].get("alpha")]
        if not options:
            continue
        r, run = min(options, key=lambda o: unk_share(o[0]["hyp_tokens"]))
        title = f"({'abcd'[k]})" if use_paper else f"test sentence {r['index'] + 1}"
        chosen.append((f"{title}, {run}" if seeds else title, r))
    return [{**attention_panel(r), "title": title} for title, r in chosen], use_paper


def unk_share(tokens: list[str]) -> float:
    """The share of ``tokens`` that are ``<unk>`` (0 for none)."""
    return sum(t == "<unk>" for t in tokens) / max(len(tokens), 1)


def attention_panel(record: dict) -> dict:
    """One ``attention.json`` record as words and weights: ``src``, ``trg`` (EOS shown as
    ``<end>``, as the paper labels it; Moses' escapes undone) and ``alpha``."""
    word = lambda t: "<end>" if t == "</s>" else html.unescape(t)  # noqa: E731
    return {
        "src": [word(t) for t in record["src_tokens"]],
        "trg": [word(t) for t in record["hyp_tokens"]],
        "alpha": record["alpha"],
    }


def long_sentences(out: Path, test, models=("RNNencdec-50", "RNNsearch-50")) -> tuple[str, bool]:
    """Appendix C: the paper's long test sentences (or, if the test set lacks them, its three
    longest), with the reference and each model's translation, as Markdown; and whether they
    are the paper's."""
    idx = [
        next((i for i, s in enumerate(test.src_raw) if s.startswith(p)), None)
        for p in APPENDIX_C_PREFIXES
    ]
    paper = all(i is not None for i in idx)
    if not paper:
        idx = sorted(range(len(test)), key=lambda i: -len(test.src_tok[i]))[:3]
    hyp = {
        m: (run_dir(out, m) / "hyp.test.detok.txt").read_text(encoding="utf-8").splitlines()
        for m in models
    }
    esc = lambda text: html.escape(text, quote=False)  # noqa: E731  <unk> is text, not a tag
    lines = []
    for k, i in enumerate(idx, 1):
        lines += [f"{k}. **Source** ({len(test.src_tok[i])} words): {esc(test.src_raw[i])}", ""]
        lines += [f"   - **Reference**: {esc(test.ref_raw[i])}"]
        lines += [f"   - **{m}**: {esc(hyp[m][i])}" for m in models]
        lines += [""]
    return "\n".join(lines), paper
