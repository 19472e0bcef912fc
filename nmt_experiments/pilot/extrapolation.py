"""The pilot's extrapolation: where its arms' curves (:func:`arm_curves`), fitted as lines in log
updates (:func:`nmt_experiments.pilot.fits.fit_log`), reach the learning floor, through the dev NLL
at which short-sentence BLEU crosses it (:func:`nmt_experiments.pilot.fits.bleu_vs_nll`); beside
lite's committed runs (:func:`committed_points`), at equal core-time (:func:`equal_core_time`),
and what the plan of :data:`PLAN` would cost (:func:`plan`). :func:`extrapolate` gathers it all
(``summary.json``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from nmt_lib import bleu
from nmt_lib.config import PROFILE_DIR, home, load_profile, run_dir_name
from nmt_lib.io import read_json

from ..core.claims import FLOOR, SHORT
from ..core.recipe import recipe
from ..core.results import nll_curve, train_log
from .fits import bleu_vs_nll, fit_log, interpolate, reach, second_half

PROFILE = PROFILE_DIR / "studies" / "pilot.toml"
RESULTS = home() / "results" / "pilot"
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
      run's for lite's recipe) and the core-hours of those updates (:func:`arm_row`).
    * ``plan`` (:func:`plan`) and ``equal_core_time`` (:func:`equal_core_time`); ``lite_at_first``
      and ``lr_gap`` (:func:`lr_gap`).
    """
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
    arms = _arms(out, load_profile(profile), curves)
    result = {
        "floor": FLOOR,
        "short": SHORT,
        "maps": maps,
        "estimates": ESTIMATES,
        "arms": {name: arm_row(a, maps) for name, a in arms.items()},
        "committed": committed,
    }
    result["plan"] = plan(result["arms"], lite_cost())
    result["equal_core_time"] = equal_core_time(arms)
    first = next((a for n, a in arms.items() if not n.endswith("(lite)")), None)
    if first:
        result |= lr_gap(first, arms["lr-1e-3 (lite)"])
    return result


def _arms(out: Path, prof, curves: dict[str, list[dict]]) -> dict[str, dict]:
    """Lite's recipe (its three seeds' committed curves) and each arm of the pilot: its dev NLL
    curve (``nll``), its scored points (``points``; None for lite's), its core-seconds per update
    and the settings in which it differs from lite's recipe."""
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
    return arms


def arm_row(a: dict, maps: dict) -> dict:
    """An arm's row of the summary (``a``: as :func:`_arms` gives it): its settings, cost and
    updates, its dev NLL line and the updates at which it reaches each map's floor NLL, its BLEU
    lines and the updates at which they reach the floor, its last point, and the core-hours of each
    estimate (:data:`ESTIMATES`)."""
    row = {
        "settings": a["settings"],
        "s_per_update": round(a["s_per_update"], 4),
        "updates": a["nll"][-1]["update"] if a["nll"] else 0,
    }
    found = {}
    if len(a["nll"]) >= 2:
        half = second_half(a["nll"])
        row["nll_fit"] = fit = fit_log([r["update"] for r in half], [r["dev_nll"] for r in half])
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
        row["last"] = {k: last.get(k) for k in ("update", "dev_nll", "greedy_bleu", "beam_bleu")}
    row["updates_to_floor"] = {k: found.get(k) for k in ESTIMATES}
    row["core_hours_to_floor"] = {
        k: None if u is None else u * a["s_per_update"] / 3600 for k, u in found.items()
    }
    return row


def lr_gap(first: dict, lite: dict) -> dict:
    """What the first pilot arm's learning rate changed, beside lite's recipe (``lite``: its
    default seed, as :func:`_arms` gives them): lite's dev NLL at the first arm's last update
    (``lite_at_first``), and the two dev NLLs at the first arm's first scoring point after the
    first and at its last (``lr_gap``: how the gap changes)."""
    gap = [
        {
            "update": p["update"],
            "dev_nll": p["dev_nll"],
            "lite": interpolate(lite["nll"], p["update"], "dev_nll"),
        }
        for p in (first["points"][1:2] + first["points"][-1:])
    ]
    return {
        "lite_at_first": interpolate(lite["nll"], first["nll"][-1]["update"], "dev_nll"),
        "lr_gap": [r for r in gap if r["lite"] is not None],
    }


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
