"""The budget study: dev NLL and dev BLEU against wall-clock time for training recipes, model sizes,
batch sizes and shortlists, at equal time on one CPU core (``results/budget/``).

    python -m nmt_experiments.budget --train --jobs 2   # train every arm (resumable), then write the tables
    python -m nmt_experiments.budget --search           # beam search settings on dev, with the chosen arm
    python -m nmt_experiments.budget --extend 40        # the chosen arm on to 40 minutes, test BLEU
    python -m nmt_experiments.budget --sharing          # what two arms side by side cost each
    python -m nmt_experiments.budget                    # rewrite the tables and the figure from the runs

The arms are the runs of a study profile (default ``nmt_lib/profiles/studies/budget.toml``): one model each,
the same time budget, each differing from the reference arm (the first) in the settings that
:func:`~nmt_experiments.budget_report.differences` lists. Training logs the dev NLL of a fixed dev
subset every ``eval_every`` updates (``train.dev_nll_sentences``); when an arm is done,
:func:`final_eval` scores the whole dev set. What one arm writes, under ``runs/<arm>/``:
``config.json``, ``train_log.jsonl``, ``train_summary.json`` and ``final.json``. The study as a
whole: ``arms.csv|md``, ``curves.csv`` (every evaluation of every arm), ``budget_curves.png`` and
``manifest.json`` (:func:`~nmt_experiments.budget_report.write_study`, from the runs), and
``search.csv`` (:func:`search_study`). This module trains, scores and extends the arms; what they
show is :mod:`nmt_experiments.budget_report`.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import sys
import time
from functools import partial
from pathlib import Path

import torch

from nmt_lib import bleu
from nmt_lib.backend import backend
from nmt_lib.checkpoint import default_checkpoint_dir, located
from nmt_lib.config import (
    PROFILE_DIR,
    RunConfig,
    load_profile,
    model_config,
    run_dir_name,
    run_from_dict,
    to_dict,
)
from nmt_lib.data import TrainIterator, prepare
from nmt_lib.decoding import decode
from nmt_lib.evaluate import evaluate_run
from nmt_lib.io import atomic_write, write_json
from nmt_lib.loading import load_trained
from nmt_lib.models import build_model
from nmt_lib.train import train_run
from nmt_lib.train_loop import Diverged
from nmt_lib.trainer import Trainer
from nmt_lib.validation import dev_metrics, dev_subset

from .budget_report import RESULTS, findings, search_choice, write_study
from .provenance import git_state
from .workers import reported, run_all

PROFILE = PROFILE_DIR / "studies" / "budget.toml"


def arm_model(out_dir: Path, run: RunConfig):
    """The model that the run in ``out_dir`` ended with (its ``train_summary.json`` names the
    checkpoint), ready to evaluate, the process tuned for its backend."""
    summary = json.loads((out_dir / "train_summary.json").read_text(encoding="utf-8"))
    loaded = load_trained(located(summary["model_checkpoint"], run))
    loaded.on.tune_process()
    return loaded.model


def trained_arm(out_dir: Path, run: RunConfig, prep):
    """:func:`arm_model`, the arm trained again first where its checkpoint is gone (checkpoints
    are not results: another machine or session has none), into ``<cache>/retrain/<arm>/``.
    Training is deterministic, so the retrained arm's best dev NLL must be the recorded one (to
    1e-4, for another CPU's rounding); a mismatch raises, naming both."""
    summary = json.loads((out_dir / "train_summary.json").read_text(encoding="utf-8"))
    if located(summary["model_checkpoint"], run).is_file():
        return arm_model(out_dir, run)
    again = run.data.resolved_cache_dir() / "retrain" / out_dir.name
    print(f"[budget] {run.name}: no checkpoint here; training it again into {again}", flush=True)
    redone = train_run(run, again, prep=prep, progress=False)
    if abs(redone["best_dev_nll"] - summary["best_dev_nll"]) > 1e-4 * summary["best_dev_nll"]:
        raise RuntimeError(
            f"{run.name}: trained again, its best dev NLL is {redone['best_dev_nll']!r}, not the "
            f"{summary['best_dev_nll']!r} that {out_dir / 'train_summary.json'} records"
        )
    return arm_model(again, run)


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


def dev_search(model, prep, idx: list[int], search, precision: str = "fp32") -> dict:
    """``model`` decodes the dev sentences ``idx`` with ``search``: their tokenized BLEU, brevity penalty and length ratio, and
    the seconds it took."""
    t0 = time.perf_counter()
    hyps = decode(model, [prep.dev.x[i] for i in idx], search, device="cpu", precision=precision)
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
    the chosen arm) decodes ``sentences`` dev sentences (:func:`~nmt_lib.validation.dev_subset`) with
    each of :data:`SEARCH_OPTIONS`; tokenized BLEU, brevity penalty and length ratio go to
    ``search.csv``."""

    out = Path(results_dir)
    arm = arm or findings(out)["chosen"]
    run = arm_run(out, arm, data_dir)
    prep = prepare(run.data)
    model = trained_arm(out / "runs" / run_dir_name(arm), run, prep)
    idx = dev_subset(len(prep.dev), sentences)
    rows = []
    for option in SEARCH_OPTIONS:
        search = dataclasses.replace(run.search, **option)
        rows.append(
            {
                "arm": arm,
                **{f"search.{k}": v for k, v in option.items()},
                "beam": search.beam,
                **dev_search(model, prep, idx, search, run.train.precision),
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
    set as the profiles' models are (:func:`nmt_lib.evaluate.evaluate_run`, with the search settings
    :func:`~nmt_experiments.budget_report.search_choice` picked on dev): how far the recipe gets in
    a ``lite`` model's budget. The arm's run and checkpoint are copied to ``extended/<arm>/`` first,
    so the study's arms stay as they were (the arm itself is evaluated on the test set first, for a
    second point on the curve); rerunning resumes. With another ``arch`` (``"RNNencdec"``) the same
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
    (alone,) = run_all(partial(_timed, args), [1], 1)
    shared = run_all(partial(_timed, args), [1, 2], 2)
    result = {
        "arm": arm,
        "steps": steps,
        "alone_s_per_update": alone,
        "shared_s_per_update": sum(shared) / 2,
        "slowdown": sum(shared) / 2 / alone,
    }
    write_json(Path(results_dir) / "sharing.json", result)
    return result


def _timed(args: tuple, _which: int) -> float:
    """:func:`_seconds_per_step` of ``args``, in a worker of :func:`sharing_cost`."""
    return _seconds_per_step(*args)


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
    :func:`~nmt_experiments.budget_report.write_study`."""

    prof = _load(profile, data_dir)
    names = arms or list(prof.runs)
    unknown = sorted(set(names) - set(prof.runs))
    if unknown:
        raise SystemExit(f"{prof.path}: no arm(s) {unknown}; arms: {list(prof.runs)}")
    git = git_state()
    for run in {prof.runs[n].data: prof.runs[n] for n in names}.values():
        prepare(run.data)  # once, here, not in two workers at a time
    one = partial(train_arm, str(profile), str(results_dir), data_dir)
    walls = dict(map(one, names)) if jobs <= 1 else dict(run_all(one, names, jobs))
    return write_study(results_dir, walls, prof, git)


def main(argv: list[str] | None = None) -> int:
    """The command line; a stopped study is one line per arm (:func:`.workers.reported`)."""
    return reported("budget", _main, argv)


def _main(argv: list[str] | None) -> int:
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
        write_study(a.results_dir)
    print(f"[budget] wrote {a.results_dir}/arms.md, curves.csv, budget_curves.png", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
