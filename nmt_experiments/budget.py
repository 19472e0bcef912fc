"""The budget study: dev NLL and dev BLEU against wall-clock time for training recipes, model sizes,
batch sizes and shortlists, at equal time on one CPU core (``results/budget/``).

    python -m nmt_experiments.budget --train --jobs 2   # train every arm (resumable), then write the tables
    python -m nmt_experiments.budget --search           # beam search settings on dev, with the chosen arm
    python -m nmt_experiments.budget --extend 40        # the chosen arm on to 40 minutes, test BLEU
    python -m nmt_experiments.budget --sharing          # what two arms side by side cost each
    python -m nmt_experiments.budget                    # rewrite the tables and the figure from the runs

The arms are the runs of a study profile (default ``nmt_lib/profiles/studies/budget.toml``): one model each,
the same time budget, each differing from the reference arm (the first) in the settings that
:func:`differences` lists. Training logs the dev NLL of a fixed dev subset every ``eval_every``
updates (``train.dev_nll_sentences``); when an arm is done, :func:`final_eval` scores the whole dev
set. What one arm writes, under ``runs/<arm>/``: ``config.json``, ``train_log.jsonl``,
``train_summary.json`` and ``final.json``. The study as a whole: ``arms.csv|md`` (:func:`arm_table`),
``curves.csv`` (every evaluation of every arm), ``budget_curves.png``, ``manifest.json`` and
``search.csv`` (:func:`search_study`).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch

from nmt_experiments import plots
from nmt_experiments.replicate import git_state, provenance
from nmt_experiments.results import eval_curve, run_dir
from nmt_experiments.tables import markdown_table
from nmt_lib import bleu
from nmt_lib.backend import backend
from nmt_lib.checkpoint import default_checkpoint_dir, load_trained, located
from nmt_lib.config import (
    PROFILE_DIR,
    RunConfig,
    home,
    load_profile,
    model_config,
    run_dir_name,
    run_from_dict,
    to_dict,
)
from nmt_lib.data import TrainIterator, prepare
from nmt_lib.decoding import decode
from nmt_lib.evaluate import dev_metrics, dev_subset, evaluate_run
from nmt_lib.io import atomic_write, write_json
from nmt_lib.models import build_model
from nmt_lib.train import Diverged, Trainer, train_run

PROFILE = PROFILE_DIR / "studies" / "budget.toml"
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


#: The settings that make a recipe: what the study varies, and what the ``lite`` profile takes from
#: the chosen arm (the budget, evaluation and model-specific settings such as ``max_len`` are not).
RECIPE = {
    "model": ("m", "n", "n_dec", "n_align", "l", "output_rank", "init", "src_vocab", "trg_vocab"),
    "data": ("batch_size", "src_words", "trg_words"),
    "train": (
        "optimizer",
        "lr",
        "rho",
        "eps",
        "loss",
        "lr_schedule",
        "lr_decay",
        "warmup_updates",
        "clip_norm",
        "precision",
    ),
}


def recipe(run: RunConfig) -> dict:
    """The :data:`RECIPE` settings of ``run``: ``{"train.optimizer": "adam", ...}``."""
    return {
        f"{sec}.{k}": getattr(getattr(run, sec), k) for sec, keys in RECIPE.items() for k in keys
    }


def recipe_differences(run: RunConfig, arm: RunConfig) -> str:
    """The :data:`RECIPE` settings in which ``run`` differs from ``arm`` ("" when none)."""
    a, b = recipe(run), recipe(arm)
    return ", ".join(f"{k}={a[k]!r} (arm: {b[k]!r})" for k in a if a[k] != b[k])


def arm_model(out_dir: Path, run: RunConfig):
    """The model that the run in ``out_dir`` ended with (its ``train_summary.json`` names the
    checkpoint), ready to evaluate, the process tuned for its backend."""
    summary = json.loads((out_dir / "train_summary.json").read_text(encoding="utf-8"))
    loaded = load_trained(located(summary["model_checkpoint"], run))
    loaded.on.tune_process()
    return loaded.model


def final_eval(run: RunConfig, out_dir: Path, prep, bleu_sentences: int = 500) -> dict:
    """The whole dev set's NLL per sentence and the greedy BLEU of its first ``bleu_sentences``
    sentences, of the model an arm ended with; written to ``final.json``."""

    model = arm_model(out_dir, run)
    cfg = dataclasses.replace(
        run, train=dataclasses.replace(run.train, dev_bleu_sentences=bleu_sentences)
    )
    m = dev_metrics(model, prep, cfg, "cpu", full=True)
    result = {
        "dev_nll": m["dev_nll"],
        "dev_nll_sentences": m["dev_nll_sentences"],
        "dev_bleu_greedy": m["dev_bleu"],
        "dev_bleu_sentences": min(bleu_sentences, len(prep.dev)),
        "seconds": m["eval_seconds"],
    }
    write_json(out_dir / "final.json", result)
    return result


def train_arm(profile: str, results_dir: str, data_dir: str | None, name: str) -> tuple[str, dict]:
    """Train (resumably) one arm and score it on the whole dev set; returns ``(name, seconds)``.
    An arm that diverges is an outcome of the study, not an error: its ``final.json`` says so,
    with no dev score."""

    run = _load(profile, data_dir).runs[name]
    out = Path(results_dir) / "runs" / run_dir_name(name)
    prep = prepare(run.data)
    t0 = time.time()
    try:
        summary = train_run(run, out, prep=prep, progress=False)
    except Diverged as e:
        write_json(
            out / "final.json",
            {"diverged": str(e), "updates": e.update, "dev_nll": None, "dev_bleu_greedy": None},
        )
        print(f"[budget] {name}: diverged at update {e.update}", flush=True)
        return name, {"train_s": round(time.time() - t0, 1), "final_eval_s": 0.0}
    t1 = time.time()
    result = final_eval(run, out, prep)
    print(
        f"[budget] {name}: {summary['updates']} updates in {summary['hours'] * 60:.1f} min, "
        f"dev NLL {result['dev_nll']:.2f}, dev BLEU (greedy) {result['dev_bleu_greedy']:.2f}",
        flush=True,
    )
    return name, {"train_s": round(t1 - t0, 1), "final_eval_s": round(time.time() - t1, 1)}


def arm_run(results_dir, arm: str, data_dir=None) -> RunConfig:
    """The resolved config an arm of the study in ``results_dir`` trained with (its manifest),
    with ``data_dir`` applied."""

    manifest = json.loads((Path(results_dir) / "manifest.json").read_text(encoding="utf-8"))
    run = run_from_dict(manifest["configs"][arm])
    if data_dir is None:
        return run
    return dataclasses.replace(run, data=dataclasses.replace(run.data, data_dir=str(data_dir)))


#: The search settings compared on dev (:func:`search_study`): the paper's (GroundHog's) unnormalised
#: beam search, and the cost divided by the length.
SEARCH_OPTIONS = ({"normalize": False}, {"normalize": True})


def dev_search(model, prep, idx: list[int], search, precision: str = "fp32", on=None) -> dict:
    """``model`` decodes the dev sentences ``idx`` with ``search`` on its backend ``on``
    (:func:`nmt_lib.backend.backend`): their tokenized BLEU, brevity penalty and length ratio, and
    the seconds it took."""
    t0 = time.perf_counter()
    hyps = decode(model, [prep.dev.x[i] for i in idx], search, "cpu", precision, on=on)
    seconds = time.perf_counter() - t0
    refs = [" ".join(prep.dev.ref_tok[i]) for i in idx]
    score = bleu.bleu_tok([" ".join(prep.trg_vocab.decode(h.tokens)) for h in hyps], refs)
    return {
        "dev sentences": len(idx),
        "dev BLEU": round(score.score, 2),
        "brevity penalty": round(score.bp, 3),
        "length ratio": round(score.sys_len / score.ref_len, 3),
        "seconds": round(seconds, 1),
    }


def search_study(
    results_dir=RESULTS, arm: str | None = None, sentences: int = 1000, data_dir=None
) -> list[dict]:
    """Beam search settings chosen on dev, never on the test set: ``arm``'s final model (default:
    the chosen arm) decodes ``sentences`` dev sentences (:func:`~nmt_lib.evaluate.dev_subset`) with
    each of :data:`SEARCH_OPTIONS`; tokenized BLEU, brevity penalty and length ratio go to
    ``search.csv``."""

    out = Path(results_dir)
    arm = arm or findings(out)["chosen"]
    run = arm_run(out, arm, data_dir)
    prep = prepare(run.data)
    model = arm_model(out / "runs" / run_dir_name(arm), run)
    idx = dev_subset(len(prep.dev), sentences)
    rows = []
    for option in SEARCH_OPTIONS:
        search = dataclasses.replace(run.search, **option)
        rows.append(
            {
                "arm": arm,
                **{f"search.{k}": v for k, v in option.items()},
                "beam": search.beam,
                **dev_search(
                    model, prep, idx, search, run.train.precision, backend(run.train.backend)
                ),
            }
        )
    with atomic_write(out / "search.csv") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def extend_arm(
    results_dir=RESULTS,
    arm: str | None = None,
    minutes: float = 40.0,
    data_dir=None,
    arch: str | None = None,
) -> dict:
    """The chosen arm (or ``arm``) trained on to ``minutes`` of one core, then evaluated on the test
    set as the profiles' models are (:func:`nmt_lib.evaluate.evaluate_run`, with the search
    settings :func:`search_choice` picked on dev): how far the recipe gets in a ``lite`` model's
    budget. The arm's run and checkpoint are copied to ``extended/<arm>/`` first, so the study's
    arms stay as they were (the arm itself is evaluated on the test set first, for a second point
    on the curve); rerunning resumes. With another ``arch`` (``"RNNencdec"``) the same
    recipe trains that model from scratch for ``minutes``, into ``extended/<arm>-<arch>/``."""

    out = Path(results_dir)
    arm = arm or findings(out)["chosen"]
    studied = arm_run(out, arm, data_dir)
    run = dataclasses.replace(
        studied,
        train=dataclasses.replace(studied.train, max_hours=minutes / 60, max_updates=None),
        search=dataclasses.replace(studied.search, **search_choice(out)),
    )
    fresh = arch is not None and arch != run.model.arch
    if fresh:
        run = dataclasses.replace(run, model=model_config({**to_dict(run.model), "arch": arch}))
    src = out / "runs" / run_dir_name(arm)
    dst = out / "extended" / (run_dir_name(arm) + (f"-{arch}" if fresh else ""))
    ckpt = default_checkpoint_dir(run, dst)
    if not fresh and not (ckpt / "last.pt").is_file():
        shutil.copytree(default_checkpoint_dir(run, src), ckpt, dirs_exist_ok=True)
        shutil.copytree(src, dst, dirs_exist_ok=True)
        (dst / "final.json").unlink(missing_ok=True)
    prep = prepare(run.data)
    if not fresh and not (src / "bleu.json").is_file():  # the arm itself on the test set, as it is
        evaluate_run(dataclasses.replace(run, train=studied.train), src, prep=prep)
    t0 = time.time()
    summary = train_run(run, dst, prep=prep, progress=False)
    t1 = time.time()
    result = evaluate_run(run, dst, prep=prep)  # attention.json: Figure 3's sentences
    final = final_eval(run, dst, prep)
    walls = {"train_s": round(t1 - t0, 1), "evaluate_s": round(time.time() - t1, 1)}
    print(
        f"[budget] {dst.name} extended: {summary['updates']} updates in {summary['hours'] * 60:.1f} min,"
        f" dev NLL {final['dev_nll']:.2f}, test BLEU {result['all']['tok']['score']:.2f}",
        flush=True,
    )
    write_json(dst / "walls.json", walls)
    return {"arm": arm, "summary": summary, "bleu": result, "final": final, "walls": walls}


def _seconds_per_step(profile: str, arm: str, steps: int, data_dir=None) -> float:
    """Seconds per training update of ``arm`` (a fresh model, after 3 warm-up updates)."""

    run = _load(profile, data_dir).runs[arm]
    torch.set_num_threads(run.train.threads or 1)
    prep = prepare(run.data)
    on = backend(run.train.backend)
    on.tune_process()
    torch.manual_seed(run.train.seed)
    model = build_model(run.model, on)
    trainer = Trainer(run, model, TrainIterator.from_config(prep.train, run.data), on=on)
    for _ in range(3):
        trainer.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.step()
    return (time.perf_counter() - t0) / steps


def sharing_cost(
    profile=PROFILE, results_dir=RESULTS, arm: str | None = None, steps: int = 40, data_dir=None
) -> dict:
    """What training two arms side by side costs each: seconds per update of ``arm`` (default:
    the reference) alone, then in two processes at once, one thread each; ``sharing.json``."""

    arm = arm or next(iter(_load(profile, data_dir).runs))
    args = (str(profile), arm, steps, data_dir)
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        alone = pool.submit(_seconds_per_step, *args).result()
        shared = [f.result() for f in [pool.submit(_seconds_per_step, *args) for _ in range(2)]]
    result = {
        "arm": arm,
        "steps": steps,
        "alone_s_per_update": alone,
        "shared_s_per_update": sum(shared) / 2,
        "slowdown": sum(shared) / 2 / alone,
    }
    write_json(Path(results_dir) / "sharing.json", result)
    return result


def extended(results_dir=RESULTS) -> dict[str, dict]:
    """What :func:`extend_arm` left, by directory name: updates, minutes, the whole dev set's NLL,
    test BLEU (tokenized, All) with its brevity penalty, and the per-sentence statistics for
    paired bootstrap; the study arm it started from is included under its own name when it was
    scored on the test set."""
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


def search_choice(results_dir=RESULTS) -> dict:
    """The search settings of ``search.csv`` with the highest dev BLEU: ``{"normalize": ...}``."""
    with open(Path(results_dir) / "search.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    best = max(rows, key=lambda r: float(r["dev BLEU"]))
    return {
        k: v == "True"
        for k, v in ((k[len("search.") :], v) for k, v in best.items() if k.startswith("search."))
    }


def _load(profile, data_dir):
    overrides = {"data": {"data_dir": str(data_dir)}} if data_dir is not None else {}
    return load_profile(profile, **overrides)


def train_study(
    profile: str | os.PathLike = PROFILE,
    results_dir: str | os.PathLike = RESULTS,
    data_dir: str | None = None,
    jobs: int = 1,
    arms: list[str] | None = None,
) -> dict:
    """Train every arm (or ``arms``), ``jobs`` at a time in their own processes; then
    :func:`write_study`."""

    prof = _load(profile, data_dir)
    names = arms or list(prof.runs)
    unknown = sorted(set(names) - set(prof.runs))
    if unknown:
        raise SystemExit(f"{prof.path}: no arm(s) {unknown}; arms: {list(prof.runs)}")
    git = git_state()
    for run in {prof.runs[n].data: prof.runs[n] for n in names}.values():
        prepare(run.data)  # once, here, not in two workers at a time
    one = partial(train_arm, str(profile), str(results_dir), data_dir)
    if jobs <= 1:
        walls = dict(map(one, names))
    else:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            walls = dict(pool.map(one, names))
    return write_study(profile, results_dir, walls, git, data_dir)


# ------------------------------------------------------------------------------------ report
def curves(out: Path) -> dict[str, list[dict]]:
    """Every arm's evaluations in order: ``{arm: [{"minutes", "update", "dev_nll", "dev_bleu"}]}``
    (:func:`nmt_experiments.results.eval_curve`)."""
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


def write_study(
    profile, results_dir, walls: dict | None = None, git: dict | None = None, data_dir=None
) -> dict:
    """``manifest.json`` (when ``walls`` is given: after training), ``arms.csv|md``, ``curves.csv``
    and ``budget_curves.png`` from the arms' runs under ``results_dir``."""

    out = Path(results_dir)
    if walls is not None:  # the arms done so far, in the profile's order, with their wall times
        prof = _load(profile, data_dir)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.budget", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--profile", default=str(PROFILE), help="the study profile (its runs are arms)")
    ap.add_argument("--results-dir", default=str(RESULTS), help="default: results/budget")
    ap.add_argument("--data-dir", help="the WMT'14 layout (default: the profile's, NMT_DATA)")
    ap.add_argument("--train", action="store_true", help="train the arms (resumable) first")
    ap.add_argument("--jobs", type=int, default=1, help="arms trained at a time (one core each)")
    ap.add_argument("--arms", nargs="+", help="with --train: only these arms")
    ap.add_argument(
        "--search", action="store_true", help="then compare the search settings on dev (search.csv)"
    )
    ap.add_argument(
        "--extend",
        type=float,
        metavar="MINUTES",
        help="then train the chosen arm on to MINUTES and evaluate it on the test set",
    )
    ap.add_argument(
        "--sharing",
        action="store_true",
        help="then time an update alone and two side by side (sharing.json)",
    )
    ap.add_argument("--arch", help="with --extend: train this model from scratch instead")
    a = ap.parse_args(argv)
    if a.train:
        train_study(a.profile, a.results_dir, a.data_dir, a.jobs, a.arms)
    if a.search:
        for row in search_study(a.results_dir, data_dir=a.data_dir):
            print(f"[budget] search: {row}", flush=True)
    if a.sharing:
        print(f"[budget] sharing: {sharing_cost(a.profile, a.results_dir, data_dir=a.data_dir)}")
    if a.extend:
        extend_arm(a.results_dir, minutes=a.extend, data_dir=a.data_dir, arch=a.arch)
    if not a.train:
        write_study(a.profile, a.results_dir)
    print(f"[budget] wrote {a.results_dir}/arms.md, curves.csv, budget_curves.png", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
