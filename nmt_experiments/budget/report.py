"""What the budget study's runs show, read from its results directory (``results/budget/``) alone:
the arms' curves (:func:`curves`, :func:`at_minutes`, :func:`reach_minutes`,
:func:`fit_log_linear`), their table (:func:`arm_table`), the noise floor of one run per arm
(:func:`noise_floor`), the findings the book's prose states (:func:`findings`), the chosen search
(:func:`search_choice`), the extended runs (:func:`extended`, :func:`minutes_for_bleu`), and the
study's files written from them (:func:`write_study`). The settings that make a recipe are
:mod:`nmt_experiments.core.recipe`."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from nmt_lib.config import RunConfig, home, run_dir_name, run_from_dict, to_dict
from nmt_lib.io import atomic_write, write_json
from nmt_lib.models import build_model

from ..core import plots
from ..core.markdown import markdown_table
from ..core.provenance import provenance
from ..core.results import eval_curve, run_dir

RESULTS = home() / "results" / "budget"
#: The times (minutes of training, evaluations included) at which the arms are compared.
COMPARE_AT = (5.0, 10.0, 15.0)


def differences(run: RunConfig, ref: RunConfig) -> str:
    """What ``run`` sets differently from ``ref``: ``"train.optimizer=adadelta, train.lr=1.0"``."""
    a, b = to_dict(run), to_dict(ref)
    out = [
        f"{sec}.{k}={v}"
        for sec in ("model", "data", "train", "search")
        for k, v in a[sec].items()
        if v != b[sec][k]
    ]
    return ", ".join(out) or "(reference)"


def curves(out: Path) -> dict[str, list[dict]]:
    """Every arm's evaluations in order: ``{arm: [{"minutes", "update", "dev_nll", "dev_bleu"}]}``
    (:func:`nmt_experiments.core.results.eval_curve`)."""
    arms = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["runs"]
    return {name: eval_curve(run_dir(out, name)) for name in arms}


def at_minutes(curve: list[dict], minutes: float, key: str = "dev_nll") -> float | None:
    """``key`` at ``minutes`` of training, linearly interpolated between the two evaluations
    around it; None before the first or after the last."""
    for a, b in zip(curve, curve[1:], strict=False):
        if a["minutes"] <= minutes <= b["minutes"]:
            w = (minutes - a["minutes"]) / max(b["minutes"] - a["minutes"], 1e-9)
            return a[key] + w * (b[key] - a[key])
    if curve and abs(curve[-1]["minutes"] - minutes) < 1e-6:
        return curve[-1][key]
    return None


def arm_table(out: Path, compare_at: tuple[float, ...] = COMPARE_AT) -> list[dict]:
    """One row per arm: what differs from the reference, parameters, updates, target tokens per
    second, the median gradient norm (of the loss as the arm normalises it, before clipping) and
    the share of clipped updates, the subset dev NLL at each of ``compare_at`` minutes, the whole dev set's NLL and the
    greedy dev BLEU at the end. Sorted as the study profile lists the arms."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))

    configs = {n: run_from_dict(c) for n, c in manifest["configs"].items()}
    ref = configs[manifest["runs"][0]]
    curve = curves(out)
    rows = []
    for name in manifest["runs"]:
        d = out / "runs" / run_dir_name(name)
        s = json.loads((d / "train_summary.json").read_text(encoding="utf-8"))
        f = json.loads((d / "final.json").read_text(encoding="utf-8"))
        log = [json.loads(x) for x in (d / "train_log.jsonl").read_text("utf-8").splitlines()]
        train = [r for r in log if r.get("kind") == "train"]
        speed = [r["tokens_per_s"] for r in train]
        norms = sorted(r["grad_norm"] for r in train)
        row = {
            "arm": name,
            "differs from the reference": differences(configs[name], ref),
            "parameters (M)": round(manifest["parameters"][name] / 1e6, 2),
            "updates": s["updates"],
            "minutes": round(s["hours"] * 60, 1),
            "target tokens/s": round(sorted(speed)[len(speed) // 2]) if speed else None,
            "median gradient norm": round(norms[len(norms) // 2], 2) if norms else None,
            "clipped (%)": round(100 * sum(r["clip_rate"] for r in train) / len(train), 1)
            if train
            else None,
        }
        for m in compare_at:
            v = at_minutes(curve[name], m)
            row[f"dev NLL @{m:g} min"] = None if v is None else round(v, 2)
        row["dev NLL (all dev, end)"] = round(f["dev_nll"], 2)
        row["dev BLEU (greedy, end)"] = round(f["dev_bleu_greedy"], 2)
        rows.append(row)
    return rows


def reach_minutes(curve: list[dict], nll: float) -> float | None:
    """When a curve first reaches dev NLL ``nll`` (minutes, interpolated); None if it never does."""
    if curve and curve[0]["dev_nll"] <= nll:
        return curve[0]["minutes"]
    for a, b in zip(curve, curve[1:], strict=False):
        if b["dev_nll"] <= nll < a["dev_nll"]:
            return a["minutes"] + (a["dev_nll"] - nll) / (a["dev_nll"] - b["dev_nll"]) * (
                b["minutes"] - a["minutes"]
            )
    return None


def fit_log_linear(updates, nll) -> dict:
    """Least-squares fit of ``nll = alpha - beta * ln(updates)``: over the minutes of a budget study,
    a learning curve falls about linearly in the logarithm of the updates (a power law's
    asymptote cannot be told from such a short curve). ``rmse`` in the units of ``nll``."""

    x, y = np.log(np.asarray(updates, dtype=float)), np.asarray(nll, dtype=float)
    slope, alpha = np.polyfit(x, y, 1)
    rmse = float(np.sqrt(np.mean((alpha + slope * x - y) ** 2)))
    return {"alpha": float(alpha), "beta": float(-slope), "rmse": rmse}


#: Pairs of arms that take the same steps once every update is clipped: each pair differs only in
#: the scale of its loss (``train.loss``), and clipping turns either gradient into the same unit
#: vector. Natural replicates: what separates them is the noise of the setting (rounding, and how
#: many updates the shared machine allowed in the same minutes).
REPLICATES = (("paper", "adadelta-sentence"), ("adam-1e-3", "adam-1e-3-loss-sum"))


def clipped_share(out: Path, arm: str) -> float:
    """The share of ``arm``'s updates that were clipped, from its training log (0..1)."""
    log = (out / "runs" / run_dir_name(arm) / "train_log.jsonl").read_text(encoding="utf-8")
    train = [r for r in map(json.loads, log.splitlines()) if r.get("kind") == "train"]
    return sum(r["clip_rate"] for r in train) / len(train) if train else 0.0


def noise_floor(
    out: Path, pairs: tuple = REPLICATES, compare_at: tuple[float, ...] = COMPARE_AT
) -> dict:
    """The noise floor of the subset dev NLL at equal time: for each pair of arms in ``pairs`` that
    the study has, that differ in ``train.loss`` only (else ValueError) and clipped every update
    (else the pair is not a replicate and is left out), the difference of their dev NLL at each of
    ``compare_at`` minutes. ``floor``: the largest such difference (None without a replicate); a
    difference between two arms below it is not resolved by one run of each.
    ``{"floor", "differences": [{"arms", "minutes", "difference"}], "pairs": [(a, b), ...]}``."""

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    configs = {n: run_from_dict(c) for n, c in manifest["configs"].items()}
    curve = curves(out)
    diffs, used = [], []
    for a, b in pairs:
        if a not in curve or b not in curve:
            continue
        diff = differences(configs[a], configs[b])
        if diff == "(reference)" or any(not d.startswith("train.loss=") for d in diff.split(", ")):
            raise ValueError(f"{a} and {b} differ in more than train.loss: {diff}")
        if min(clipped_share(out, a), clipped_share(out, b)) < 1.0:
            continue  # some updates unclipped: the two took different steps
        used.append((a, b))
        for m in compare_at:
            va, vb = at_minutes(curve[a], m), at_minutes(curve[b], m)
            if va is not None and vb is not None:
                diffs.append({"arms": (a, b), "minutes": m, "difference": abs(va - vb)})
    floor = max((d["difference"] for d in diffs), default=None)
    return {"floor": floor, "differences": diffs, "pairs": used}


def findings(out: Path, compare_at: float = COMPARE_AT[-1]) -> dict:
    """What the study shows, computed from its runs, for the book's prose: the arms ranked by dev
    NLL at ``compare_at`` minutes (or when the shortest arm stopped, if sooner), the chosen arm (the lowest), how long it took to reach the NLL
    the paper's recipe reached at ``compare_at``, the paper arm's gradient norms and clip rate, and
    a log-linear fit of the chosen arm's curve (:func:`fit_log_linear`). Arms with another target
    shortlist are listed apart: their NLL is over other symbols."""

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    vocab = {n: run_from_dict(c).model.trg_vocab for n, c in manifest["configs"].items()}
    curve = curves(out)
    compare_at = min(compare_at, *(c[-1]["minutes"] for c in curve.values() if c))  # all reached
    at = {n: at_minutes(c, compare_at) for n, c in curve.items()}
    ref = manifest["runs"][0]
    # NLL is comparable only over one target vocabulary: a shortlist maps the rarer words to <unk>
    ranked = sorted(
        (n for n in at if at[n] is not None and vocab[n] == vocab[ref]), key=lambda n: at[n]
    )
    chosen = ranked[0]
    result = {
        "compare_at": compare_at,
        "ranked": [(n, at[n]) for n in ranked],
        "chosen": chosen,
        "other_vocabulary": [n for n in curve if vocab[n] != vocab[ref]],
    }
    if "paper" in curve and at.get("paper") is not None:
        log = out / "runs" / "paper" / "train_log.jsonl"
        recs = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
        train = [r for r in recs if r.get("kind") == "train"]
        norms = sorted(r["grad_norm"] for r in train)
        result["paper"] = {
            "dev_nll": at["paper"],
            "median_grad_norm": norms[len(norms) // 2],
            "clip_rate": sum(r["clip_rate"] for r in train) / len(train),
            "chosen_reaches_it_at": reach_minutes(curve[chosen], at["paper"]),
        }
    pts = [r for r in curve[chosen] if r["minutes"] >= min(1.0, compare_at / 10)]
    result["fit"] = fit_log_linear([r["update"] for r in pts], [r["dev_nll"] for r in pts])
    result["updates_per_minute"] = pts[-1]["update"] / pts[-1]["minutes"]
    return result


def search_choice(results_dir=RESULTS) -> dict:
    """The search settings of ``search.csv`` with the highest dev BLEU: ``{"normalize": ...}``."""
    with open(Path(results_dir) / "search.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    best = max(rows, key=lambda r: float(r["dev BLEU"]))
    return {
        k: v == "True"
        for k, v in ((k[len("search.") :], v) for k, v in best.items() if k.startswith("search."))
    }


def extended(results_dir=RESULTS) -> dict[str, dict]:
    """What :func:`~nmt_experiments.budget.study.extend_arm` left, by directory name: updates, minutes,
    the whole dev set's NLL, test BLEU (tokenized, All) with its brevity penalty, and the
    per-sentence statistics for paired bootstrap; the study arm it started from is included under
    its own name when it was scored on the test set."""
    out = Path(results_dir)
    dirs = sorted((out / "extended").glob("*/bleu.json")) + sorted(
        (out / "runs").glob("*/bleu.json")
    )
    result = {}
    for f in dirs:
        d = f.parent
        bleu = json.loads(f.read_text(encoding="utf-8"))
        summary = json.loads((d / "train_summary.json").read_text(encoding="utf-8"))
        by_len = json.loads((d / "bleu_by_length.json").read_text(encoding="utf-8"))
        result[d.name if d.parent.name == "extended" else f"{d.name} (study arm)"] = {
            "arch": json.loads((d / "config.json").read_text(encoding="utf-8"))["model"]["arch"],
            "updates": summary["updates"],
            "minutes": summary["hours"] * 60,
            "dev_nll": json.loads((d / "final.json").read_text("utf-8"))["dev_nll"]
            if (d / "final.json").is_file()
            else None,
            "test_bleu": bleu["all"]["tok"]["score"],
            "brevity_penalty": bleu["all"]["tok"]["bp"],
            "stats_tok": by_len["stats_tok"],
            "src_len": by_len["src_len"],
            "dir": d,
        }
    return result


def minutes_for_bleu(points: list[tuple[float, float]], target: float) -> float | None:
    """The minutes at which ``BLEU = α + β ln(minutes)``, drawn through two ``(minutes, BLEU)``
    points, reaches ``target``: a rough extrapolation (None if the line does not rise)."""

    (t1, b1), (t2, b2) = sorted(points)[:1] + sorted(points)[-1:]
    if t2 <= t1 or b2 <= b1:
        return None
    slope = (b2 - b1) / math.log(t2 / t1)
    return t2 * math.exp((target - b2) / slope)


def write_study(results_dir, walls: dict | None = None, prof=None, git: dict | None = None) -> dict:
    """``manifest.json`` (when ``walls`` is given: after training the arms of the profile ``prof``
    from the commit ``git``), ``arms.csv|md``, ``curves.csv`` and ``budget_curves.png`` from the
    arms' runs under ``results_dir``."""

    out = Path(results_dir)
    if walls is not None:  # the arms done so far, in the profile's order, with their wall times
        old = out / "manifest.json"
        walls = {
            **(json.loads(old.read_text("utf-8"))["wall_seconds"] if old.is_file() else {}),
            **walls,
        }
        manifest = provenance(prof, git)
        manifest["runs"] = [
            n
            for n in prof.runs
            if n in walls and (out / "runs" / run_dir_name(n) / "final.json").is_file()
        ]
        manifest["configs"] = {n: manifest["configs"][n] for n in manifest["runs"]}
        manifest["parameters"] = {
            n: sum(p.numel() for p in build_model(prof.runs[n].model).parameters())
            for n in manifest["runs"]
        }
        manifest["wall_seconds"] = {n: walls[n] for n in manifest["runs"]}
        write_json(out / "manifest.json", manifest)
    rows = arm_table(out)
    with atomic_write(out / "arms.csv") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with atomic_write(out / "arms.md") as f:
        f.write(markdown_table(rows) + "\n")
    curve = curves(out)
    with atomic_write(out / "curves.csv") as f:
        w = csv.DictWriter(f, fieldnames=["arm", "minutes", "update", "dev_nll", "dev_bleu"])
        w.writeheader()
        w.writerows({"arm": name, **r} for name, recs in curve.items() for r in recs)
    plots.save(plots.budget_curves(curve), out / "budget_curves.png")
    return {"rows": rows, "curves": curve}
