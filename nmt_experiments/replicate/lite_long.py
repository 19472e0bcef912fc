"""The lite-long study (``studies/lite-long.toml``, ``results/lite-long/``) as chapter 16 reads it:
each run's state, its BLEU on newstest2014 and on the held-out view, beside the short-sentence BLEU
that the learning floor is judged on (:func:`progress`); what the pilot (``results/pilot/``)
predicted for it (:func:`prediction`); its dev NLL curves against that prediction
(:func:`figure`); the study's claims on its pair of models at their unequal updates
(:func:`claims`, :func:`judged`, written by :func:`write`); and what the runs it leaves out would
cost (:func:`left_out_text`)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from nmt_lib.config import PROFILE_DIR, home, load_profile
from nmt_lib.io import read_json

from ..core.claims import FLOOR, NOT_TESTABLE, REPRODUCED, SHORT, short_bleu
from ..core.judge import Judge
from ..core.markdown import write_table
from ..core.plots import COLUMN_WIDTH
from ..core.results import model_of, nll_curve, paper_table, run_dir, scored_dir
from . import paper_claims, reader, rerun

PROFILE = PROFILE_DIR / "studies" / "lite-long.toml"
RESULTS = home() / "results" / "lite-long"
PILOT = home() / "results" / "pilot"
LITE = home() / "results" / "lite"
#: The test sets each run is scored on: the paper's, then the profile's views.
PAPER_TEST = "newstest2014"
#: The study's pair of models (:func:`claims`): the better one by the paper's Table 1, then the
#: baseline.
PAIR = ("RNNsearch-50", "RNNencdec-50")
#: The runs the profile leaves out, each with its budget in updates and why (:func:`left_out_text`).
LEFT_OUT = {
    "RNNencdec-30": (45000, "the -30 pair"),
    "RNNsearch-30": (45000, "the -30 pair"),
    "RNNencdec-50-s3": (45000, "a third seed"),
    "RNNsearch-50-s3": (18000, "a third seed"),
}
#: The wall time a run may take where its checkpoint is kept (DEVELOPERS: about 2.5 hours).
SITTING_HOURS = 2.5
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
    """Once every run of the study is evaluated (its manifest is written): the study's claims
    (:func:`claims`) on each of :func:`test_sets`; before: ``{}``."""
    if not (Path(out) / "manifest.json").is_file():
        return {}
    rows = progress(out, profile)
    return {t: claims(out, rows, None if t == PAPER_TEST else t) for t in test_sets(profile)}


def write(out: Path = RESULTS, profile=PROFILE) -> list[Path]:
    """``claims.csv`` and ``claims.md`` of the study on newstest2014 (into ``out``) and on each
    view (into ``views/<view>/``), from :func:`judged`; the directories written."""
    written = []
    for t, rows in judged(out, profile).items():
        view = None if t == PAPER_TEST else t
        to = out / "views" / view if view else out
        to.mkdir(parents=True, exist_ok=True)
        write_table(to, "claims", rows, paper_claims.note(out, out.name, view))
        written.append(to)
    return written


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


def groups(rows: list[dict]) -> dict[str, list[str]]:
    """The trained runs of ``rows`` (:func:`progress`) by model: ``{model: its trained seeds}``."""
    found: dict[str, list[str]] = {}
    for r in rows:
        if r["trained"]:
            found.setdefault(model_of(r["run"]), []).append(r["run"])
    return found


def _updates(rows: list[dict], runs: list[str]) -> list[int]:
    return sorted({r["updates"] for r in rows if r["run"] in runs})


def claims(out: Path, rows: list[dict], view: str | None = None, n_samples: int = 1000):
    """The study's claims: Table 1's claim on :data:`PAIR`, RNNsearch-50 against RNNencdec-50, and
    Figure 2's two parts on them, by the rules of :class:`~nmt_experiments.core.judge.Judge` on
    the trained seeds (``rows``: :func:`progress`), on newstest2014 or on the test set ``view``;
    each row names the updates of each model. Where RNNsearch-50 had fewer updates than
    RNNencdec-50, a win is reproduced a
    fortiori, while a tie or a loss says nothing about equal updates: not testable. ``[]`` while
    either model has no trained seed."""
    g = groups(rows)
    if not all(m in g for m in PAIR):
        return []
    better, base = PAIR
    judge = Judge.of(out, {m: g[m] for m in PAIR}, n_samples, view)
    paper = {k: float(v["bleu_all"]) for k, v in paper_table("table1").items()}
    ups = {m: _updates(rows, g[m]) for m in PAIR}
    trained = "; ".join(f"{m}: {' and '.join(f'{u:,}' for u in ups[m])} updates" for m in PAIR)
    fewer = max(ups[better]) < min(ups[base])
    out_rows = [
        judge.beats(
            f"{better} beats {base} (Table 1)",
            f"{better} {paper[better]:.2f} vs {base} {paper[base]:.2f}",
            [PAIR],
        ),
        judge.holds_up(
            f"{better} shows no deterioration on long sentences (Figure 2)",
            f"Figure 2: {better}'s curve does not fall, even past 50 words",
            better,
        ),
        judge.holds_up_better(
            f"{base}'s BLEU falls with length where {better}'s holds up (Figure 2)",
            f"Figure 2: {base}'s curve falls with length; {better}'s does not",
            better,
            [base],
        ),
    ]
    for r in out_rows:
        r["ours"] = f"{trained}. {r['ours']}"
    first = out_rows[0]
    if fewer and first["verdict"] == REPRODUCED:
        first["reason"] += f", though {better} had fewer updates: a fortiori"
    elif fewer and first["verdict"] != NOT_TESTABLE:
        first["reason"] = (
            f"{better} had fewer updates than {base}, so a tie or a loss says nothing about "
            f"equal updates (at these budgets: {first['verdict']}, {first['reason']})"
        )
        first["verdict"] = NOT_TESTABLE
    if fewer and out_rows[2]["verdict"] != NOT_TESTABLE:
        out_rows[2]["reason"] += f", at unequal updates ({trained})"
    return out_rows


def budget_text(rows: list[dict], profile=PROFILE) -> str:
    """A sentence on the runs whose budget is below the study's: how many updates they have, and
    what the study's budget would take at their measured rate per update (empty: none)."""
    prof = load_profile(profile)
    budget = max(r.train.max_updates for r in prof.runs.values())
    short = [n for n, r in prof.runs.items() if r.train.max_updates < budget]
    if not short:
        return ""
    each = sorted({prof.runs[n].train.max_updates for n in short})
    rate = [r["hours"] / r["updates"] for r in rows if r["trained"] and r["run"] in short]
    took = (
        f" at their measured rate, {budget:,} would take {np.mean(rate) * budget:.1f} hours of one "
        "core each"
        if rate
        else ""
    )
    return (
        f"{', '.join(short[:-1]) + ' and ' if len(short) > 1 else ''}{short[-1]} are trained for {' or '.join(f'{u:,}' for u in each)} updates, "
        f"fewer than the study's {budget:,}:{took}, while the machines that train this study are "
        "held about three hours at a time and keep no checkpoint beyond that, so these runs are "
        "what two runs side by side reach in one such sitting (studies/lite-long.toml)."
    )


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


def _rate(rows: list[dict], model: str, lite: Path) -> float:
    """Hours of one core per update of ``model``: the mean of this study's trained seeds of it
    (``rows``: :func:`progress`), else lite's run of it (``results/lite/``)."""
    if mine := _trained(rows, model):
        return float(np.mean([x["hours"] / x["updates"] for x in mine]))
    s = read_json(run_dir(lite, model) / "train_summary.json")
    return s["hours"] / s["updates"]


def cost_text(rows: list[dict], profile=PROFILE, lite: Path = LITE) -> str:
    """What the study has cost and what it still costs: the core-hours of its trained runs, and of
    the others at the rate per update that this study's runs of the same model measured (where
    none is trained: lite's run of it, ``results/lite/``, one core each) times the profile's
    budget."""
    prof = load_profile(profile)
    spent = sum(r["hours"] for r in rows if r["trained"])
    left: dict[str, dict[float, int]] = {}  # {model: {hours of one run: how many runs}}
    for r in (r for r in rows if not r["trained"]):
        model = model_of(r["run"])
        hours = _rate(rows, model, lite) * prof.runs[r["run"]].train.max_updates
        left.setdefault(model, {}).setdefault(hours, 0)
        left[model][hours] += 1
    if not left:
        return f"Its {len(rows)} runs took {spent:.1f} hours of one core in all."
    each = ", ".join(
        f"{m} " + " and ".join(f"{h:.1f} h" + (f" (×{k})" if k > 1 else "") for h, k in hs.items())
        for m, hs in left.items()
    )
    n = sum(k for hs in left.values() for k in hs.values())
    total = sum(h * k for hs in left.values() for h, k in hs.items())
    return (
        f"Its trained runs took {spent:.1f} hours of one core; the {n} left need about "
        f"{total:.0f} more at the rate per update of this study's runs of the same model (lite's, "
        f"for a model not trained here yet: {each})."
    )


def left_out_text(rows: list[dict], lite: Path = LITE) -> str:
    """What the runs of :data:`LEFT_OUT` would cost: hours of one core at the rate per update of
    this study's runs of the same model (lite's run of it where none is trained here), and of one
    core of the precision of lite's rerun check (:func:`rerun.pace_ratio`), against the
    :data:`SITTING_HOURS` a run may take where its checkpoint is kept."""
    p = rerun.pace_ratio(lite)
    parts: dict[str, list[str]] = {}
    longer = []  # the runs longer than a sitting on the slower core
    for name, (updates, why) in LEFT_OUT.items():
        rate = _rate(rows, model_of(name), lite)
        hours = [rate * updates] + ([rate * updates * p["ratio"]] if p else [])
        parts.setdefault(why, []).append(
            f"{name} ({updates:,} updates: " + " and ".join(f"{h:.1f}" for h in hours) + " h)"
        )
        if hours[-1] > SITTING_HOURS:
            longer.append(name)
    cores = "hours of one core" + (
        f" as the study's runs were trained, then of one {p['precision']} core at the ratio of "
        f"paces that lite's {p['run']} rerun check measured on an {p['cpu_model']} "
        f"(×{p['ratio']:.1f})"
        if p
        else ""
    )
    slow = f"one {p['precision']} core" if p else "one core"
    return (
        "The profile leaves out "
        + "; and ".join(f"{why}, {' and '.join(ps)}" for why, ps in parts.items())
        + f" ({cores}). A run may take about {SITTING_HOURS:g} hours where its checkpoint is "
        f"kept: on {slow}, {', '.join(longer) or 'none'} take longer. The -30 pair asks nothing "
        "of the floor, which is RNNencdec-50's question (lite's -30 runs are in results/lite/)."
    )


def book_numbers(out: Path = RESULTS, pilot: Path = PILOT, profile=PROFILE) -> dict[str, str]:
    """The numbers chapter 16's section on the study glues, as text: ``{glue name: value}``."""
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
        "ll_left_out": left_out_text(rows),
        "ll_budgets": budget_text(rows, profile),
        "ll_reader": reader.reader_text(out, LITE),
    }
