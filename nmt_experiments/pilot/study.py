"""The pilot before training past the learning floor: how many updates, and core-hours, RNNencdec-50 needs to pass the learning
floor on newstest2014, and what makes it learn faster (``results/pilot/``).

    python -m nmt_experiments.pilot --train            # every arm in turn (resumable), scored as it trains
    python -m nmt_experiments.pilot --train --arms lr-3e-3
    python -m nmt_experiments.pilot                    # rewrite curves.csv, summary.md|json, the figure

The arms are the runs of ``nmt_lib/profiles/studies/pilot.toml``: RNNencdec-50 on lite's data and
sizes, each with a budget in updates (``train.max_updates``). An arm trains in segments that end at
the scoring points (every :data:`SCORE_EVERY` updates, and its budget): each segment resumes the
last one's checkpoint (:func:`nmt_lib.train.train_run`), so the arm's updates are those of one
uninterrupted run, and an interrupted arm resumes where it stopped. At each point the model decodes
greedily the test sentences of fewer than ``claims.SHORT`` source words (tokenized BLEU, what the
learning floor is judged on) and with the profile's beam search (lite's: the floor is judged on its
output); the dev NLL of the fixed subset comes from the training log. What an arm writes,
under ``runs/<arm>/``: ``config.json``, ``train_log.jsonl``, ``train_summary.json``, ``curve.json``
and the hypotheses ``hyp.short.<greedy|beam>.<update>.tok.txt.gz`` (each point re-scores from
them).

This module trains and scores the arms (:func:`train_arm`, :func:`train`) and writes the study
(:func:`write_study`: ``curves.csv``, ``summary.json``, ``summary.md`` and ``pilot_curves.png``);
:func:`nmt_experiments.pilot.extrapolation.extrapolate` fits the curves and solves for the learning
floor, :mod:`nmt_experiments.pilot.report` writes its text and figure.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import json
import os
import time
from pathlib import Path

import torch

from nmt_lib import bleu
from nmt_lib.checkpoint import default_checkpoint_dir
from nmt_lib.config import load_profile, run_dir_name
from nmt_lib.data import files, prepare, text
from nmt_lib.decoding import decode
from nmt_lib.io import atomic_write, read_json, write_json
from nmt_lib.loading import load_trained
from nmt_lib.runtime import autocast
from nmt_lib.train import train_run

from ..core import plots
from ..core.claims import SHORT
from ..core.options import add_out
from ..core.provenance import git_state, write_arms_manifest
from ..core.results import train_log
from .extrapolation import PROFILE, RESULTS, arm_curves, extrapolate
from .report import figure, summary_md

#: Updates between two scoring points of an arm (and its budget, the last point).
SCORE_EVERY = 1000


def points(max_updates: int, every: int = SCORE_EVERY) -> list[int]:
    """The updates at which an arm is scored: every ``every`` and its budget."""
    return [*range(every, max_updates, every), max_updates]


def short_sentences(test) -> list[int]:
    """The test sentences of fewer than ``claims.SHORT`` source words (tokenized), in file order."""
    return [i for i, s in enumerate(test.src_tok) if len(s) < SHORT]


def score_short(model, prep, idx, run, beam: int = 0) -> tuple[dict, list[str]]:
    """``model`` decodes the test sentences ``idx``: greedily (``beam = 0``) or with the run's search
    settings and ``beam``; their tokenized BLEU, brevity penalty, length ratio and seconds, and the
    hypotheses (tokenized lines)."""
    search = dataclasses.replace(run.search, beam=beam) if beam else run.search
    t0 = time.perf_counter()
    with autocast(torch.device("cpu"), run.train.precision):
        hyps = decode(
            model,
            [prep.test.x[i] for i in idx],
            search,
            greedy=not beam,
            device="cpu",
        )
    lines = [" ".join(prep.trg_vocab.decode(h.tokens)) for h in hyps]
    refs = [" ".join(prep.test.ref_tok[i]) for i in idx]
    return rescore(lines, refs) | {"seconds": round(time.perf_counter() - t0, 1)}, lines


def rescore(lines: list[str], refs: list[str]) -> dict:
    """Tokenized BLEU, brevity penalty and length ratio of hypotheses ``lines`` (tokenized)
    against the tokenized references ``refs``."""
    b = bleu.bleu_tok(lines, refs)
    return {
        "bleu": round(b.score, 2),
        "bp": round(b.bp, 3),
        "ratio": round(b.sys_len / max(b.ref_len, 1), 3),
    }


def short_references(cfg) -> list[str]:
    """The tokenized references of the test sentences of fewer than ``claims.SHORT`` source words
    of a run's data config (``cfg``), read and tokenized as the data are (cached); no training data
    needed."""
    found, tok = files.locate(cfg), cfg.resolved_cache_dir() / "tok"
    src = [s for part in found.test for s in text.tokenized(part.src, cfg.src_lang, tok, 1, False)]
    ref = [r for part in found.test for r in text.tokenized(part.ref, cfg.trg_lang, tok, 1, False)]
    return [r for s, r in zip(src, ref, strict=True) if len(s.split()) < SHORT]


def rescored(out: Path = RESULTS, profile=PROFILE, data_dir=None) -> list[dict]:
    """Every point of every arm scored again from its committed hypotheses: ``[{"arm", "update",
    "search", "recorded", "rescored"}]`` (BLEU as ``curve.json`` records it, and now)."""
    prof, rows = _load(profile, data_dir), []
    for name, curve in arm_curves(out, profile).items():
        refs = short_references(prof.runs[name].data)
        d = Path(out) / "runs" / run_dir_name(name)
        for p in curve:
            for search in ("greedy", "beam"):
                if f"{search}_bleu" not in p:
                    continue
                lines = hypotheses(d, search, p["update"])
                rows.append(
                    {
                        "arm": name,
                        "update": p["update"],
                        "search": search,
                        "recorded": p[f"{search}_bleu"],
                        "rescored": rescore(lines, refs)["bleu"],
                    }
                )
    return rows


def _log_eval(d: Path, update: int) -> dict:
    """The training log's evaluation at ``update``."""
    found = [r for r in train_log(d) if r.get("kind") == "eval" and r["update"] == update]
    if not found:
        raise ValueError(f"{d / 'train_log.jsonl'}: no evaluation at update {update}")
    return found[-1]


def train_arm(profile, out: Path, name: str, data_dir=None, every: int = SCORE_EVERY) -> dict:
    """Train arm ``name`` to its budget in segments, scoring it at each of :func:`points` not
    scored yet (``curve.json``, rewritten after every point); returns its wall seconds."""
    run = _load(profile, data_dir).runs[name]
    d = Path(out) / "runs" / run_dir_name(name)
    prep = prepare(run.data)
    idx = short_sentences(prep.test)
    f = d / "curve.json"
    curve = read_json(f) if f.is_file() else []
    walls = {"train_s": 0.0, "score_s": 0.0}
    budget = run.train.max_updates
    for k in points(budget, every):
        if any(p["update"] == k for p in curve):
            continue
        seg = dataclasses.replace(run, train=dataclasses.replace(run.train, max_updates=k))
        t0, c0 = time.time(), time.process_time()
        summary = train_run(seg, d, prep=prep, progress=False)
        t1, cpu = time.time(), time.process_time() - c0
        if summary["updates"] != k:  # a checkpoint past the point: the budget was lowered
            raise ValueError(
                f"{d}: arm {name!r} is at update {summary['updates']}, past its "
                f"scoring point {k}; score it with a budget of its points"
            )
        loaded = load_trained(default_checkpoint_dir(seg, d) / "last.pt")
        loaded.on.tune_process()
        model = loaded.model
        greedy, lines = score_short(model, prep, idx, run)
        _write_lines(d / hyp_name("greedy", k), lines)
        point = {
            "update": k,
            "train_minutes": round(summary["hours"] * 60, 2),
            "dev_nll": round(_log_eval(d, k)["dev_nll"], 3),
            "short_sentences": len(idx),
            **{f"greedy_{key}": v for key, v in greedy.items()},
            "load_avg": round(os.getloadavg()[0], 2),
            "segment_updates": summary["updates_this_session"],
            "segment_cpu_s": round(cpu, 1),
        }
        # and with the profile's (lite's) beam search, on whose output the floor is judged
        beam, lines = score_short(model, prep, idx, run, beam=run.search.beam)
        _write_lines(d / hyp_name("beam", k), lines)
        point |= {f"beam_{key}": v for key, v in beam.items()}
        curve.append(point)
        write_json(f, curve)
        walls["train_s"] += round(t1 - t0, 1)
        walls["score_s"] += round(time.time() - t1, 1)
        print(
            f"[pilot] {name} {k}: short BLEU (greedy) {point['greedy_bleu']:.2f}, dev NLL "
            f"{point['dev_nll']:.2f}, {point['train_minutes']:.1f} min",
            flush=True,
        )
    return walls


def _write_lines(path: Path, lines: list[str]) -> None:
    """``lines`` gzipped into ``path`` (the early points loop: long lines), reproducibly (no time)."""
    with atomic_write(path, "wb", encoding=None) as fh:
        fh.write(gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"), mtime=0))


def hypotheses(d: Path, search: str, update: int) -> list[str]:
    """The hypotheses an arm's point wrote (:func:`train_arm`)."""
    return gzip.decompress((d / hyp_name(search, update)).read_bytes()).decode("utf-8").splitlines()


def hyp_name(search: str, update: int) -> str:
    """``hyp.short.greedy.2000.tok.txt.gz``: the tokenized hypotheses of a point."""
    return f"hyp.short.{search}.{update}.tok.txt.gz"


def _load(profile, data_dir=None):
    overrides = {"data": {"data_dir": str(data_dir)}} if data_dir else {}
    return load_profile(profile, **overrides)


def train(profile=PROFILE, out: Path = RESULTS, arms=None, data_dir=None, every=SCORE_EVERY):
    """Every arm (or ``arms``) in the profile's order, one at a time; the manifest after each."""
    prof = _load(profile, data_dir)
    git = git_state()
    for name in arms or list(prof.runs):
        walls = train_arm(profile, Path(out), name, data_dir, every)
        old = (
            read_json(Path(out) / "manifest.json")
            if (Path(out) / "manifest.json").is_file()
            else {}
        )
        walls = {
            k: round(v + old.get("wall_seconds", {}).get(name, {}).get(k, 0.0), 1)
            for k, v in walls.items()
        }
        write_arms_manifest(Path(out), prof, {name: walls}, git)


#: The columns of ``curves.csv``: each scored point of each arm.
CURVE_COLUMNS = [
    "arm",
    "update",
    "train_minutes",
    "dev_nll",
    "short_sentences",
    "greedy_bleu",
    "greedy_bp",
    "greedy_ratio",
    "greedy_seconds",
    "beam_bleu",
    "beam_bp",
    "beam_ratio",
    "beam_seconds",
    "load_avg",
    "segment_updates",
    "segment_cpu_s",
]


def write_study(out: Path = RESULTS, profile=PROFILE, every: int = SCORE_EVERY) -> dict:
    """``curves.csv``, ``summary.json``, ``summary.md`` and ``pilot_curves.png`` from the runs."""
    out = Path(out)
    curves = arm_curves(out, profile)
    s = extrapolate(out, profile)
    s["score_every"] = every
    s["curves"] = curves
    s["short_sentences"] = next((c[0]["short_sentences"] for c in curves.values()), 0)
    s["core_minutes"] = sum(  # training with its dev evaluations, and scoring: one thread each
        c[-1]["train_minutes"]
        + sum(p.get("greedy_seconds", 0) + p.get("beam_seconds", 0) for p in c) / 60
        for c in curves.values()
    )
    with atomic_write(out / "curves.csv") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_COLUMNS)
        w.writeheader()
        w.writerows({"arm": n, **p} for n, c in curves.items() for p in c)
    with atomic_write(out / "summary.json") as f:  # in the order the tables show (not sorted)
        json.dump(s, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with atomic_write(out / "summary.md") as f:
        f.write(summary_md(s))
    if curves:
        plots.save(figure(s, out), out / "pilot_curves.png")
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.pilot", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "--profile", default=str(PROFILE), help="the pilot's profile (its runs are arms)"
    )
    add_out(ap, default=str(RESULTS), help="default: results/pilot")
    ap.add_argument("--data-dir", help="the WMT'14 layout (default: the profile's, NMT_DATA)")
    ap.add_argument(
        "--train", action="store_true", help="train and score the arms first (resumable)"
    )
    ap.add_argument("--arms", nargs="+", help="with --train: only these arms, in this order")
    ap.add_argument("--every", type=int, default=SCORE_EVERY, help="updates between scoring points")
    a = ap.parse_args(argv)
    if a.train:
        train(a.profile, Path(a.out), a.arms, a.data_dir, a.every)
    write_study(Path(a.out), a.profile, a.every)
    print(f"[pilot] wrote {a.out}/summary.md, curves.csv, pilot_curves.png", flush=True)
    return 0
