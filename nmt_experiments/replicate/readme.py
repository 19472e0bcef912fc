"""The README's first-screen summary of the committed results (:func:`readme_results`, written
between :data:`README_MARKS` by :func:`write_readme`), and the two sentences it is made of that the
chapters also use: a comparison ranked with its ties (:func:`ranked_text`); the claims counted by
verdict are :func:`nmt_experiments.core.claims.verdict_counts`."""

from __future__ import annotations

import csv

from nmt_lib.config import home, run_from_dict
from nmt_lib.io import read_json

from ..core.claims import verdict_counts
from ..core.markdown import markdown_table
from ..core.results import convergence_text, results_path, run_dir, stale_text
from ..core.tables import seeds_text
from . import rerun

#: The lines around the README's results summary (:func:`readme_results`).
README_MARKS = (
    "<!-- results: python -m nmt_experiments.replicate --readme -->",
    "<!-- /results -->",
)


def ranked_text(rows: list[dict]) -> str:
    """``rows`` (a comparison table: ``model``, ``All``, ``All sd``) ranked by BLEU, as a sentence:
    neighbours whose difference is within the spread over seeds are a tie, joined by ``≈`` (the
    spread: the larger of the two models' standard deviations; a model with one seed has the
    median of the others')."""
    sds = sorted(float(r["All sd"]) for r in rows if r.get("All sd") not in (None, ""))
    typical = sds[len(sds) // 2] if sds else 0.0
    sd = lambda r: typical if r.get("All sd") in (None, "") else float(r["All sd"])  # noqa: E731
    ranked = sorted(rows, key=lambda r: -float(r["All"]))
    text = f"{ranked[0]['model']} {float(ranked[0]['All']):.2f}"
    for a, b in zip(ranked, ranked[1:], strict=False):
        tie = float(a["All"]) - float(b["All"]) < max(sd(a), sd(b))
        text += f"{' ≈ ' if tie else ', '}{b['model']} {float(b['All']):.2f}"
    return text


def readme_results(profile: str = "lite") -> str:
    """The README's first-screen summary of the committed results: ``profile``'s Table 1 beside the
    paper's, its claims' verdicts, and the `gpu` run where there is one. Written into README.md by
    ``python -m nmt_experiments.replicate --readme``; a test checks that the README holds exactly this."""
    out = results_path(profile)
    manifest = read_json(out / "manifest.json")
    with open(out / "table1.csv", encoding="utf-8") as f:
        t1 = [r for r in csv.DictReader(f) if r["All"]]
    with open(out / "claims.csv", encoding="utf-8") as f:
        verdicts = [r["verdict"] for r in csv.DictReader(f)]
    hours = sum(  # training (a resumed run's earlier sessions included) and evaluation
        read_json(run_dir(out, name) / "train_summary.json")["hours"] + w["evaluate_s"] / 3600
        for name, w in manifest["wall_seconds"].items()
    )
    rows = [
        {"model": r["model"], f"BLEU, `{profile}`": r["All"], "BLEU, the paper": r["paper All"]}
        for r in t1
    ]
    seeds = f" ({seeded}: the table gives their mean)" if (seeded := seeds_text(out)) else ""
    hw = manifest["hardware"]
    where = (
        f"{hw['cpu_model'] or hw['cpu']}, {'/'.join(sorted(set(hw['precision_per_run'].values())))}"
    )
    if elsewhere := rerun.hours_text(out, hours):
        where += f"; {elsewhere}"
    fixed = ":"
    if rerun.budget_text(out, profile):
        fixed = (
            ". Each run's budget is the number of updates its committed run made, so a rerun "
            "trains the same updates on any machine:"
        )
    text = [
        f"What the committed `{profile}` results show (newstest2014, tokenized BLEU as the paper's "
        f"Table 1). The five models{seeds}, smaller than the paper's and trained with the recipe "
        f"of the book's budget study, took {hours:.1f} CPU-core hours to train and evaluate "
        f"({where}){fixed}",
        "",
        markdown_table(rows, fit=None).rstrip("\n"),
        "",
        f"Of the paper's {len(verdicts)} claims that the book tests: {verdict_counts(verdicts)} "
        '(the chapter "Experiments" gives each verdict, its interval and its reason).',
    ]
    return "\n".join(text + _compare_summary() + _multi30k_summary() + _gpu_summary()) + "\n"


def write_readme() -> None:
    """README.md with its results summary (between :data:`README_MARKS`) rewritten:
    :func:`readme_results` (``python -m nmt_experiments.replicate --readme``)."""
    readme = home() / "README.md"
    text = readme.read_text(encoding="utf-8")
    start, end = README_MARKS
    head, rest = text.split(start + "\n", 1)
    tail = rest.split(end, 1)[1]
    readme.write_text(f"{head}{start}\n{readme_results()}{end}{tail}", encoding="utf-8")


def _compare_summary() -> list[str]:
    """The README summary's lines on the comparison (``results/compare/``), where it is committed."""
    compare = results_path("compare")
    if not (compare / "claims.csv").is_file():
        return []
    with open(compare / "comparison.csv", encoding="utf-8") as f:
        ranked = ranked_text(list(csv.DictReader(f)))
    with open(compare / "claims.csv", encoding="utf-8") as f:
        judged = [r["verdict"] for r in csv.DictReader(f)]
    cmp = read_json(compare / "manifest.json")
    t = run_from_dict(cmp["configs"][cmp["runs"][0]]).train
    budget = (
        f"the same {t.max_updates:,} updates each, with its own recipe chosen on dev"
        if t.max_updates
        else f"the same {60 * t.max_hours:.0f} minutes of one core each (equal time, "
        "which measures our implementations as much as the architectures), with "
        "lite's recipe"
    )
    return [
        "",
        "Beside them, on the same data and sizes, the models before and after the paper "
        f'(`results/compare/`, the book\'s part "Before and after the paper"), {budget}: '
        + ranked
        + " (≈: a tie, within the spread over seeds)"
        + f". Of the {len(judged)} claims that comparison tests: {verdict_counts(judged)}.",
    ]


def _multi30k_summary() -> list[str]:
    """The README summary's lines on the Multi30k testbed (``results/multi30k/``), where its claims
    are committed: the ranking on test_2016_flickr (the tutorials' set) and its verdicts."""
    m30k = results_path("multi30k")
    if not (m30k / "claims.csv").is_file():
        return []
    part = "test_2016_flickr"
    with open(m30k / "comparison.csv", encoding="utf-8") as f:
        rows = [
            {"model": r["model"], "All": r[f"{part} BLEU"], "All sd": r[f"{part} BLEU sd"]}
            for r in csv.DictReader(f)
        ]
    with open(m30k / "claims.csv", encoding="utf-8") as f:
        judged = [r["verdict"] for r in csv.DictReader(f) if r["test set"] == part]
    return [
        "",
        "On a second testbed, Multi30k En→Fr (29,000 image "
        'captions; `results/multi30k/`, the book\'s section "Two testbeds, claim by claim"), '
        f"{convergence_text(m30k)}, each model with its own recipe"
        + (f" ({stale})" if (stale := stale_text(m30k, "studies/multi30k")) else "")
        + f", {part} tokenized "
        "BLEU: "
        + ranked_text(rows)
        + f". Of the {len(judged)} claims judged on {part}: {verdict_counts(judged)}.",
    ]


def _gpu_summary() -> list[str]:
    """The README summary's line on the `gpu` run (``results/gpu/``), where it is committed."""
    gpu = results_path("gpu")
    if not (gpu / "manifest.json").is_file():
        return []
    (name,) = read_json(gpu / "manifest.json")["runs"]
    b = read_json(run_dir(gpu, name) / "bleu.json")
    summ = read_json(run_dir(gpu, name) / "train_summary.json")
    return [
        "",
        f"At the paper's sizes, {name} trained for {60 * summ['hours']:.0f} minutes of one "
        f"{summ['device']} scores {b['all']['tok']['score']:.2f} (`results/gpu/`).",
    ]
