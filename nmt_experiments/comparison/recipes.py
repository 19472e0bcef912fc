"""Each model's own recipe and search settings, chosen on dev, for the comparison study
(``results/compare/recipes/``).

    python -m nmt_experiments.comparison.recipes --train --jobs 2   # every arm (resumable), scored on the whole dev set
    python -m nmt_experiments.comparison.recipes --search           # beam search settings of each family's chosen arm
    python -m nmt_experiments.comparison.recipes                    # rewrite the tables from the runs
    python -m nmt_experiments.comparison.recipes --write-profile    # the comparison's profile from the choices

``--testbed multi30k`` does the same for the second testbed (:data:`MULTI30K`): the sweep
``studies/multi30k-recipes.toml`` into ``results/multi30k/recipes/``, which writes the study's
profile ``studies/multi30k.toml``.

The sweep, its arms, tables and choices, is :mod:`nmt_experiments.comparison.recipe_sweep`. What this
module adds: the comparison's profile written from the choices (:func:`compare_profile`: every
model of :data:`MODELS` with its family's recipe and search, one run per seed of :data:`SEEDS`,
named by :func:`run_name`), its GPU view's (:func:`gpu_profile`), and the command line.
"""

from __future__ import annotations

import argparse
import csv
import json
import tomllib
from pathlib import Path
from typing import NamedTuple

from nmt_lib.config import PROFILE_DIR, home, run_dir_name
from nmt_lib.io import read_json

from ..core.markdown import write_table
from ..core.options import add_out
from ..core.workers import reported
from .recipe_sweep import (
    MULTI30K_NOTE,
    NOTE,
    PROFILE,
    RESULTS,
    SEARCH_NOTE,
    chosen,
    search_table,
    table,
    train,
)

COMPARE = PROFILE_DIR / "studies" / "compare.toml"
#: The comparison's budget: every model trains for this many updates (three times the sweep's).
UPDATES = 3000
#: Training seeds: seed ``k`` initialises the model (``train.seed``) and orders the batches
#: (``data.seed``), the same batches for every model of that seed.
SEEDS = (1, 2, 3)
#: The comparison's models: ``{name: (the family whose recipe it takes, its model settings)}``;
#: the models of a claim that compares models within a few BLEU train with every seed of
#: :data:`SEEDS`, the others (and all but the best of Luong's scores on dev) with the first.
MODELS = {
    "RNNencdec-50": ("RNNencdec-50", {"arch": "RNNencdec"}),
    "RNNsearch-50": ("RNNsearch-50", {}),
    "Seq2seq-50": ("Seq2seq-50", {}),
    "Seq2seq-50-reversed": ("Seq2seq-50", {"reverse_source": True}),
    "Peeky-50": ("Seq2seq-50", {"arch": "Peeky"}),
    "Luong-dot-50": ("Luong-50", {"score": "dot"}),
    "Luong-general-50": ("Luong-50", {"score": "general"}),
    "Luong-concat-50": ("Luong-50", {"score": "concat"}),
    "Transformer-50": ("Transformer-50", {}),
}
SEEDED = ("RNNencdec-50", "RNNsearch-50", "Seq2seq-50", "Seq2seq-50-reversed", "Transformer-50")
LUONG = ("Luong-dot-50", "Luong-general-50", "Luong-concat-50")


def run_name(model: str, seed: int) -> str:
    """``"RNNsearch-50-s2"``: a comparison run, a model trained with one seed."""
    return f"{model}-s{seed}"


def best_luong(compare_out: Path) -> str | None:
    """The Luong score of lowest dev NLL (the whole dev set) with the first seed, once all three
    are evaluated in ``compare_out``; else None."""
    nll = {}
    for m in LUONG:
        f = compare_out / "runs" / run_dir_name(run_name(m, SEEDS[0])) / "nll.json"
        if not f.is_file():
            return None
        nll[m] = read_json(f)["dev"]["mean"]
    return min(nll, key=nll.get)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _search(row: dict) -> dict:
    """The search settings of a row of ``search.csv``."""
    return {
        "normalize": row["search.normalize"] == "True",
        "max_len_ratio": float(row["search.max_len_ratio"]),
    }


def _inline(d: dict) -> str:
    return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in d.items()) + " }"


class Testbed(NamedTuple):
    """A comparison and the sweep that chooses its recipes: ``sweep``, the sweep's profile;
    ``results``, its results directory; ``profile``, the comparison's profile it writes;
    ``budget``, the ``[train]`` settings of every comparison run; ``provisional``, the arm a family
    takes while its sweep has not chosen one (None: every family must have chosen)."""

    name: str
    sweep: Path
    results: Path
    profile: Path
    budget: dict
    description: str
    provisional: dict | None = None


#: Multi30k's study: every run trained until its val NLL has not improved for 4 evaluations (1,000
#: updates), at most 20,000 updates (55 epochs), its best checkpoint kept.
MULTI30K_BUDGET = {"max_updates": 20000, "patience": 4}
#: The arms Multi30k's study takes before its sweep has chosen (a middle dropout, the rate that
#: WMT'14's sweep chose): what ``studies/multi30k.toml`` holds until the sweep is run.
MULTI30K_PROVISIONAL = {
    "RNNsearch-50": "RNNsearch-50.adam-1e-3-dropout-0.2",
    "RNNencdec-50": "RNNencdec-50.adam-1e-3-dropout-0.2",
    "Seq2seq-50": "Seq2seq-50.adam-1e-3-dropout-0.2",
    "Luong-50": "Luong-50.adam-1e-3-dropout-0.2",
    "Transformer-50": "Transformer-50.warmup-1e-3-dropout-0.1",
}


def compare_profile(
    out: Path | None = None, compare_out: Path | None = None, testbed: Testbed | None = None
) -> str:
    """The text of the comparison's profile (``studies/compare.toml``; ``studies/multi30k.toml`` for
    :data:`MULTI30K`): every model of :data:`MODELS` with the recipe of its family's chosen arm
    (:func:`~nmt_experiments.comparison.recipe_sweep.chosen`: the model and training settings in which that arm
    differs from the sweep's common ones, or the testbed's provisional arm while its sweep has not
    chosen) and its family's chosen search (``search.csv``; without it, normalised and at most 1.5
    times the source), for the testbed's budget (:data:`UPDATES` updates on WMT'14), one run per
    seed (:func:`run_name`); the best of Luong's scores (:func:`best_luong`) gets every seed once
    its first is evaluated."""
    testbed = testbed or WMT14
    out = out or testbed.results
    doc, arms, search = _chosen_recipes(out, testbed.sweep)
    chosen_ = dict(arms)
    if testbed.provisional:
        arms = {**testbed.provisional, **arms}
    luong = best_luong(compare_out or out.parent)
    common = {sec: dict(doc[sec]) for sec in ("data", "model", "train", "search")}
    common["train"].update(testbed.budget)
    runs = []
    for seed in SEEDS:
        for model, (fam, settings) in MODELS.items():
            if seed != SEEDS[0] and model not in SEEDED and model != luong:
                continue
            arm = doc["runs"][arms[fam]]
            why = " (provisional: the sweep has not chosen)" if fam not in chosen_ else ""
            runs.append(
                (
                    run_name(model, seed),
                    arms[fam] + why,
                    {
                        "model": {**arm.get("model", {}), **settings},
                        "data": {"seed": seed},
                        "train": {**arm.get("train", {}), "seed": seed},
                        "search": _search(search[fam]) if fam in search else DEFAULT_SEARCH,
                    },
                )
            )
    flag = "" if testbed.name == WMT14.name else f" --testbed {testbed.name}"
    return _profile_text(testbed.name, testbed.description, common, runs, flag)


#: The search of a family whose search the sweep has not chosen yet (a provisional arm's).
DEFAULT_SEARCH = {"normalize": True, "max_len_ratio": 1.5}


def _chosen_recipes(out: Path, sweep: Path = PROFILE) -> tuple[dict, dict[str, str], dict]:
    """The sweep's profile (as TOML data), each family's chosen arm
    (:func:`~nmt_experiments.comparison.recipe_sweep.chosen`) and its chosen row of ``search.csv`` (none
    before the sweep has run)."""
    doc = tomllib.loads(sweep.read_text(encoding="utf-8"))
    rows = _read_csv(out / "search.csv") if (out / "search.csv").is_file() else []
    search = {r["model"]: r for r in rows if r["chosen"] == "True"}
    return doc, chosen(out, sweep), search


def _profile_text(name: str, description: str, common: dict, runs: list, flag: str = "") -> str:
    """A profile written by ``--write-profile``: its ``common`` sections, then each run of
    ``runs`` (``(name, the arm whose recipe it takes, {section: settings})``)."""
    lines = [
        f'name = "{name}"',
        'description = """' + description + '"""',
        f"# written by `python -m nmt_experiments.comparison.recipes{flag} --write-profile` from the sweep's"
        " results",
        "",
    ]
    for sec, values in common.items():
        lines += [f"[{sec}]", *(f"{k} = {_toml(v)}" for k, v in values.items()), ""]
    for run, arm, parts in runs:
        lines.append(f'[runs."{run}"]  # recipe: {arm}')
        lines += [f"{sec} = {_inline(v)}" for sec, v in parts.items() if v]
        lines.append("")
    return "\n".join(lines)


COMPARE_DESCRIPTION = """Before and after the paper, judged at equal updates: Sutskever et al.'s
LSTM encoder-decoder with the source as it is and reversed, the "peeky" LSTM encoder-decoder, Luong
et al.'s global attention with its three scores, and a small Transformer, beside the paper's
RNNencdec-50 and RNNsearch-50, on lite's data and sizes. Every model trains for the same {updates:,}
updates on the same batches (seed k orders the batches and initialises the model), each with the
recipe and search settings chosen on dev for its family (results/compare/recipes/, the profile
studies/recipes.toml); three seeds for the models of the claims, one for the others. fp32 on every
machine. `python -m nmt_experiments.replicate --train nmt_lib/profiles/studies/compare.toml --jobs 2`
(resumable), then `python -m nmt_experiments.comparison`."""

MULTI30K_DESCRIPTION = """Before and after the paper on the second testbed, where every model
learns: Multi30k task 1 En->Fr (Elliott et al. 2016; 29,000 training pairs, val 1,014,
test_2016_flickr and test_2017_flickr 1,000 each, the test set multi30k.test_flickr), Moses-tokenized,
word vocabularies of the 5,997 most frequent words per side of its training pairs (about the words
seen twice or more: 6,221 English, 6,563 French), lite's sizes. The models of studies/compare.toml,
each with the recipe and search chosen on val for its family (results/multi30k/recipes/, the profile
studies/multi30k-recipes.toml; dropout and label smoothing are deviations of this testbed), every run
trained until early stopping ends it: stopped once its val NLL has not improved for 4 evaluations (1,000 updates),
at most 20,000 updates (55 epochs), its best checkpoint kept; seed k orders the batches and
initialises the model; three seeds for the models of the claims, one for the others. fp32. Data:
NMT_DATA = the Multi30k directory (nmt_lib.data.corpus). `MULTI30K=<that directory>
tools/multi30k_study.sh` runs the sweep, writes this profile and trains every run (resumable) into
results/multi30k/."""

#: The testbeds: WMT'14 at lite's data and a fixed budget (the comparison), Multi30k until early stopping.
WMT14 = Testbed(
    "compare",
    PROFILE,
    RESULTS,
    COMPARE,
    {"max_updates": UPDATES},
    COMPARE_DESCRIPTION.format(updates=UPDATES),
)
MULTI30K = Testbed(
    "multi30k",
    PROFILE_DIR / "studies" / "multi30k-recipes.toml",
    home() / "results" / "multi30k" / "recipes",
    PROFILE_DIR / "studies" / "multi30k.toml",
    MULTI30K_BUDGET,
    MULTI30K_DESCRIPTION,
    MULTI30K_PROVISIONAL,
)
TESTBEDS = {"compare": WMT14, "multi30k": MULTI30K}


GPU_COMPARE = PROFILE_DIR / "studies" / "compare-gpu.toml"
#: The second view, where compute is plentiful: ``{name: (family, model settings)}`` at the ``gpu``
#: profile's sizes (RNNsearch at the paper's; the Transformer at its own paper's base sizes).
GPU_MODELS = {
    "RNNsearch-50": ("RNNsearch-50", {}),
    "Transformer-50": ("Transformer-50", {"m": 512, "layers": 6, "heads": 8, "ff": 2048}),
}
#: Each model's training time on the GPU, evaluations included.
GPU_MINUTES = 3.0


def gpu_profile(out: Path = RESULTS) -> str:
    """The text of ``studies/compare-gpu.toml``: the ``gpu`` profile's data, sizes, precision
    and search beam, with each model of :data:`GPU_MODELS` trained for :data:`GPU_MINUTES` with
    the recipe and search chosen for its family on the CPU sweep. The Transformer runs eagerly
    (its step is a few large kernels; the CUDA graphs of ``train.cuda_graphs`` serve the recurrent
    models)."""
    gpu = tomllib.loads((PROFILE_DIR / "gpu.toml").read_text(encoding="utf-8"))
    doc, arms, search = _chosen_recipes(out)
    common = {sec: dict(gpu[sec]) for sec in ("data", "train", "search")}
    common["train"]["max_hours"] = round(GPU_MINUTES / 60, 6)
    runs = []
    for model, (fam, sizes) in GPU_MODELS.items():
        arm = doc["runs"][arms[fam]]
        train = dict(arm.get("train", {}))
        if arm.get("model", {}).get("arch", "RNNsearch") == "Transformer":
            train["cuda_graphs"] = False
        runs.append(
            (
                model,
                arms[fam],
                {
                    "model": {**arm.get("model", {}), **sizes},
                    "train": train,
                    "search": _search(search[fam]),
                },
            )
        )
    return _profile_text("compare-gpu", GPU_DESCRIPTION.format(minutes=GPU_MINUTES), common, runs)


GPU_DESCRIPTION = """The comparison's second view, where compute is plentiful: RNNsearch-50 at
the paper's sizes and a Transformer at its paper's base sizes (6 layers, d = 512, 8 heads, 2048 wide),
each with the recipe and search chosen for its family on dev (results/compare/recipes/), trained for
the same {minutes:g} minutes of one GPU (evaluations included) on the `gpu` profile's data, bf16.
Equal time on a GPU measures architecture and implementation together. From a pack:
`python bench/gpu_reference.py --profile nmt_lib/profiles/studies/compare-gpu.toml --pack pack/
--out results/gpu/compare` (bench/gpu_compare.sh)."""


def _read_csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main(argv=None) -> int:
    """The command line; a stopped sweep is one line per arm (:func:`nmt_experiments.core.workers.reported`)."""
    return reported("recipes", _main, argv)


def _main(argv) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.comparison.recipes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--train", action="store_true", help="train the arms not finished yet")
    ap.add_argument(
        "--search",
        nargs="*",
        metavar="MODEL",
        help="search settings on dev (of these models only, the others' kept from search.csv)",
    )
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--data-dir")
    ap.add_argument("--arms", nargs="*", help="only these arms")
    ap.add_argument(
        "--testbed",
        choices=sorted(TESTBEDS),
        default="compare",
        help="compare: WMT'14 (default); multi30k: the Multi30k testbed's sweep and "
        "study (its profile, results and comparison)",
    )
    add_out(ap, type=Path, help="default: the testbed's")
    ap.add_argument("--profile", help="the sweep's profile (default: the testbed's)")
    ap.add_argument(
        "--write-profile",
        nargs="?",
        const=True,
        type=Path,
        metavar="PATH",
        help="write the comparison's profile (default: the testbed's, "
        "studies/compare.toml, with its GPU view studies/compare-gpu.toml) from the "
        "chosen recipes and searches",
    )
    a = ap.parse_args(argv)
    bed = TESTBEDS[a.testbed]
    out, prof = a.out or bed.results, Path(a.profile) if a.profile else bed.sweep
    if a.train:
        train(a.jobs, a.data_dir, out, a.arms, prof)
    rows = table(out, prof)
    if rows:
        note = NOTE if bed is WMT14 else MULTI30K_NOTE
        write_table(out, "recipes", rows, note)
    if a.search is not None:
        rows = search_table(out, a.data_dir, prof, a.search or None)
        write_table(out, "search", rows, SEARCH_NOTE)
    if a.write_profile:
        target = bed.profile if a.write_profile is True else a.write_profile
        target.write_text(compare_profile(out, testbed=bed._replace(sweep=prof)), encoding="utf-8")
        print(f"[recipes] wrote {target}")
        if bed is WMT14:
            GPU_COMPARE.write_text(gpu_profile(out), encoding="utf-8")
            print(f"[recipes] wrote {GPU_COMPARE}")
    print(json.dumps(chosen(out, prof), indent=1) if rows else "[recipes] no arm finished yet")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
