"""The budget study: dev NLL and dev BLEU against wall-clock time for training recipes, model sizes,
batch sizes and shortlists, at equal time on one CPU core (``results/budget/``).

    python -m nmt_experiments.budget --train --jobs 2   # train every arm (resumable), then write the tables
    python -m nmt_experiments.budget --search           # beam search settings on dev, with the chosen arm
    python -m nmt_experiments.budget --extend 40        # the chosen arm on to 40 minutes, test BLEU
    python -m nmt_experiments.budget --sharing          # what two arms side by side cost each
    python -m nmt_experiments.budget                    # rewrite the tables and the figure from the runs

The arms are the runs of a study profile (default ``nmt_lib/profiles/studies/budget.toml``): one model each,
the same time budget, each differing from the reference arm (the first) in the settings that
:func:`~nmt_experiments.budget.report.differences` lists. Training logs the dev NLL of a fixed dev
subset every ``eval_every`` updates (``train.dev_nll_sentences``); when an arm is done,
:func:`~nmt_experiments.core.arms.final_eval` scores the whole dev set. What one arm writes, under ``runs/<arm>/``:
``config.json``, ``train_log.jsonl``, ``train_summary.json`` and ``final.json``. The study as a
whole: ``arms.csv|md``, ``curves.csv`` (every evaluation of every arm), ``budget_curves.png`` and
``manifest.json`` (:func:`~nmt_experiments.budget.report.write_study`, from the runs), and
``search.csv`` (:func:`search_study`). This module trains, scores and extends the arms; what they
show is :mod:`nmt_experiments.budget.report`.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import time
from functools import partial
from pathlib import Path

import torch

from nmt_lib.backend import backend
from nmt_lib.checkpoint import default_checkpoint_dir
from nmt_lib.config import (
    PROFILE_DIR,
    RunConfig,
    model_config,
    run_dir_name,
    run_from_dict,
    to_dict,
)
from nmt_lib.data import TrainIterator, prepare
from nmt_lib.evaluate import evaluate_run
from nmt_lib.io import atomic_write, write_json
from nmt_lib.models import build_model
from nmt_lib.train import train_run
from nmt_lib.trainer import Trainer
from nmt_lib.validation import dev_subset

from ..core.arms import dev_search, final_eval, study_profile, train_arm, trained_arm
from ..core.options import add_out
from ..core.provenance import git_state
from ..core.workers import reported, run_all
from .report import RESULTS, findings, search_choice, write_study

PROFILE = PROFILE_DIR / "studies" / "budget.toml"


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
    :func:`~nmt_experiments.budget.report.search_choice` picked on dev): how far the recipe gets in
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

    run = study_profile(profile, data_dir).runs[arm]
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

    arm = arm or next(iter(study_profile(profile, data_dir).runs))
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


def train_study(
    profile: str | os.PathLike = PROFILE,
    results_dir: str | os.PathLike = RESULTS,
    data_dir: str | None = None,
    jobs: int = 1,
    arms: list[str] | None = None,
) -> dict:
    """Train every arm (or ``arms``), ``jobs`` at a time in their own processes; then
    :func:`~nmt_experiments.budget.report.write_study`."""

    prof = study_profile(profile, data_dir)
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
    """The command line; a stopped study is one line per arm (:func:`nmt_experiments.core.workers.reported`)."""
    return reported("budget", _main, argv)


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.budget", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--profile", default=str(PROFILE), help="the study profile (its runs are arms)")
    add_out(ap, default=str(RESULTS), help="default: results/budget")
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
        train_study(a.profile, a.out, a.data_dir, a.jobs, a.arms)
    if a.search:
        for row in search_study(a.out, data_dir=a.data_dir):
            print(f"[budget] search: {row}", flush=True)
    if a.sharing:
        print(f"[budget] sharing: {sharing_cost(a.profile, a.out, data_dir=a.data_dir)}")
    if a.extend:
        extend_arm(a.out, minutes=a.extend, data_dir=a.data_dir, arch=a.arch)
    if not a.train:
        write_study(a.out)
    print(f"[budget] wrote {a.out}/arms.md, curves.csv, budget_curves.png", flush=True)
    return 0
