"""The models before and after the paper beside the paper's RNNencdec-50 and RNNsearch-50, at equal
updates (the book's chapter "Before and after the paper: the results"): each model's recipe, the
table with the mean and spread over seeds, dev NLL by updates and by time, Figure 2 for every model,
what the searches made of each, and the claims the comparison tests, judged by the rules of
:mod:`nmt_experiments.claims` (intervals over seeds and test sentences, the learning floor). Reads only the
results directory of the study profile ``studies/compare.toml`` (``results/compare/``), whose runs
are named ``<model>-s<seed>`` (:func:`nmt_experiments.recipes.run_name`).

``python -m nmt_experiments.comparison`` writes ``comparison``, ``recipes``, ``claims`` and ``outputs``
(``.csv`` and ``.md``) into ``results/compare/``."""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

import numpy as np

from nmt_lib.config import home
from nmt_lib.data.vocab import SPECIALS, UNK
from nmt_lib.io import read_json

from . import tables
from .claims import FLOOR, LONG, MARGIN, SHORT, Judge, short_bleu
from .results import eval_curve, paper_table, run_dir, seed_groups, tokens_per_update

RESULTS = home() / "results" / "compare"
#: What each architecture attends with (the table's "attention" column; a format string).
ATTENTION = {
    "RNNencdec": "none (c in every step)",
    "Peeky": "none (c in every step)",
    "Seq2seq": "none",
    "RNNsearch": "Bahdanau: additive, from s_{{i-1}}",
    "Luong": "Luong: {score}, from h_t",
    "Transformer": "multi-head scaled dot-product",
}
#: Sutskever et al. (2014), Table 1: one LSTM ensemble member on the source as it is and reversed
#: (test perplexity 5.8 → 4.7, BLEU 25.9 → 30.6, §3.3).
SUTSKEVER_REVERSAL = "test BLEU 25.9 → 30.6 and perplexity 5.8 → 4.7 (§3.3)"
#: Vaswani et al. (2017), Table 2: EN-FR newstest2014.
VASWANI_CLAIM = (
    "EN-FR newstest2014 (Table 2): Transformer (big) 41.8 BLEU, above every earlier single model "
    "(the best, MoE, 40.56) and ensemble (ConvS2S, 41.29), at under a quarter of the training "
    "cost of the best; Transformer (base) 38.1"
)
#: The architectures with attention.
ATTENDING = ("RNNsearch", "Luong", "Transformer")
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


def models(out: Path = RESULTS) -> dict[str, list[str]]:
    """``{model: its runs, one per seed}`` in the manifest's order (``RNNsearch-50-s2`` is
    RNNsearch-50's run with seed 2: :func:`nmt_experiments.results.seed_groups`)."""
    return seed_groups(out)


def config(out: Path, run: str) -> dict:
    """The resolved config of ``run`` as the manifest of ``out`` records it."""
    return read_json(out / "manifest.json")["configs"][run]


def has_attention(out: Path, run: str) -> bool:
    """Whether ``run`` is an attention model (:data:`ATTENDING`)."""
    return config(out, run)["model"]["arch"] in ATTENDING


def _stats(out: Path, runs: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
    """Each run's per-sentence statistics (tokenized) and the source lengths."""
    ds = [read_json(run_dir(out, r) / "bleu_by_length.json") for r in runs]
    return [np.array(d["stats_tok"]) for d in ds], np.array(ds[0]["src_len"])


def table(out: Path = RESULTS) -> list[dict]:
    """One row per model: its seeds, test BLEU (All, No-UNK: the mean over seeds, the standard
    deviation and each seed's), BLEU on sentences of fewer than SHORT words (the learning floor's
    measure), dev NLL (the whole dev set), parameters, updates, training tokens per second and
    hours per run."""
    rows = []
    base = {r["model"]: r for r in tables.comparison_table(out)}
    for model, runs in models(out).items():
        per = [base[r] for r in runs]
        stats, lengths = _stats(out, runs)
        all_, sd = tables.mean_sd([r["All"] for r in per])
        no_unk = [r["No UNK"] for r in per if r["No UNK"] is not None]
        cfg = config(out, runs[0])["model"]
        rows.append(
            {
                "model": model,
                "attention": ATTENTION[cfg["arch"]].format(score=cfg.get("score")),
                "seeds": len(runs),
                "All": round(all_, 2),
                "All sd": None if sd is None else round(sd, 2),
                "All per seed": " / ".join(f"{r['All']:.2f}" for r in per),
                "No UNK": round(float(np.mean(no_unk)), 2) if no_unk else None,
                f"All <{SHORT} words": round(short_bleu(stats, lengths), 2),
                "dev NLL": round(float(np.mean([r["dev NLL"] for r in per])), 2),
                "parameters (M)": per[0]["parameters (M)"],
                "updates": per[0]["updates"] if len({r["updates"] for r in per}) == 1 else None,
                "train tok/s": round(float(np.mean([r["train tok/s"] for r in per]))),
                "hours per run": round(float(np.mean([r["hours"] for r in per])), 2),
            }
        )
    return rows


#: The settings of a recipe that the comparison's models differ in (``recipes`` table).
RECIPE_COLUMNS = {
    "optimizer": ("train", "optimizer"),
    "lr": ("train", "lr"),
    "schedule": ("train", "lr_schedule"),
    "warm-up": ("train", "warmup_updates"),
    "Adam β₂": ("train", "adam_beta2"),
    "dropout": ("model", "dropout"),
    "layers": ("model", "layers"),
    "forget-gate bias": ("model", "forget_bias"),
    "length-normalised search": ("search", "normalize"),
    "search limit (× source)": ("search", "max_len_ratio"),
}
#: The settings that only some architectures have: the others' rows leave them blank.
OWN_SETTINGS = {
    "dropout": ("Transformer",),
    "forget-gate bias": ("Seq2seq", "Peeky", "Luong"),
    "layers": ("Seq2seq", "Peeky", "Luong", "Transformer"),
}


def recipes(out: Path = RESULTS) -> list[dict]:
    """Each model's recipe and search settings (the first seed's config; the seeds differ only
    in ``seed``), as chosen on dev by the sweep (:mod:`nmt_experiments.recipes`); blank where a run's
    config predates the setting or its architecture has no such setting (:data:`OWN_SETTINGS`)."""
    rows = []
    for model, runs in models(out).items():
        cfg = config(out, runs[0])
        arch = cfg["model"]["arch"]
        rows.append(
            {
                "model": model,
                **{
                    col: cfg[sec].get(key) if arch in OWN_SETTINGS.get(col, (arch,)) else None
                    for col, (sec, key) in RECIPE_COLUMNS.items()
                },
            }
        )
    return rows


def curves(out: Path = RESULTS) -> tuple[dict, list[int]]:
    """Figure 2 for every model: ``{model: (bucket centres, BLEU: the mean over its seeds)}`` and
    the bucket edges (:func:`nmt_experiments.tables.fig2_curves`)."""
    return tables.fig2_curves(out, list(models(out)))


def timing_run(out: Path, runs: list[str]) -> str:
    """The seed whose time stands for its model's: the median of ``runs`` by training hours per
    update (the faster of the middle two for an even number), so that one run slowed by other work
    on the machine does not set it, and a model with more seeds is not favoured as by the fastest."""

    def per_update(run: str) -> float:
        s = read_json(run_dir(out, run) / "train_summary.json")
        return s["hours"] / max(s["updates"], 1)

    return sorted(runs, key=per_update)[(len(runs) - 1) // 2]


def dev_curves(out: Path = RESULTS) -> dict[str, list[dict]]:
    """Each model's evaluations during training (:func:`nmt_experiments.results.eval_curve`), the dev NLL
    on the fixed dev subset averaged over its seeds at each update, minutes those of its
    :func:`timing_run`: ``{model: [{"minutes", "update", "dev_nll"}]}``."""
    found = {}
    for model, runs in models(out).items():
        per = [eval_curve(run_dir(out, r)) for r in runs]
        common = sorted(set.intersection(*({e["update"] for e in c} for c in per)))
        timed = eval_curve(run_dir(out, timing_run(out, runs)))
        minutes = {e["update"]: e["minutes"] for e in timed}
        found[model] = [
            {
                "update": u,
                "minutes": minutes[u],
                "dev_nll": float(
                    np.mean([next(e["dev_nll"] for e in c if e["update"] == u) for c in per])
                ),
            }
            for u in common
        ]
    return found


def at_updates(curves: dict[str, list[dict]]) -> tuple[int, dict[str, float]]:
    """The dev NLL of every model at the last evaluation that all of them reached: that update and
    ``{model: dev NLL}``."""
    common = max(set.intersection(*({r["update"] for r in recs} for recs in curves.values())))
    return common, {
        m: next(r["dev_nll"] for r in recs if r["update"] == common) for m, recs in curves.items()
    }


def loops(words: list[str], n: int = 3, times: int = 3) -> bool:
    """Whether some ``n`` consecutive words, none of them ``<unk>``, occur ``times`` times or more
    in ``words`` (runs of ``<unk>`` are what a 10k vocabulary makes of names and numbers)."""
    counts: dict[tuple, int] = {}
    for i in range(len(words) - n + 1):
        g = tuple(words[i : i + n])
        if SPECIALS[UNK] in g:
            continue
        counts[g] = counts.get(g, 0) + 1
        if counts[g] >= times:
            return True
    return False


def outputs(out: Path = RESULTS) -> list[dict]:
    """What each model's test translations (Table 1's "All", tokenized) look like, averaged over
    its seeds: how many hypotheses the search left unfinished at its length limit, their length
    relative to the references', and the share that loop (:func:`loops`)."""
    rows = []
    for model, runs in models(out).items():
        unfinished, ratio, looping = [], [], []
        for r in runs:
            b = read_json(run_dir(out, r) / "bleu.json")
            lines = (run_dir(out, r) / "hyp.test.tok.txt").read_text(encoding="utf-8").splitlines()
            unfinished.append(b["unfinished"])
            ratio.append(b["all"]["tok"]["sys_len"] / b["all"]["tok"]["ref_len"])
            looping.append(100 * sum(loops(h.split()) for h in lines) / len(lines))
        rows.append(
            {
                "model": model,
                "unfinished": round(float(np.mean(unfinished)), 1),
                "length / reference": round(float(np.mean(ratio)), 2),
                "looping (%)": round(float(np.mean(looping)), 1),
            }
        )
    return rows


def claims(
    out: Path = RESULTS, n_samples: int = 1000, short: int = SHORT, long: int = LONG
) -> list[dict]:
    """The claims the comparison tests, at equal updates, with our numbers, 95% intervals over
    seeds and test sentences and a verdict by the rules of :class:`nmt_experiments.claims.Judge`
    (a claim is decided only between models above the learning floor):

    1. Bahdanau et al.'s Table 1: RNNsearch-50 beats RNNencdec-50 (by ``MARGIN`` BLEU);
    2. per attention model, Bahdanau et al.'s Figure 2 in its two parts: (a) its BLEU on sentences
       of ``LONG`` words or more, relative to BLEU on sentences of fewer than ``SHORT``, shows no
       fall; (b) that ratio is higher than the models' without attention;
    3. Sutskever et al.'s: reversing the source helps an LSTM encoder-decoder (by ``MARGIN``);
    4. Vaswani et al.'s: the Transformer beats the recurrent attention models (by ``MARGIN``).

    ``short`` and ``long``: Figure 2's lengths, for a testbed whose sentences are short (the
    learning floor is judged on sentences of fewer than ``SHORT`` words all the same)."""
    found = models(out)
    judge = Judge.of(out, found, n_samples, short=short, long=long)
    arch = {m: config(out, runs[0])["model"]["arch"] for m, runs in found.items()}
    reverse = {
        m: config(out, runs[0])["model"].get("reverse_source", False) for m, runs in found.items()
    }
    paper_t1 = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    rows = []
    if "RNNsearch-50" in found and "RNNencdec-50" in found:
        rows.append(
            judge.beats(
                "RNNsearch-50 beats RNNencdec-50 (Bahdanau et al., Table 1)",
                f"RNNsearch-50 {paper_t1['RNNsearch-50']:.2f} vs RNNencdec-50 "
                f"{paper_t1['RNNencdec-50']:.2f}",
                [("RNNsearch-50", "RNNencdec-50")],
            )
        )
    attn = [m for m in found if arch[m] in ATTENDING]
    plain = [m for m in found if m not in attn]
    for m in attn:
        rows.append(
            judge.holds_up(
                f"{m} shows no deterioration on sentences of {long} words or more (Bahdanau et "
                "al., Figure 2)",
                "RNNsearch-50's curve does not fall past 50 words",
                m,
            )
        )
        rows.append(
            judge.holds_up_better(
                f"{m} holds up on long sentences better than the models without attention "
                "(Bahdanau et al., Figure 2)",
                "RNNsearch-50's curve does not fall; RNNencdec's do",
                m,
                plain,
            )
        )
    lstm = [m for m in found if arch[m] == "Seq2seq"]
    back = [m for m in lstm if reverse[m]]
    fwd = [m for m in lstm if not reverse[m]]
    if fwd and back:
        rows.append(
            judge.beats(
                "Reversing the source helps an LSTM encoder-decoder without attention "
                "(Sutskever et al.)",
                SUTSKEVER_REVERSAL,
                [(back[0], fwd[0])],
            )
        )
    tf = [m for m in attn if arch[m] == "Transformer"]
    recurrent = [m for m in attn if m not in tf]
    if tf and recurrent:
        rows.append(
            judge.beats(
                "The Transformer beats the recurrent attention models (Vaswani et al.)",
                VASWANI_CLAIM,
                [(tf[0], m) for m in recurrent],
            )
        )
    return rows


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
        stats, lengths = _stats(out, [r["model"]])
        rows.append(
            {
                "model": r["model"],
                "All": r["All"],
                "No UNK": r["No UNK"],
                f"All <{SHORT} words": round(short_bleu(stats, lengths), 2),
                "dev NLL": r["dev NLL"],
                "parameters (M)": r["parameters (M)"],
                "updates": r["updates"],
                "train tok/s": r["train tok/s"],
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
    tokens seen (updates times the tokens of one update, :func:`nmt_experiments.results.tokens_per_update`),
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


def budget(out: Path = RESULTS) -> str:
    """The comparison's budget in words: ``"3,000 updates"`` (the same for every model, on the
    same batches) or, for runs trained by time, ``"40 minutes of one core"``."""
    t = config(out, read_json(out / "manifest.json")["runs"][0])["train"]
    return (
        f"{t['max_updates']:,} updates"
        if t["max_updates"]
        else f"{60 * t['max_hours']:.0f} minutes of one core"
    )


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


def note(out: Path = RESULTS) -> str:
    """The tables' note: the profile, the budget, how the numbers are made and the rules."""
    return (
        f"Profile `compare` (newstest2014, tokenized BLEU), every model trained for {budget(out)}. "
        "All: the mean over the model's seeds; sd: their standard deviation. 95% intervals: 1000 "
        f"resamples of the seeds and of the test sentences. Margin: {MARGIN:g} BLEU; learning "
        f"floor: {FLOOR:g} BLEU on sentences of fewer than {SHORT} words; long sentences: {LONG} "
        "words or more."
    )


def recipes_note(out: Path = RESULTS) -> str:
    """The recipes table's note: where the recipes come from."""
    if not config(out, read_json(out / "manifest.json")["runs"][0])["train"]["max_updates"]:
        return "Every model with lite's recipe and search, chosen for RNNsearch-50 by the budget study."
    return (
        "Chosen on dev for each family of models (results/compare/recipes/): the learning rate, "
        "the schedule and the model settings by dev NLL, the search settings by dev BLEU. Every "
        "model: Adam, the loss averaged over sentences, gradients clipped to norm 1, fp32."
    )


OUTPUTS_NOTE = (
    "newstest2014, Table 1's All (tokenized, `<unk>` allowed), the mean over seeds. unfinished: "
    "hypotheses still open at the search's length limit. looping: translations in which a 3-word "
    "sequence without `<unk>` occurs 3 times or more."
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nmt_experiments.comparison", description=__doc__)
    ap.add_argument("--results-dir", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    out = a.results_dir
    tables.write_table(out, "comparison", table(out), note(out))
    tables.write_table(out, "recipes", recipes(out), recipes_note(out))
    tables.write_table(out, "claims", claims(out), note(out))
    tables.write_table(out, "outputs", outputs(out), OUTPUTS_NOTE)
    print(f"[comparison] wrote comparison, recipes, claims and outputs into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
