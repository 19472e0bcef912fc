"""The models before and after the paper beside the paper's RNNencdec-50 and RNNsearch-50, at equal
updates (the book's chapter "Before and after the paper: the results"), read from the runs: each
model's recipe, the table with the mean and spread over seeds, dev NLL by updates and by time,
Figure 2 for every model, what the searches made of each, and the tables' notes. Reads only the
results directory of the study profile ``studies/compare.toml`` (``results/compare/``), whose runs
are named ``<model>-s<seed>`` (:func:`nmt_experiments.comparison.recipes.run_name`). The claims the
comparison tests are :mod:`nmt_experiments.comparison.verdicts`; what the models were trained with
beside what their papers had (the study's cost, the GPU view, the Transformer's recipe and tokens)
is :mod:`nmt_experiments.comparison.footing`; ``python -m nmt_experiments.comparison``
(:mod:`nmt_experiments.comparison.report`) writes the tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt_lib.config import home
from nmt_lib.data.vocab import SPECIALS, UNK
from nmt_lib.io import read_json

from ..core import figures, tables
from ..core.claims import FLOOR, LONG, MARGIN, SHORT, short_bleu
from ..core.results import eval_curve, run_dir, seed_groups

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
#: The architectures with attention.
ATTENDING = ("RNNsearch", "Luong", "Transformer")


def models(out: Path = RESULTS) -> dict[str, list[str]]:
    """``{model: its runs, one per seed}`` in the manifest's order (``RNNsearch-50-s2`` is
    RNNsearch-50's run with seed 2: :func:`nmt_experiments.core.results.seed_groups`)."""
    return seed_groups(out)


def config(out: Path, run: str) -> dict:
    """The resolved config of ``run`` as the manifest of ``out`` records it."""
    return read_json(out / "manifest.json")["configs"][run]


def has_attention(out: Path, run: str) -> bool:
    """Whether ``run`` is an attention model (:data:`ATTENDING`)."""
    return config(out, run)["model"]["arch"] in ATTENDING


def sentence_stats(out: Path, runs: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
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
        stats, lengths = sentence_stats(out, runs)
        sd = tables.mean_sd([r["All"] for r in per])[1]
        no_unk = [r["No UNK"] for r in per if r["No UNK"] is not None]
        cfg = config(out, runs[0])["model"]
        rows.append(
            {
                "model": model,
                "attention": ATTENTION[cfg["arch"]].format(score=cfg.get("score")),
                "seeds": len(runs),
                "All": tables.mean_of([r["All"] for r in per]),
                "All sd": None if sd is None else round(sd, 2),
                "All per seed": " / ".join(f"{r['All']:.2f}" for r in per),
                "No UNK": tables.mean_of(no_unk) if no_unk else None,
                f"All <{SHORT} words": round(short_bleu(stats, lengths), 2),
                "dev NLL": tables.mean_of([r["dev NLL"] for r in per]),
                "parameters (M)": per[0]["parameters (M)"],
                "updates": per[0]["updates"] if len({r["updates"] for r in per}) == 1 else None,
                "train tok/s": tables.mean_of([r["train tok/s"] for r in per], 0),
                "hours per run": tables.mean_of([r["hours"] for r in per]),
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
    in ``seed``), as chosen on dev by the sweep (:mod:`nmt_experiments.comparison.recipes`); blank where a run's
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
    the bucket edges (:func:`nmt_experiments.core.figures.fig2_curves`)."""
    return figures.fig2_curves(out, list(models(out)))


def timing_run(out: Path, runs: list[str]) -> str:
    """The seed whose time stands for its model's: the median of ``runs`` by training hours per
    update (the faster of the middle two for an even number), so that one run slowed by other work
    on the machine does not set it, and a model with more seeds is not favoured as by the fastest."""

    def per_update(run: str) -> float:
        s = read_json(run_dir(out, run) / "train_summary.json")
        return s["hours"] / max(s["updates"], 1)

    return sorted(runs, key=per_update)[(len(runs) - 1) // 2]


def dev_curves(out: Path = RESULTS) -> dict[str, list[dict]]:
    """Each model's evaluations during training (:func:`nmt_experiments.core.results.eval_curve`), the dev NLL
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


def budget(out: Path = RESULTS) -> str:
    """The comparison's budget in words: ``"3,000 updates"`` (the same for every model, on the
    same batches) or, for runs trained by time, ``"40 minutes of one core"``."""
    t = config(out, read_json(out / "manifest.json")["runs"][0])["train"]
    return (
        f"{t['max_updates']:,} updates"
        if t["max_updates"]
        else f"{60 * t['max_hours']:.0f} minutes of one core"
    )


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
