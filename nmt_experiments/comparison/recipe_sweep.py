"""The recipe sweep of the comparison study: each model's arms trained and scored on dev, each
family's chosen arm and its search settings (``results/compare/recipes/``; Multi30k's in
``results/multi30k/recipes/``).

The arms are the runs of ``nmt_lib/profiles/studies/recipes.toml``, named ``<model>.<setting>``:
the arms of one model form its *family*. Every arm trains for the same number of updates on the
same batches (the budget study's :func:`~nmt_experiments.core.arms.train_arm`, which ends with the
whole dev set's NLL: :func:`train`); the arm of lowest dev NLL is the family's recipe
(:func:`table`, :func:`chosen`), which ``studies/compare.toml`` copies
(:func:`nmt_experiments.comparison.recipes.compare_profile`). Its model then decodes a fixed dev subset with
every setting of :data:`SEARCH_GRID`, and the setting of highest dev BLEU becomes the family's
search (:func:`search_table`). What the sweep writes: ``runs/<arm>/``, ``recipes.csv|md``,
``search.csv|md`` and ``manifest.json``.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
from functools import partial
from pathlib import Path

from nmt_lib.config import PROFILE_DIR, home, load_profile, run_dir_name, to_dict
from nmt_lib.data import prepare
from nmt_lib.io import read_json
from nmt_lib.validation import dev_subset

from ..core.arms import dev_search, train_arm, trained_arm
from ..core.provenance import git_state, write_arms_manifest
from ..core.workers import run_all

PROFILE = PROFILE_DIR / "studies" / "recipes.toml"


RESULTS = home() / "results" / "compare" / "recipes"


#: The search settings compared on dev: the cost as it is (the paper's) or divided by the length,
#: and a search stopped at 1.5 or 3 times the source length (a model that loops fills the limit).
SEARCH_GRID = [
    {"normalize": normalize, "max_len_ratio": ratio}
    for normalize, ratio in itertools.product((False, True), (1.5, 3.0))
]


SEARCH_SENTENCES = 500


def family(arm: str) -> str:
    """``"Luong-50.adam-1e-3"`` -> ``"Luong-50"``."""
    return arm.split(".", 1)[0]


def settings(run, family_runs: list) -> str:
    """The settings in which the arms of a family differ, with ``run``'s values:
    ``"model.layers=2, model.forget_bias=1.0, train.lr=0.0003"``."""
    mine, others = to_dict(run), [to_dict(r) for r in family_runs]
    return ", ".join(
        f"{sec}.{k}={v}"
        for sec in ("model", "train", "search")
        for k, v in mine[sec].items()
        if any(o[sec][k] != v for o in others)
    )


def table(out: Path = RESULTS, profile=PROFILE) -> list[dict]:
    """One row per arm that finished, in the profile's order: its family, the settings in which
    its family's arms differ, the whole dev set's NLL per sentence and greedy BLEU (500
    sentences), whether it diverged (a column only where one did: no dev score, never chosen),
    and whether it is chosen (the lowest dev NLL of its family, once all of them finished)."""
    prof = load_profile(profile)
    rows = []
    for name, run in prof.runs.items():
        f = out / "runs" / run_dir_name(name) / "final.json"
        if not f.is_file():
            continue
        final = read_json(f)
        kin = [r for n, r in prof.runs.items() if family(n) == family(name)]
        diverged = final.get("diverged") is not None
        rows.append(
            {
                "model": family(name),
                "arm": name.split(".", 1)[1],
                "settings": settings(run, kin),
                "updates": final["updates"]
                if diverged
                else read_json(f.parent / "train_summary.json")["updates"],
                "dev NLL": None if diverged else round(final["dev_nll"], 2),
                "dev BLEU (greedy)": None if diverged else round(final["dev_bleu_greedy"], 2),
                "diverged": diverged,
            }
        )
    for fam in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == fam]
        done = len(mine) == sum(family(n) == fam for n in prof.runs)
        best = min((r for r in mine if not r["diverged"]), key=lambda r: r["dev NLL"], default=None)
        for r in mine:  # None until every arm of the family has finished
            r["chosen"] = (r is best) if done else None
    if not any(r["diverged"] for r in rows):
        for r in rows:
            del r["diverged"]
    return rows


def chosen(out: Path = RESULTS, profile=PROFILE) -> dict[str, str]:
    """``{model: its chosen arm's full name}``."""
    return {r["model"]: f"{r['model']}.{r['arm']}" for r in table(out, profile) if r["chosen"]}


def bracketed(out: Path = RESULTS, profile=PROFILE) -> dict[str, dict]:
    """Whether the sweep brackets each chosen learning rate: ``{model: {"lr", "lower", "higher",
    "equal"}}`` with the chosen arm's rate and, for each side, whether an arm that differs from it
    only in the rate was trained there and scored worse on dev (a diverged arm counts as worse); a
    side that is False means the best rate may lie beyond the grid. ``equal``: the rates of such
    arms that score the same as the chosen one in :func:`table` (a tie goes to the arm listed
    first)."""
    prof = load_profile(profile)
    nll = {f"{r['model']}.{r['arm']}": r["dev NLL"] for r in table(out, profile)}

    def but_rate(run):  # the arm's settings, its name and learning rate aside
        return dataclasses.replace(run, name="", train=dataclasses.replace(run.train, lr=0.0))

    found = {}
    for model, arm in chosen(out, profile).items():
        lr, mine = prof.runs[arm].train.lr, but_rate(prof.runs[arm])
        sides = {"lower": False, "higher": False, "equal": []}
        for name, run in prof.runs.items():
            if name in nll and run.train.lr != lr and but_rate(run) == mine:
                worse = nll[name] is None or nll[name] > nll[arm]  # None: diverged
                sides["lower" if run.train.lr < lr else "higher"] |= worse
                if nll[name] == nll[arm]:
                    sides["equal"].append(run.train.lr)
        found[model] = {"lr": lr, **sides}
    return found


def _rate(lr: float) -> str:
    """``0.003`` -> ``"3e-3"``."""
    return f"{lr:.0e}".replace("e-0", "e-")


def bracketed_text(out: Path = RESULTS, profile=PROFILE) -> str:
    """:func:`bracketed` in a sentence: the families whose chosen rate has a worse one on both
    sides, and those where the best rate may lie beyond the grid (beside a rate that ties with it,
    or at the end of the rates tried)."""
    found = bracketed(out, profile)

    def tied(b):
        return " and ".join(map(_rate, sorted(b["equal"])))

    inside = [
        f"{m} {_rate(b['lr'])}" + (f" (tied with {tied(b)})" if b["equal"] else "")
        for m, b in found.items()
        if b["lower"] and b["higher"]
    ]
    side = {
        (True, False): "is the highest rate tried",
        (False, True): "is the lowest rate tried",
        (False, False): "was the only rate tried with its other settings",
    }

    def where(b):
        if b["equal"]:
            return f"scores the same dev NLL as {tied(b)} (a tie keeps the arm listed first)"
        return side[b["lower"], b["higher"]]

    edge = [
        f"{m}'s {_rate(b['lr'])} {where(b)}"
        for m, b in found.items()
        if not (b["lower"] and b["higher"])
    ]
    text = []
    if inside:
        text.append(
            "Chosen learning rates with a lower and a higher one beside them that score "
            f"worse on dev, the other settings equal: {', '.join(inside)}."
        )
    if edge:
        text.append(f"At the grid's edge: {'; '.join(edge)}, so a better rate may lie beyond it.")
    return " ".join(text)


def edge_cost_text(out: Path, profile, study: Path) -> str:
    """What testing each grid edge of :func:`bracketed` would cost, from the records: one arm one
    step beyond it, at its family's arms' mean hours, and, where that arm won on dev, the
    family's runs of the study ``study`` (those of the chosen arm's architecture) trained again,
    at their recorded hours; empty where every chosen rate is bracketed."""
    prof = load_profile(profile)
    edges = [m for m, b in bracketed(out, profile).items() if not (b["lower"] and b["higher"])]
    if not edges:
        return ""
    arm_hours, runs = 0.0, {}
    for model in edges:
        mine = [
            read_json(out / "runs" / run_dir_name(n) / "train_summary.json")["hours"]
            for n in prof.runs
            if family(n) == model
            and (out / "runs" / run_dir_name(n) / "train_summary.json").is_file()
        ]
        arm_hours += sum(mine) / len(mine)
        arch = prof.runs[chosen(out, profile)[model]].model.arch
        for d in sorted(study.glob("runs/*/config.json")):
            if read_json(d)["model"]["arch"] == arch:
                runs[d.parent.name] = read_json(d.parent / "train_summary.json")["hours"]
    which = "this edge" if len(edges) == 1 else f"each of these {len(edges)} edges"
    return (
        f"One arm one step beyond {which} would take about {arm_hours:.1f} hours of one core "
        "at the mean of its family's arms; where one wins on dev, its family's study runs train "
        f"again: up to {len(runs)} runs and {sum(runs.values()):.1f} hours of one core at their "
        "recorded times. These arms are not trained: the edges are named here, with what testing "
        "them costs."
    )


def search_table(out: Path = RESULTS, data_dir=None, profile=PROFILE, models=None) -> list[dict]:
    """Each family's chosen model decodes :data:`SEARCH_SENTENCES` dev sentences with every
    setting of :data:`SEARCH_GRID`; tokenized BLEU, brevity penalty, length ratio, and whether the
    setting is chosen (the highest BLEU of the model). ``models``: only these families decode
    (those whose chosen arm changed), the others' rows kept from ``search.csv``."""
    prof = load_profile(profile)
    kept: dict[str, list[dict]] = {}
    for r in _search_rows(out):
        kept.setdefault(r["model"], []).append(r)
    rows = []
    for model_name, arm in chosen(out, profile).items():
        if models is not None and model_name not in models and model_name in kept:
            rows += kept[model_name]
            continue
        run = prof.runs[arm]
        if data_dir is not None:
            run = dataclasses.replace(run, data=dataclasses.replace(run.data, data_dir=data_dir))
        prep = prepare(run.data)
        model = trained_arm(out / "runs" / run_dir_name(arm), run, prep)
        idx = dev_subset(len(prep.dev), SEARCH_SENTENCES)
        mine = []
        for option in SEARCH_GRID:
            search = dataclasses.replace(run.search, **option)
            mine.append(
                {
                    "model": model_name,
                    **{f"search.{k}": v for k, v in option.items()},
                    **dev_search(model, prep, idx, search),
                }
            )
            print(
                f"[recipes] {model_name} {option}: dev BLEU {mine[-1]['dev BLEU']:.2f}", flush=True
            )
        best = max(mine, key=lambda r: r["dev BLEU"])
        rows += [{**r, "chosen": r is best} for r in mine]
    return rows


def _search_rows(out: Path) -> list[dict]:
    """The rows of ``out/search.csv`` as :func:`search_table` makes them (none where it is not
    written yet)."""
    f = out / "search.csv"
    if not f.is_file():
        return []
    with open(f, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    kinds = {"search.normalize": _bool, "chosen": _bool, "dev sentences": int, "model": str}
    return [{k: kinds.get(k, float)(v) for k, v in r.items()} for r in rows]


def _bool(text: str) -> bool:
    """``"True"`` -> True, ``"False"`` -> False (a CSV's booleans)."""
    return {"True": True, "False": False}[text]


def train(jobs: int = 1, data_dir=None, out: Path = RESULTS, arms=None, profile=PROFILE) -> None:
    """Train every arm (or ``arms``) not finished yet, ``jobs`` at a time, each resumable; then
    the manifest and :func:`table`."""
    overrides = {"data": {"data_dir": str(data_dir)}} if data_dir else {}
    prof = load_profile(profile, **overrides)
    names = arms or list(prof.runs)
    git = git_state()
    for run in {prof.runs[n].data: prof.runs[n] for n in names}.values():
        prepare(run.data)  # once, here, not in two workers at a time
    todo = [n for n in names if not (out / "runs" / run_dir_name(n) / "final.json").is_file()]
    one = partial(train_arm, str(profile), str(out), data_dir)
    run_all(
        one, todo, max(1, jobs), lambda _, done: write_arms_manifest(out, prof, dict([done]), git)
    )


NOTE = (
    "Each arm trained for the same number of updates on the same batches (seed 1); dev NLL: "
    "per sentence, the whole dev set (newstest2012+2013); dev BLEU: greedy, its first 500 "
    "sentences. The chosen arm (lowest dev NLL as shown; a tie keeps the arm listed first) is the "
    "model's recipe in the comparison."
)


MULTI30K_NOTE = (
    "Each arm trained on the same batches (seed 1) until its val NLL had not improved for 3 "
    "evaluations (at most 3,000 updates), its best checkpoint kept; dev NLL: per sentence, the whole "
    "val set of Multi30k; dev BLEU: greedy, its first 500 sentences. The chosen arm (lowest dev "
    "NLL as shown; a tie keeps the arm listed first) is the model's recipe in the Multi30k study."
)


SEARCH_NOTE = (
    f"The chosen arm of each model decodes {SEARCH_SENTENCES} dev sentences (beam 10) with each "
    "setting; the highest dev BLEU is the model's search in the comparison."
)
