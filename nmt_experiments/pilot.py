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

:func:`extrapolate` fits the curves (:func:`fit_log`) and solves for the learning floor;
:func:`write_study` writes ``curves.csv``, ``summary.json``, ``summary.md`` and ``pilot_curves.png``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from nmt_lib import bleu
from nmt_lib.backend import backend
from nmt_lib.checkpoint import default_checkpoint_dir, load_trained
from nmt_lib.config import PROFILE_DIR, home, load_profile, run_dir_name
from nmt_lib.data import corpus, prepare, text
from nmt_lib.decoding import decode_corpus
from nmt_lib.io import atomic_write, read_json, write_json
from nmt_lib.runtime import autocast
from nmt_lib.train import train_run

from . import plots
from .budget import recipe
from .claims import FLOOR, SHORT
from .plots import COLUMN_WIDTH
from .recipes import write_manifest
from .replicate import git_state, provenance
from .results import train_log
from .tables import markdown_table

PROFILE = PROFILE_DIR / "studies" / "pilot.toml"
RESULTS = home() / "results" / "pilot"
#: Updates between two scoring points of an arm (and its budget, the last point).
SCORE_EVERY = 1000
#: The committed curves the pilot is read beside: lite's RNNencdec-50 (its recipe: Adam 1e-3) with
#: three seeds, 40 minutes each, and the comparison's RNNencdec-50 (Adam 3e-3), 3,000 updates.
LITE = home() / "results" / "lite"
COMPARE = home() / "results" / "compare"
LITE_RUNS = ("RNNencdec-50", "RNNencdec-50-s2", "RNNencdec-50-s3")
COMPARE_RUNS = ("RNNencdec-50-s1", "RNNencdec-50-s2", "RNNencdec-50-s3")
#: What would be trained at equal updates to decide Table 1, if it fits: three seeds of RNNencdec-50 and of
#: RNNsearch-50, one of RNNencdec-30 and of RNNsearch-30, in about this many core-hours.
PLAN = {"RNNencdec-50": 3, "RNNsearch-50": 3, "RNNencdec-30": 1, "RNNsearch-30": 1}
PLAN_CORE_HOURS = 16.0


# ------------------------------------------------------------------------------------ training
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
        hyps = decode_corpus(
            model,
            [prep.test.x[i] for i in idx],
            search,
            greedy=not beam,
            device="cpu",
            on=backend(run.train.backend),
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
    found, tok = corpus.locate(cfg), cfg.resolved_cache_dir() / "tok"
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
        write_manifest(Path(out), prof, {name: walls}, git, provenance)


# ---------------------------------------------------------------------------------- the analysis
def fit_log(updates, values) -> dict:
    """Least-squares fit of ``value = a + b ln(updates)``; ``per_doubling = b ln 2`` and the root
    mean square residual ``rmse``, in the units of ``values``."""
    x, y = np.log(np.asarray(updates, dtype=float)), np.asarray(values, dtype=float)
    b, a = np.polyfit(x, y, 1)
    rmse = float(np.sqrt(np.mean((a + b * x - y) ** 2)))
    return {
        "a": float(a),
        "b": float(b),
        "per_doubling": float(b * math.log(2)),
        "rmse": rmse,
        "points": len(x),
        "from_update": int(round(math.exp(x.min()))),
        "to_update": int(round(math.exp(x.max()))),
    }


def reach(fit: dict, target: float) -> float | None:
    """The updates at which a :func:`fit_log` line reaches ``target`` (None if it never moves toward
    it: a flat line, or one that moves away)."""
    last = fit["a"] + fit["b"] * math.log(fit["to_update"])
    if fit["b"] == 0 or (target - last) * fit["b"] < 0:
        return None
    u = math.exp((target - fit["a"]) / fit["b"])
    return u if math.isfinite(u) else None


def second_half(rows: list[dict], key: str = "update") -> list[dict]:
    """The rows of a curve from half its last update on: where the curves are about straight in log
    updates (the first updates, before the model learns anything, are not)."""
    last = max(r[key] for r in rows)
    return [r for r in rows if r[key] >= last / 2]


def committed_points() -> list[dict]:
    """The committed runs beside the pilot: lite's RNNencdec-50 (three seeds, Adam 1e-3) and the
    comparison's (three seeds, Adam 3e-3), each with its updates, dev NLL (the fixed subset, last
    logged evaluation), short-sentence BLEU with its own beam search (from ``bleu_by_length.json``)
    and seconds per update."""
    rows = []
    for where, runs in (("lite", LITE_RUNS), ("compare", COMPARE_RUNS)):
        for name in runs:
            d = home() / "results" / where / "runs" / name
            if not (d / "bleu_by_length.json").is_file():
                continue
            by_len = read_json(d / "bleu_by_length.json")
            summary, cfg = read_json(d / "train_summary.json"), read_json(d / "config.json")
            short = np.asarray(by_len["src_len"]) < SHORT
            stats = np.asarray(by_len["stats_tok"])[short]
            ev = [r for r in train_log(d) if r.get("kind") == "eval"][-1]
            rows.append(
                {
                    "results": where,
                    "run": name,
                    "lr": cfg["train"]["lr"],
                    "precision": summary["precision"],
                    "updates": summary["updates"],
                    "minutes": round(summary["hours"] * 60, 1),
                    "s_per_update": round(summary["hours"] * 3600 / summary["updates"], 4),
                    "dev_nll": round(ev["dev_nll"], 2),
                    "short_bleu_beam": round(bleu.bleu_from_stats(stats, True), 2),
                }
            )
    return rows


def lite_cost() -> dict[str, float]:
    """Seconds per update of each model of :data:`PLAN` in lite's runs (40 minutes of one core,
    evaluations included, two runs side by side), the default seed's run."""
    found = {}
    for m in PLAN:
        summary = read_json(LITE / "runs" / m / "train_summary.json")
        found[m] = summary["hours"] * 3600 / summary["updates"]
    return found


def arm_curves(out: Path = RESULTS, profile=PROFILE) -> dict[str, list[dict]]:
    """``{arm: its curve.json}`` for the arms with points, in the profile's order."""
    prof = load_profile(profile)
    found = {}
    for name in prof.runs:
        f = Path(out) / "runs" / run_dir_name(name) / "curve.json"
        if f.is_file():
            found[name] = read_json(f)
    return found


def core_seconds_per_update(curve: list[dict]) -> float:
    """What an update of an arm costs one core: the CPU time of its training segments (one thread;
    the machine is shared, so wall time says less) over their updates; the training time with its
    dev evaluations (``train_minutes``) where no segment recorded its CPU time."""
    seg = [p for p in curve if p.get("segment_updates") and p.get("segment_cpu_s") is not None]
    if seg:
        return sum(p["segment_cpu_s"] for p in seg) / sum(p["segment_updates"] for p in seg)
    return curve[-1]["train_minutes"] * 60 / curve[-1]["update"]


def nll_curve(d: Path) -> list[dict]:
    """``[{"update", "dev_nll"}]``: a run's logged evaluations."""
    return [
        {"update": r["update"], "dev_nll": r["dev_nll"]}
        for r in train_log(d)
        if r.get("kind") == "eval"
    ]


def bleu_vs_nll(points: list[tuple[float, float]]) -> dict | None:
    """Least-squares line of ln(short-sentence BLEU) against dev NLL through ``(nll, bleu)`` points
    (those of BLEU > 0): BLEU, a geometric mean of n-gram precisions, falls about exponentially as
    the NLL per sentence rises; ``floor_nll``, the dev NLL at which the line reaches the floor (None:
    fewer than 2 points, or a line that does not fall); ``rmse`` in ln BLEU."""
    points = [(x, y) for x, y in points if y > 0]
    if len(points) < 2:
        return None
    x, y = np.array([p[0] for p in points]), np.log([p[1] for p in points])
    slope, icpt = np.polyfit(x, y, 1)
    rmse = float(np.sqrt(np.mean((icpt + slope * x - y) ** 2)))
    return {
        "slope": float(slope),
        "intercept": float(icpt),
        "points": len(points),
        "rmse": rmse,
        "floor_nll": float((math.log(FLOOR) - icpt) / slope) if slope < 0 else None,
    }


#: The fewest points (of a curve's second half) through which a BLEU line is fitted: BLEU at these
#: levels moves by tenths from one point to the next, about as much as it scatters.
BLEU_POINTS = 4
#: The estimates of each arm's updates to the floor (:func:`extrapolate`), and what they fit.
ESTIMATES = {
    "nll_beam": "dev NLL line to the NLL where beam BLEU (pooled) crosses the floor",
    "nll_greedy": "dev NLL line to the NLL where greedy BLEU (pooled) crosses the floor",
    "beam": "beam BLEU line (the arm's points) to the floor",
    "greedy": "greedy BLEU line (the arm's points) to the floor",
}


def extrapolate(out: Path = RESULTS, profile=PROFILE) -> dict:
    """The arithmetic of the summary, from the arms' curves and the committed runs.

    * ``maps``: short-sentence BLEU against dev NLL (:func:`bleu_vs_nll`), ``greedy`` through every
      point of every arm, ``beam`` through every beam-scored point and lite's three RNNencdec-50
      runs (the same beam search); each gives the dev NLL at which BLEU reaches the floor.
    * per arm (and lite's recipe, from its committed log): the second half of its dev NLL curve
      (:func:`second_half`) fitted against log updates (:func:`fit_log`), and the updates at which
      that line reaches each map's floor NLL; the second half of its greedy and of its beam BLEU
      points fitted the same way, and the updates at which they reach the floor
      (:data:`ESTIMATES`); its core-seconds per update (:func:`core_seconds_per_update`; lite's
      run's for lite's recipe) and the core-hours of those updates.
    * ``plan`` (:func:`plan`) and ``equal_core_time`` (:func:`equal_core_time`).
    """
    prof = load_profile(profile)
    curves = arm_curves(out, profile)
    committed = committed_points()
    pooled = [p for c in curves.values() for p in c]
    maps = {
        "beam": bleu_vs_nll(
            [(p["dev_nll"], p["beam_bleu"]) for p in pooled if p.get("beam_bleu") is not None]
            + [(r["dev_nll"], r["short_bleu_beam"]) for r in committed if r["results"] == "lite"]
        ),
        "greedy": bleu_vs_nll([(p["dev_nll"], p["greedy_bleu"]) for p in pooled]),
    }
    result = {
        "floor": FLOOR,
        "short": SHORT,
        "maps": maps,
        "estimates": ESTIMATES,
        "arms": {},
        "committed": committed,
    }
    cost = lite_cost()
    arms = {}
    for run in LITE_RUNS:  # lite's recipe: its three seeds' committed curves
        summary = read_json(LITE / "runs" / run / "train_summary.json")
        arms[f"lr-1e-3{run.removeprefix('RNNencdec-50')} (lite)"] = {
            "nll": nll_curve(LITE / "runs" / run),
            "points": None,
            "s_per_update": summary["hours"] * 3600 / summary["updates"],
            "settings": f"lite's {run} (committed)",
        }

    lite_recipe = recipe(load_profile("lite").runs["RNNencdec-50"])
    for name, curve in curves.items():
        mine = recipe(prof.runs[name])
        arms[name] = {
            "nll": nll_curve(Path(out) / "runs" / run_dir_name(name)),
            "points": curve,
            "s_per_update": core_seconds_per_update(curve),
            "settings": ", ".join(f"{k}={v}" for k, v in mine.items() if v != lite_recipe[k]),
        }
    for name, a in arms.items():
        row = {
            "settings": a["settings"],
            "s_per_update": round(a["s_per_update"], 4),
            "updates": a["nll"][-1]["update"] if a["nll"] else 0,
        }
        found = {}
        if len(a["nll"]) >= 2:
            half = second_half(a["nll"])
            row["nll_fit"] = fit = fit_log(
                [r["update"] for r in half], [r["dev_nll"] for r in half]
            )
            for m, mp in maps.items():
                if mp and mp["floor_nll"] is not None:
                    found[f"nll_{m}"] = reach(fit, mp["floor_nll"])
        for search in ("greedy", "beam"):
            half = [
                p
                for p in second_half(a["points"] or [{"update": 1}])
                if p.get(f"{search}_bleu") is not None
            ]
            if len(half) >= BLEU_POINTS:
                fit = fit_log([p["update"] for p in half], [p[f"{search}_bleu"] for p in half])
                row[f"{search}_fit"] = fit
                found[search] = reach(fit, FLOOR)
        if a["points"]:
            last = a["points"][-1]
            row["last"] = {
                k: last.get(k) for k in ("update", "dev_nll", "greedy_bleu", "beam_bleu")
            }
        row["updates_to_floor"] = {k: found.get(k) for k in ESTIMATES}
        row["core_hours_to_floor"] = {
            k: None if u is None else u * a["s_per_update"] / 3600 for k, u in found.items()
        }
        result["arms"][name] = row
    result["plan"] = plan(result["arms"], cost)
    result["equal_core_time"] = equal_core_time(arms)
    first = next((a for n, a in arms.items() if not n.endswith("(lite)")), None)
    if first:  # lite's recipe at the first arm's last update: what its learning rate changed
        u = first["nll"][-1]["update"]
        result["lite_at_first"] = interpolate(arms["lr-1e-3 (lite)"]["nll"], u, "dev_nll")
        # the first arm's dev NLL beside lite's at its first scoring point after the first and at
        # its last: how the gap that the learning rate makes changes
        result["lr_gap"] = [
            {
                "update": p["update"],
                "dev_nll": p["dev_nll"],
                "lite": interpolate(arms["lr-1e-3 (lite)"]["nll"], p["update"], "dev_nll"),
            }
            for p in (first["points"][1:2] + first["points"][-1:])
        ]
        result["lr_gap"] = [r for r in result["lr_gap"] if r["lite"] is not None]
    return result


def interpolate(rows: list[dict], update: float, key: str) -> float | None:
    """``key`` of a curve at ``update``, linear in log updates between its points (None outside)."""
    for a, b in zip(rows, rows[1:], strict=False):
        if a["update"] <= update <= b["update"]:
            w = math.log(update / a["update"]) / math.log(b["update"] / a["update"])
            return a[key] + w * (b[key] - a[key])
    return None


def equal_core_time(arms: dict) -> list[dict]:
    """Each pilot arm after the first at its last point beside the first arm after the same
    core-seconds (its updates at the first arm's cost per update; dev NLL and greedy BLEU
    interpolated on its curves): which learns more per core-hour."""
    names = [n for n in arms if not n.endswith("(lite)")]
    if len(names) < 2 or not arms[names[0]]["s_per_update"]:
        return []
    first, rows = arms[names[0]], []
    half = second_half(first["nll"])
    line = fit_log([r["update"] for r in half], [r["dev_nll"] for r in half])
    for name in names[1:]:
        a, last = arms[name], arms[name]["points"][-1]
        core_s = last["update"] * a["s_per_update"]
        u = core_s / first["s_per_update"]
        nll, source = interpolate(first["nll"], u, "dev_nll"), "its curve"
        if nll is None and u > first["nll"][-1]["update"]:  # a little past its budget: its line
            nll, source = line["a"] + line["b"] * math.log(u), "its NLL line"
        rows.append(
            {
                "arm": name,
                "updates": last["update"],
                "core minutes": round(core_s / 60, 1),
                "dev NLL": last["dev_nll"],
                "short BLEU (greedy)": last["greedy_bleu"],
                f"{names[0]} updates": round(u),
                f"{names[0]} dev NLL": _round(nll, 2),
                f"{names[0]} dev NLL from": source,
                f"{names[0]} short BLEU (greedy)": _round(
                    interpolate(first["points"], u, "greedy_bleu"), 2
                ),
            }
        )
    return rows


def _round(x, digits):
    return None if x is None else round(x, digits)


def plan(arms: dict, cost: dict) -> dict:
    """What :data:`PLAN` costs at each arm's estimate (``nll_beam`` of :data:`ESTIMATES`, the floor
    as the claims judge it on the arm's smoothest curve; ``nll_greedy`` where there is no beam
    map), each model's cost per update scaled from lite's
    ratios to RNNencdec-50's (``cost``, :func:`lite_cost`), at two rates of RNNencdec-50: the arm's,
    measured here, and lite's run's scaled by the arm's cost relative to the first pilot arm
    (measured side by side on this machine; 1 for lite's recipe, which is lite's run)."""
    scale = {m: c / cost["RNNencdec-50"] for m, c in cost.items()}
    per_update = sum(PLAN[m] * scale[m] for m in PLAN)  # in RNNencdec-50 updates
    pilot_arms = [n for n in arms if not n.endswith("(lite)")]
    ref = arms[pilot_arms[0]]["s_per_update"] if pilot_arms else None
    out = {
        "runs": PLAN,
        "cost_relative_to_RNNencdec_50": scale,
        "rnnencdec50_updates_per_plan_update": per_update,
        "core_hours": PLAN_CORE_HOURS,
        "arms": {},
    }
    for name, row in arms.items():
        est = row["updates_to_floor"]
        u = [x for x in ([est["nll_beam"]] if est["nll_beam"] else [est["nll_greedy"]]) if x]
        if not u:
            continue
        rate = {
            "here": row["s_per_update"],
            "lite": cost["RNNencdec-50"]
            * (1.0 if name.endswith("(lite)") else row["s_per_update"] / ref),
        }
        need = max(u)
        p = {"updates": need, "estimate": "nll_beam" if est["nll_beam"] else "nll_greedy"}
        for where, r in rate.items():
            p[f"s_per_update_{where}"] = r
            p[f"core_hours_{where}"] = need * per_update * r / 3600
            p[f"fits_{where}"] = p[f"core_hours_{where}"] <= PLAN_CORE_HOURS
            p[f"max_updates_{where}"] = PLAN_CORE_HOURS * 3600 / (per_update * r)
        out["arms"][name] = p
    return out


# ------------------------------------------------------------------------------------ the report
def _num(x, digits=0) -> str:
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def _key(arm: str) -> str:
    """``"lr-3e-3-n-512"`` -> ``"lr_3e_3_n_512"``; lite's recipe is ``lr_1e_3``."""
    return arm.split(" ")[0].replace("-", "_").replace(".", "_")


def book_numbers(out: Path = RESULTS) -> dict[str, str]:
    """The numbers chapter 8's section on the pilot glues, as text: ``{glue name: value}``."""
    s = read_json(Path(out) / "summary.json")
    nums = {
        "pilot_floor": f"{s['floor']:g}",
        "pilot_short": str(s["short"]),
        "pilot_score_every": f"{s['score_every']:,}",
        "pilot_short_sentences": f"{s['short_sentences']:,}",
        "pilot_core_minutes": _num(s["core_minutes"], 0),
        "pilot_plan_factor": _num(s["plan"]["rnnencdec50_updates_per_plan_update"], 2),
        "pilot_plan_core_hours": f"{s['plan']['core_hours']:g}",
    }
    for m, mp in s["maps"].items():
        if mp and mp["floor_nll"] is not None:
            nums[f"pilot_floor_nll_{m}"] = _num(mp["floor_nll"], 1)
            nums[f"pilot_map_points_{m}"] = str(mp["points"])
    for name, row in s["arms"].items():
        k = f"pilot_{_key(name)}"
        nums[f"{k}_updates"] = _num(row["updates"])
        nums[f"{k}_s_per_update"] = _num(row["s_per_update"], 3)
        if "nll_fit" in row:
            nums[f"{k}_nll_per_doubling"] = _num(-row["nll_fit"]["per_doubling"], 1)
        for search in ("greedy", "beam"):
            if f"{search}_fit" in row:
                nums[f"{k}_{search}_per_doubling"] = _num(row[f"{search}_fit"]["per_doubling"], 2)
        if "last" in row:
            nums[f"{k}_last_greedy"] = _num(row["last"]["greedy_bleu"], 2)
            nums[f"{k}_last_beam"] = _num(row["last"]["beam_bleu"], 2)
            nums[f"{k}_last_nll"] = _num(row["last"]["dev_nll"], 1)
        for est in ESTIMATES:
            nums[f"{k}_updates_to_floor_{est}"] = _round_k(row["updates_to_floor"][est])
    first = next((n for n in s["arms"] if not n.endswith("(lite)")), None)
    for row in s.get("equal_core_time", []):
        k = f"pilot_{_key(row['arm'])}"
        nums[f"{k}_core_minutes"] = _num(row["core minutes"], 0)
        nums[f"{k}_ect_updates"] = _num(row[f"{first} updates"], 0)
        nums[f"{k}_ect_nll"] = _num(row[f"{first} dev NLL"], 1)
        nums[f"{k}_ect_bleu"] = _num(row[f"{first} short BLEU (greedy)"], 2)
        if row[f"{first} dev NLL"] is not None:
            diff = row["dev NLL"] - row[f"{first} dev NLL"]
            nums[f"{k}_ect_diff"] = _num(abs(diff), 1)
            nums[f"{k}_ect_word"] = "below" if diff < 0 else "above"
    if first and s.get("lite_at_first") is not None:
        nums["pilot_lite_nll_at_first"] = _num(s["lite_at_first"], 1)
    lite = s["arms"].get("lr-1e-3 (lite)", {})
    if lite.get("updates_to_floor", {}).get("nll_beam"):
        nums["pilot_lr_1e_3_times_lite"] = _num(
            lite["updates_to_floor"]["nll_beam"] / lite["updates"], 1
        )
    for when, row in zip(("early", "late"), s.get("lr_gap", []), strict=False):
        nums[f"pilot_lr_gap_{when}"] = _num(row["lite"] - row["dev_nll"], 1)
        nums[f"pilot_lr_gap_{when}_updates"] = _num(row["update"])
    for name, p in s["plan"]["arms"].items():
        k = f"pilot_{_key(name)}"
        for where in ("here", "lite"):
            nums[f"{k}_plan_core_hours_{where}"] = _num(p[f"core_hours_{where}"], 0)
            nums[f"{k}_plan_max_updates_{where}"] = _round_k(p[f"max_updates_{where}"])
            nums[f"{k}_plan_fits_{where}"] = "fits" if p[f"fits_{where}"] else "does not fit"
    return nums


def _round_k(u) -> str:
    """Updates rounded to the thousand: an extrapolation is not more precise."""
    return "—" if u is None else f"{round(u, -3):,.0f}"


def summary_md(s: dict) -> str:
    """``summary.md`` from ``summary.json``'s dict."""
    lines = [
        "# The pilot: RNNencdec-50 against the learning floor",
        "",
        f"Every arm is RNNencdec-50 on lite's data and sizes, trained for a budget in updates "
        f"on one core and scored every {s['score_every']:,} updates: greedy decoding of the "
        f"{s['short_sentences']:,} newstest2014 sentences of fewer than {s['short']} source "
        f"words (tokenized BLEU; the learning floor is {s['floor']:g} BLEU), and the dev NLL of "
        "the fixed 500-sentence subset that training logs; the points are also decoded with "
        "lite's beam search (beam 10, cost / length). The arms took "
        f"{s['core_minutes']:.0f} minutes of one thread (training with its dev evaluations, "
        "and scoring; wall time on a shared machine); `load average` is the machine's when a "
        "point was scored (2 cores).",
        "",
        "## The curves",
        "",
    ]
    rows = [
        {
            "arm": name,
            "update": p["update"],
            "training minutes (wall)": p["train_minutes"],
            "dev NLL": p["dev_nll"],
            "short BLEU (greedy)": p["greedy_bleu"],
            "brevity penalty": p["greedy_bp"],
            "length ratio": p["greedy_ratio"],
            "short BLEU (beam)": p.get("beam_bleu"),
            "load average": p["load_avg"],
        }
        for name, c in s["curves"].items()
        for p in c
    ]
    lines += [markdown_table(rows, fit=None) if rows else "(no arm scored yet)", ""]
    lines += [
        "## The committed runs beside it",
        "",
        "Lite's RNNencdec-50 (Adam 1e-3, bf16, 40 minutes of one core on lite's machine) and "
        "the comparison's (Adam 3e-3, fp32, 3,000 updates), each scored with its own beam "
        "search on the same sentences (from their `bleu_by_length.json`); dev NLL as their "
        "logs' last evaluation records it:",
        "",
        markdown_table(s["committed"], fit=None),
        "",
    ]
    lines += ["## The extrapolation", ""]
    for m, mp in s["maps"].items():
        if mp and mp["floor_nll"] is not None:
            which = (
                "every beam-scored point of the pilot and lite's three RNNencdec-50 runs "
                "(the same beam search)"
                if m == "beam"
                else "every point of the pilot"
            )
            lines += [
                f"{m.capitalize()} short-sentence BLEU against dev NLL, through {which} "
                f"({mp['points']} points of BLEU > 0): ln BLEU = {mp['intercept']:.2f} "
                f"{mp['slope']:+.4f} × NLL (rmse {mp['rmse']:.2f} in ln BLEU), which reaches "
                f"the floor at dev NLL {mp['floor_nll']:.1f}.",
                "",
            ]
    lines += [
        "The second half of each curve (from half its last update on) is fitted as a line in "
        "log updates: dev NLL = a + b ln(updates), and the arm's greedy and beam BLEU the "
        f"same way where it has {BLEU_POINTS} points or more. The estimates of the updates "
        "to the floor: "
        + "; ".join(f"`{k}`, the {v}" for k, v in s["estimates"].items())
        + ". Greedy "
        "decoding loops in these models (its length ratio), so its BLEU is the noisiest "
        "of the curves; dev NLL is the smoothest. Core-hours: those updates at the arm's "
        "core-seconds per update (the CPU time of its training segments, dev evaluations "
        "included; lite's run's for lite's recipe, whose NLL curve is its committed log).",
        "",
    ]
    rows = []
    for name, r in s["arms"].items():
        nf, u, h = r.get("nll_fit"), r["updates_to_floor"], r["core_hours_to_floor"]
        rows.append(
            {
                "arm": name,
                "differs from lite": r["settings"],
                "updates": r["updates"],
                "core-s / update": r["s_per_update"],
                "dev NLL per doubling": None if nf is None else round(nf["per_doubling"], 2),
                "NLL fit rmse": None if nf is None else round(nf["rmse"], 2),
                **{f"updates to floor ({k})": _round_k(u[k]) for k in s["estimates"]},
                "core-h (nll_beam)": _num(h.get("nll_beam"), 1),
            }
        )
    lines += [markdown_table(rows, fit=None), ""]
    rows = [
        {
            "arm": name,
            "search": sr,
            "BLEU per doubling": round(r[f"{sr}_fit"]["per_doubling"], 2),
            "fit rmse": round(r[f"{sr}_fit"]["rmse"], 2),
            "points": r[f"{sr}_fit"]["points"],
            "from update": r[f"{sr}_fit"]["from_update"],
        }
        for sr in ("greedy", "beam")
        for name, r in s["arms"].items()
        if f"{sr}_fit" in r
    ]
    if rows:
        lines += ["The BLEU lines:", "", markdown_table(rows, fit=None), ""]
    p = s["plan"]
    scale = ", ".join(f"{m} {v:.2f}" for m, v in p["cost_relative_to_RNNencdec_50"].items())
    runs = " + ".join(f"{n} × {m}" for m, n in p["runs"].items())
    hours = f"{p['core_hours']:g}"
    if s.get("equal_core_time"):
        lines += [
            "## At equal core-time",
            "",
            "Each arm at its last point, beside the first arm after the same core-seconds "
            "(interpolated on its curves, linear in log updates):",
            "",
            markdown_table(s["equal_core_time"], fit=None),
            "",
        ]
    lines += [
        "## Does the plan fit?",
        "",
        f"The plan: {runs}, all at the same updates. Each model's cost per update relative "
        f"to RNNencdec-50's, from lite's runs: {scale}; one update of the plan costs "
        f"{p['rnnencdec50_updates_per_plan_update']:.2f} updates of RNNencdec-50. At each "
        "arm's estimate (`nll_beam`) the plan costs, at the arm's core-"
        "seconds per update measured here and at lite's run's rate (lite's RNNencdec-50 "
        "scaled by the arm's cost relative to the first pilot arm). For the arms of another "
        "n or batch, RNNsearch's cost per update is taken to grow in the same proportion as "
        "RNNencdec's (not measured).",
        "",
    ]
    rows = [
        {
            "arm": name,
            "updates": _round_k(a["updates"]),
            "estimate": a["estimate"],
            "core-h here": round(a["core_hours_here"], 1),
            f"fits {hours} here": "yes" if a["fits_here"] else "no",
            f"updates {hours} core-h buy here": _round_k(a["max_updates_here"]),
            "core-h at lite's rate": round(a["core_hours_lite"], 1),
            f"fits {hours} at lite's rate": "yes" if a["fits_lite"] else "no",
            f"updates {hours} core-h buy at lite's rate": _round_k(a["max_updates_lite"]),
        }
        for name, a in p["arms"].items()
    ]
    lines += [
        markdown_table(rows, fit=None) if rows else "(no estimate)",
        "",
        "Not included: evaluating the models on the test set (lite's took about half a "
        "minute of beam search each); lite's runs shared their machine two at a time, as the "
        "plan's would.",
        "",
    ]
    return "\n".join(lines)


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
    cols = [
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
    with atomic_write(out / "curves.csv") as f:
        w = csv.DictWriter(f, fieldnames=cols)
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


def figure(s: dict, out: Path):
    """Short-sentence BLEU, greedy and beam (top), and dev NLL (bottom) against updates (log
    scale), each arm, with lite's committed runs, the floor, and each NLL line (dotted) extended to
    the dev NLL at the floor."""
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 7.6), sharex=True)
    colors = {"lr-1e-3 (lite)": "k"}
    for name, c in s["curves"].items():
        (line,) = a1.plot(
            [p["update"] for p in c],
            [p["greedy_bleu"] for p in c],
            "o-",
            ms=3,
            label=f"{name}, greedy",
        )
        beam = [p for p in c if p.get("beam_bleu") is not None]
        a1.plot(
            [p["update"] for p in beam],
            [p["beam_bleu"] for p in beam],
            "s--",
            ms=4,
            color=line.get_color(),
            label=f"{name}, beam",
        )
        nll = nll_curve(Path(out) / "runs" / run_dir_name(name))
        a2.plot(
            [r["update"] for r in nll],
            [r["dev_nll"] for r in nll],
            lw=1.3,
            label=name,
            color=line.get_color(),
        )
        colors[name] = line.get_color()
    lite = nll_curve(LITE / "runs" / "RNNencdec-50")
    a2.plot(
        [r["update"] for r in lite],
        [r["dev_nll"] for r in lite],
        "k",
        lw=2,
        label="lr-1e-3 (lite, committed)",
    )
    mine = [r for r in s["committed"] if r["results"] == "lite"]
    a1.plot(
        [r["updates"] for r in mine],
        [r["short_bleu_beam"] for r in mine],
        "ks",
        ms=4,
        label="lr-1e-3 (lite's 3 seeds), beam",
    )
    a1.axhline(s["floor"], color="gray", ls="--", lw=1, label="learning floor")
    floor_nll = (s["maps"].get("beam") or {}).get("floor_nll")
    if floor_nll:
        a2.axhline(
            floor_nll, color="gray", ls="--", lw=1, label="dev NLL at the floor (beam, pooled)"
        )
        for name, row in s["arms"].items():  # each curve's line in log updates, to the floor
            u, fit = row["updates_to_floor"].get("nll_beam"), row.get("nll_fit")
            if u and fit and name in colors:
                x = np.geomspace(fit["from_update"], u, 20)
                a2.plot(x, fit["a"] + fit["b"] * np.log(x), ":", lw=1, color=colors[name])
    a1.set(ylabel=f"BLEU, test < {s['short']} words", xscale="log")
    a2.set(xlabel="updates", ylabel="dev NLL per sentence (nats)", xscale="log")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.pilot", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "--profile", default=str(PROFILE), help="the pilot's profile (its runs are arms)"
    )
    ap.add_argument("--results-dir", default=str(RESULTS), help="default: results/pilot")
    ap.add_argument("--data-dir", help="the WMT'14 layout (default: the profile's, NMT_DATA)")
    ap.add_argument(
        "--train", action="store_true", help="train and score the arms first (resumable)"
    )
    ap.add_argument("--arms", nargs="+", help="with --train: only these arms, in this order")
    ap.add_argument("--every", type=int, default=SCORE_EVERY, help="updates between scoring points")
    a = ap.parse_args(argv)
    if a.train:
        train(a.profile, Path(a.results_dir), a.arms, a.data_dir, a.every)
    write_study(Path(a.results_dir), a.profile, a.every)
    print(f"[pilot] wrote {a.results_dir}/summary.md, curves.csv, pilot_curves.png", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
