"""The models before and after the paper beside the paper's RNNencdec-50 and RNNsearch-50, at equal
updates (the book's chapter "Before and after the paper: the results"): each model's recipe, the
table with the mean and spread over seeds, dev NLL by updates and by time, Figure 2 for every model,
what the searches made of each, and the claims the comparison tests, judged by the rules of
:mod:`nmt_experiments.claims` (intervals over seeds and test sentences, the learning floor). Reads only the
results directory of the study profile ``studies/compare.toml`` (``results/compare/``), whose runs
are named ``<model>-s<seed>`` (:func:`nmt_experiments.recipes.run_name`). What the models were
trained with beside what their papers had (the study's cost, the GPU view, the Transformer's
recipe and tokens) is :mod:`nmt_experiments.footing`.

``python -m nmt_experiments.comparison`` writes ``comparison``, ``recipes``, ``claims`` and ``outputs``
(``.csv`` and ``.md``) into ``results/compare/``."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from nmt_lib.config import home
from nmt_lib.data.vocab import SPECIALS, UNK
from nmt_lib.io import read_json

from . import tables
from .claims import FLOOR, LONG, MARGIN, SHORT, Judge, short_bleu
from .markdown import write_table
from .results import eval_curve, paper_table, run_dir, seed_groups

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
    out: Path = RESULTS,
    n_samples: int = 1000,
    short: int = SHORT,
    long: int = LONG,
    part: str | None = None,
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
    learning floor is judged on sentences of fewer than ``SHORT`` words all the same); ``part``:
    the claims on that part of the test set alone (Multi30k's ``multi30k.test_2016_flickr``)."""
    found = models(out)
    judge = Judge.of(out, found, n_samples, part=part, short=short, long=long)
    model = {m: config(out, runs[0])["model"] for m, runs in found.items()}
    attn = [m for m in found if model[m]["arch"] in ATTENDING]
    return [
        *_table1_claim(judge, found),
        *_figure2_claims(judge, found, attn, long),
        *_reversal_claim(judge, model),
        *_transformer_claim(judge, model, attn),
    ]


def _table1_claim(judge: Judge, found: dict) -> list[dict]:
    """Bahdanau et al.'s Table 1, where both models were trained."""
    if "RNNsearch-50" not in found or "RNNencdec-50" not in found:
        return []
    paper_t1 = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    return [
        judge.beats(
            "RNNsearch-50 beats RNNencdec-50 (Bahdanau et al., Table 1)",
            f"RNNsearch-50 {paper_t1['RNNsearch-50']:.2f} vs RNNencdec-50 "
            f"{paper_t1['RNNencdec-50']:.2f}",
            [("RNNsearch-50", "RNNencdec-50")],
        )
    ]


def _figure2_claims(judge: Judge, found: dict, attn: list[str], long: int) -> list[dict]:
    """Bahdanau et al.'s Figure 2 in its two parts, for each attention model of ``attn``."""
    plain = [m for m in found if m not in attn]
    rows = []
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
    return rows


def _reversal_claim(judge: Judge, model: dict[str, dict]) -> list[dict]:
    """Sutskever et al.'s, where an LSTM encoder-decoder was trained both ways (``model``: each
    model's config)."""
    lstm = [m for m in model if model[m]["arch"] == "Seq2seq"]
    back = [m for m in lstm if model[m].get("reverse_source", False)]
    fwd = [m for m in lstm if m not in back]
    if not (fwd and back):
        return []
    return [
        judge.beats(
            "Reversing the source helps an LSTM encoder-decoder without attention "
            "(Sutskever et al.)",
            SUTSKEVER_REVERSAL,
            [(back[0], fwd[0])],
        )
    ]


def _transformer_claim(judge: Judge, model: dict[str, dict], attn: list[str]) -> list[dict]:
    """Vaswani et al.'s, where a Transformer and a recurrent attention model were trained."""
    tf = [m for m in attn if model[m]["arch"] == "Transformer"]
    recurrent = [m for m in attn if m not in tf]
    if not (tf and recurrent):
        return []
    return [
        judge.beats(
            "The Transformer beats the recurrent attention models (Vaswani et al.)",
            VASWANI_CLAIM,
            [(tf[0], m) for m in recurrent],
        )
    ]


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nmt_experiments.comparison", description=__doc__)
    ap.add_argument("--results-dir", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    out = a.results_dir
    write_table(out, "comparison", table(out), note(out))
    write_table(out, "recipes", recipes(out), recipes_note(out))
    write_table(out, "claims", claims(out), note(out))
    write_table(out, "outputs", outputs(out), OUTPUTS_NOTE)
    print(f"[comparison] wrote comparison, recipes, claims and outputs into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
