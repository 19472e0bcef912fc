"""What the comparison's models were trained with, beside what their papers had: the study's cost
in hours of one core (:func:`compute`), its second view, where compute is plentiful
(:func:`gpu_view`, ``results/gpu/compare/``), and its Transformer beside Vaswani et al.'s base
model: the recipe it was trained with (:func:`transformer_recipe`), the tokens it saw and its sizes
(:func:`transformer_footing`), and the sign of a model that has not learned, one opening for every
source (:func:`commonest_opening`)."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from nmt_lib.config import home
from nmt_lib.io import read_json

from ..core import tables
from ..core.claims import SHORT, short_bleu
from ..core.results import run_dir, tokens_per_update
from .runs import RESULTS, config, models, sentence_stats

#: Vaswani et al. (2017), the base model: 100,000 updates of about 25,000 target tokens (§5.1-5.2),
#: 6 layers of width 512 with 8 heads and feed-forward 2048, label smoothing 0.1 (§3, §5.4).
TRANSFORMER_BASE = {
    "updates": 100_000,
    "tokens": 25_000,
    "layers": 6,
    "m": 512,
    "heads": 8,
    "ff": 2048,
    "label_smoothing": 0.1,
    "warmup": 4_000,
}


def compute(out: Path = RESULTS) -> dict[str, float]:
    """What the study cost, in hours of one core (every run trains and decodes on one core): the
    recipe sweep's training and scoring on dev (``out/recipes``), its search settings' decoding of
    dev, and the comparison's training and evaluation. A run's training time is its checkpointed
    clock, summed over the sessions it resumed in (``train_summary.json``; the work an interruption
    lost after the last checkpoint is not counted). ``cores``: the machine's, one run on each."""

    def hours(d: Path) -> float:
        if not (d / "manifest.json").is_file():
            return 0.0
        manifest = read_json(d / "manifest.json")
        walls = {run: manifest["wall_seconds"].get(run, {}) for run in manifest["runs"]}
        return sum(
            read_json(run_dir(d, run) / "train_summary.json")["hours"]
            + sum(v for k, v in wall.items() if k != "train_s") / 3600
            for run, wall in walls.items()
        )

    search = out / "recipes" / "search.csv"
    text = search.read_text(encoding="utf-8") if search.is_file() else ""
    rows = csv.DictReader(text.splitlines())
    return {
        "sweep": hours(out / "recipes"),
        "search": sum(float(r["seconds"]) for r in rows) / 3600,
        "comparison": hours(out),
        "cores": read_json(out / "manifest.json")["hardware"]["cpu_count"],
    }


def compute_text(out: Path = RESULTS) -> str:
    """:func:`compute` as the book states it: the study's hours of one core, and of its machine."""
    cost = compute(out)
    total = cost["sweep"] + cost["search"] + cost["comparison"]
    h = cost["search"]
    search = f"{h:.1f}" if h >= 1 else f"{60 * h:.0f} minutes"
    return (
        f"The whole study took {total:.1f} hours of one core: {cost['sweep']:.1f} for the recipe "
        f"sweep, {search} for choosing the search settings and {cost['comparison']:.1f} "
        f"for the runs: about {total / cost['cores']:.1f} hours of the machine's "
        f"{cost['cores']} cores, one run on each."
    )


#: The comparison's GPU view (``studies/compare-gpu.toml``, ``bench/gpu_compare.sh``).
GPU_RESULTS = home() / "results" / "gpu" / "compare"


def gpu_view(out: Path = GPU_RESULTS) -> list[dict]:
    """The GPU view, one row per model: each trained for the same minutes of one GPU with its
    family's recipe, at the `gpu` profile's sizes: test BLEU (All, No-UNK, short sentences), dev
    NLL, parameters, updates, training tokens per second, minutes. Empty where no such run is
    committed."""
    if not (out / "manifest.json").is_file():
        return []
    rows = []
    for r in tables.comparison_table(out):
        stats, lengths = sentence_stats(out, [r["model"]])
        rows.append(
            {
                "model": r["model"],
                "All": round(r["All"], 2),
                "No UNK": None if r["No UNK"] is None else round(r["No UNK"], 2),
                f"All <{SHORT} words": round(short_bleu(stats, lengths), 2),
                "dev NLL": round(r["dev NLL"], 2),
                "parameters (M)": r["parameters (M)"],
                "updates": r["updates"],
                "train tok/s": None if r["train tok/s"] is None else round(r["train tok/s"]),
                "minutes": round(60 * r["hours"], 1),
            }
        )
    return rows


def commonest_opening(run: Path, words: int = 3) -> tuple[str, int, int]:
    """The commonest first ``words`` tokens of a run's test translations, how many translations
    begin with them, and how many there are: a model still at the language-model stage writes the
    same opening whatever the source."""
    hyps = (run / "hyp.test.tok.txt").read_text(encoding="utf-8").splitlines()
    opening, n = Counter(" ".join(h.split()[:words]) for h in hyps).most_common(1)[0]
    return opening, n, len(hyps)


def transformer_footing(out: Path = RESULTS) -> str:
    """How far the comparison's Transformer is from its paper's base model, in a sentence: target
    tokens seen (updates times the tokens of one update, :func:`nmt_experiments.core.results.tokens_per_update`),
    sizes and label smoothing. Empty where no Transformer was trained."""
    firsts = [runs[0] for runs in models(out).values()]
    run = next((r for r in firsts if config(out, r)["model"]["arch"] == "Transformer"), None)
    if run is None:
        return ""
    m, base, d = config(out, run)["model"], TRANSFORMER_BASE, run_dir(out, run)
    updates, tokens = read_json(d / "train_summary.json")["updates"], tokens_per_update(d)
    fewer = base["updates"] * base["tokens"] / (updates * tokens)
    return (
        f"Their base model made {base['updates']:,} updates of about {base['tokens']:,} target "
        f"tokens; ours made {updates:,} of about {round(tokens, -1):,.0f}, {fewer:,.0f} times fewer "
        f"target tokens in all, with {m['layers']} layers of width {m['m']} ({m['heads']} heads, "
        f"feed-forward {m['ff']}) against {base['layers']} of {base['m']} ({base['heads']} heads, "
        f"{base['ff']}), and without their label smoothing of {base['label_smoothing']:g}."
    )


def transformer_recipe(out: Path = RESULTS) -> str:
    """The first suspect when the comparison's Transformer has not learned, in a sentence: the
    recipe it was trained with (peak learning rate, warm-up updates, target tokens of an update)
    against Vaswani et al.'s for their base model (peak: d ** -0.5 * warm-up ** -0.5, their §5.3).
    Empty where no Transformer was trained."""
    firsts = [runs[0] for runs in models(out).values()]
    run = next((r for r in firsts if config(out, r)["model"]["arch"] == "Transformer"), None)
    if run is None:
        return ""
    cfg, base = config(out, run), TRANSFORMER_BASE
    t, tokens = cfg["train"], tokens_per_update(run_dir(out, run))
    peak = (base["m"] * base["warmup"]) ** -0.5
    warmup = f"{t['warmup_updates']:,} warm-up updates" if t.get("warmup_updates") else "no warm-up"
    return (
        f"The first suspect is the recipe: {run} was trained with the recipe the CPU sweep chose for "
        f"a smaller Transformer (peak learning rate {t['lr']:g}, {warmup}, updates of about "
        f"{round(tokens, -1):,.0f} target tokens), where Vaswani et al. trained their base model "
        f"with a peak of {peak:.1e}, {base['warmup']:,} warm-up updates and about "
        f"{base['tokens']:,} target tokens an update. A peak {t['lr'] / peak:.0f} times theirs, "
        f"reached in {base['warmup'] / max(t.get('warmup_updates') or 1, 1):.0f} times fewer steps, "
        f"on updates {base['tokens'] / tokens:.0f} times smaller, is the likelier cause of a model "
        f"that writes the same opening whatever the source. The length of the training comes "
        f"second. "
    )
