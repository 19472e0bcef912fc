"""The lite-long study (``studies/lite-long.toml``, ``results/lite-long/``) as chapter 8 reads it
while its runs are trained a few at a time: each run's state, its BLEU on newstest2014 and on the
held-out view, beside the short-sentence BLEU that the learning floor is judged on
(:func:`progress`); what the pilot (``results/pilot/``) predicted for it (:func:`prediction`); and
its dev NLL curves against that prediction (:func:`figure`)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from nmt_lib.config import PROFILE_DIR, home, load_profile
from nmt_lib.io import read_json

from . import paper_claims
from .claims import FLOOR, SHORT, short_bleu
from .pilot_extrapolation import nll_curve
from .plots import COLUMN_WIDTH
from .results import model_of, run_dir, scored_dir

PROFILE = PROFILE_DIR / "studies" / "lite-long.toml"
RESULTS = home() / "results" / "lite-long"
PILOT = home() / "results" / "pilot"
LITE = home() / "results" / "lite"
#: The test sets each run is scored on: the paper's, then the profile's views.
PAPER_TEST = "newstest2014"
#: The pilot's arms that are lite's recipe (RNNencdec-50 at lr 1e-3, the three committed seeds).
LITE_ARMS = ("lr-1e-3 (lite)", "lr-1e-3-s2 (lite)", "lr-1e-3-s3 (lite)")


def test_sets(profile=PROFILE) -> list[str]:
    """The paper's test set and the views of the profile's runs (:attr:`DataConfig.views`)."""
    views = {v for run in load_profile(profile).runs.values() for v in run.data.views}
    return [PAPER_TEST, *sorted(views)]


def _scores(d: Path) -> tuple[float, float]:
    """Tokenized BLEU of a run's (or a view's) directory ``d``: on all its sentences, and on
    those of fewer than SHORT source words."""
    by_len = read_json(d / "bleu_by_length.json")
    short = short_bleu([np.array(by_len["stats_tok"])], by_len["src_len"])
    return read_json(d / "bleu.json")["all"]["tok"]["score"], short


def progress(out: Path = RESULTS, profile=PROFILE) -> list[dict]:
    """One row per run of the profile, in its order: ``trained`` (whether it is evaluated), its
    updates, hours of one core and best dev NLL, and on each of :func:`test_sets` its BLEU and
    its BLEU on sentences of fewer than SHORT words (None for a run not trained yet)."""
    sets = test_sets(profile)
    rows = []
    for name in load_profile(profile).runs:
        d = run_dir(out, name)
        done = (d / "bleu.json").is_file() and (d / "train_summary.json").is_file()
        row = {"run": name, "trained": done, "updates": None, "hours": None, "dev NLL": None}
        for t in sets:
            row[f"{t} BLEU"] = row[f"{t} BLEU <{SHORT}"] = None
        if done:
            s = read_json(d / "train_summary.json")
            row.update(updates=s["updates"], hours=round(s["hours"], 2))
            row["dev NLL"] = round(s["best_dev_nll"], 2)
            for t in sets:
                all_, short = _scores(scored_dir(out, name, None if t == PAPER_TEST else t))
                row[f"{t} BLEU"], row[f"{t} BLEU <{SHORT}"] = round(all_, 2), round(short, 2)
        rows.append(row)
    return rows


def judged(out: Path = RESULTS, profile=PROFILE) -> dict[str, list[dict]]:
    """Once every run of the study is evaluated (its manifest is written): the paper's claims
    (:func:`nmt_experiments.paper_claims.claims`) on each of :func:`test_sets`; before: ``{}``."""
    if not (Path(out) / "manifest.json").is_file():
        return {}
    return {
        t: paper_claims.claims(out, view=None if t == PAPER_TEST else t) for t in test_sets(profile)
    }


def prediction(updates: int, pilot: Path = PILOT) -> dict:
    """What the pilot's fits predict for lite's RNNencdec-50 recipe after ``updates``: for each of
    :data:`LITE_ARMS`, the dev NLL of its line in log updates there, and the short-sentence BLEU
    (beam) of the pooled line of ln BLEU in dev NLL at that NLL; ``floor_nll``, the dev NLL at
    which that line crosses the floor."""
    s = read_json(Path(pilot) / "summary.json")
    m = s["maps"]["beam"]
    arms = {}
    for name in LITE_ARMS:
        fit = s["arms"][name]["nll_fit"]
        nll = fit["a"] + fit["b"] * math.log(updates)
        arms[name] = {"dev_nll": nll, "short_bleu": math.exp(m["intercept"] + m["slope"] * nll)}
    return {"updates": updates, "floor_nll": m["floor_nll"], "floor": FLOOR, "arms": arms}


def _trained(rows: list[dict], model: str) -> list[dict]:
    """The rows of ``model``'s trained seeds (its run and its ``-sK`` runs)."""
    return [r for r in rows if r["trained"] and model_of(r["run"]) == model]


def above_floor(rows: list[dict], model: str, test: str) -> tuple[int, float | None]:
    """How many trained seeds of ``model`` ``rows`` hold, and their mean BLEU on ``test``'s
    sentences of fewer than SHORT words (None: none trained)."""
    mine = _trained(rows, model)
    if not mine:
        return 0, None
    return len(mine), float(np.mean([r[f"{test} BLEU <{SHORT}"] for r in mine]))


def figure(out: Path = RESULTS, pilot: Path = PILOT, profile=PROFILE):
    """Dev NLL against updates (log scale) of every trained run of the profile, with lite's
    committed RNNencdec-50 curve, the pilot's line for it extended to the profile's budget
    (dotted) and the dev NLL at which short-sentence BLEU crosses the floor (dashed)."""
    prof = load_profile(profile)
    budget = max(r.train.max_updates for r in prof.runs.values())
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 4.2))
    for row in progress(out, profile):
        c = nll_curve(run_dir(out, row["run"])) if row["trained"] else []
        if c:
            ax.plot([r["update"] for r in c], [r["dev_nll"] for r in c], lw=1.3, label=row["run"])
    lite = nll_curve(home() / "results" / "lite" / "runs" / "RNNencdec-50")
    ax.plot(
        [r["update"] for r in lite], [r["dev_nll"] for r in lite], "k", lw=2.2, label="lite's -50"
    )
    fit = read_json(Path(pilot) / "summary.json")["arms"][LITE_ARMS[0]]["nll_fit"]
    x = np.geomspace(fit["from_update"], budget, 30)
    ax.plot(x, fit["a"] + fit["b"] * np.log(x), "k:", lw=1.2, label="the pilot's line for it")
    p = prediction(budget, pilot)
    ax.axhline(p["floor_nll"], color="gray", ls="--", lw=1, label="dev NLL at the floor")
    ax.set(xlabel="updates", ylabel="dev NLL per sentence (nats)", xscale="log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, ncol=2)
    fig.tight_layout()
    return fig


def _range(values: list[float], digits: int) -> str:
    lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return lo if lo == hi else f"{lo}–{hi}"


def measured_text(rows: list[dict], pred: dict, model: str = "RNNencdec-50") -> str:
    """One or two sentences: what ``model``'s trained seeds measured (dev NLL, short-sentence BLEU
    on each test set, above or below the floor) against the pilot's prediction ``pred``."""
    mine = _trained(rows, model)
    n = len(mine)
    if not n:
        return f"None of {model}'s seeds is trained yet: the prediction is not tested."
    nll = float(np.mean([r["dev NLL"] for r in mine]))
    seeds = "its first seed" if n == 1 else f"the mean of its {n} seeds"
    parts = []
    for t in [k.removesuffix(" BLEU") for k in rows[0] if k.endswith(" BLEU")]:
        _, b = above_floor(rows, model, t)
        parts.append(f"{b:.1f} BLEU on {t} ({'above' if b >= FLOOR else 'below'} the floor)")
    return (
        f"{model}, {seeds}, reached a best dev NLL of {nll:.1f} (predicted: "
        f"{_range([a['dev_nll'] for a in pred['arms'].values()], 1)}) and, on the sentences of "
        f"fewer than {SHORT} words, " + " and ".join(parts) + "."
    )


def cost_text(rows: list[dict], profile=PROFILE, lite: Path = LITE) -> str:
    """What the study has cost and what it still costs: the core-hours of its trained runs, and of
    the others at the rate per update of lite's run of the same model (``results/lite/``, one core
    each) times the profile's budget."""
    prof = load_profile(profile)
    spent = sum(r["hours"] for r in rows if r["trained"])
    left: dict[str, list[float]] = {}
    for r in (r for r in rows if not r["trained"]):
        model = model_of(r["run"])
        s = read_json(run_dir(lite, model) / "train_summary.json")
        left.setdefault(model, []).append(
            s["hours"] / s["updates"] * prof.runs[r["run"]].train.max_updates
        )
    if not left:
        return f"Its {len(rows)} runs took {spent:.1f} hours of one core in all."
    each = ", ".join(
        f"{m} {h[0]:.1f} h" + (f" (×{len(h)})" if len(h) > 1 else "") for m, h in left.items()
    )
    return (
        f"Its trained runs took {spent:.1f} hours of one core; the {sum(map(len, left.values()))} "
        f"left need about {sum(map(sum, left.values())):.0f} more at the rate per update of lite's "
        f"runs of the same models ({each})."
    )


def book_numbers(out: Path = RESULTS, pilot: Path = PILOT, profile=PROFILE) -> dict[str, str]:
    """The numbers chapter 8's section on the study glues, as text: ``{glue name: value}``."""
    prof = load_profile(profile)
    budget = max(r.train.max_updates for r in prof.runs.values())
    rows, pred = progress(out, profile), prediction(budget, pilot)
    done = sum(r["trained"] for r in rows)
    bleus = [a["short_bleu"] for a in pred["arms"].values()]
    where = "past" if min(bleus) >= FLOOR else ("short of" if max(bleus) < FLOOR else "around")
    return {
        "ll_pred_where": where,
        "ll_budget": f"{budget:,}",
        "ll_runs": str(len(rows)),
        "ll_trained": "none" if not done else ("all" if done == len(rows) else str(done)),
        "ll_pred_nll": _range([a["dev_nll"] for a in pred["arms"].values()], 1),
        "ll_pred_bleu": _range([a["short_bleu"] for a in pred["arms"].values()], 1),
        "ll_floor_nll": f"{pred['floor_nll']:.1f}",
        "ll_measured": measured_text(rows, pred),
        "ll_cost": cost_text(rows, profile),
    }
