"""The pilot's text and figure: ``summary.md`` (:func:`summary_md`), the numbers chapter 16 glues
(:func:`book_numbers`) and ``pilot_curves.png`` (:func:`figure`), from ``summary.json``
(:func:`nmt_experiments.pilot.extrapolation.extrapolate` and the arms' curves)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from nmt_lib.config import run_dir_name
from nmt_lib.io import read_json

from ..core.markdown import markdown_table
from ..core.plots import COLUMN_WIDTH
from ..core.results import nll_curve
from .extrapolation import BLEU_POINTS, ESTIMATES, LITE, RESULTS


def _num(x, digits=0) -> str:
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def _key(arm: str) -> str:
    """``"lr-3e-3-n-512"`` -> ``"lr_3e_3_n_512"``; lite's recipe is ``lr_1e_3``."""
    return arm.split(" ")[0].replace("-", "_").replace(".", "_")


def book_numbers(out: Path = RESULTS) -> dict[str, str]:
    """The numbers chapter 16's section on the pilot glues, as text: ``{glue name: value}``."""
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
    """``summary.md`` from ``summary.json``'s dict: its sections in turn."""
    sections = (
        _intro,
        _curves,
        _committed,
        _extrapolation,
        _floor_estimates,
        _bleu_lines,
        _equal_time,
        _plan,
    )
    return "\n".join(line for section in sections for line in section(s))


def _intro(s: dict) -> list[str]:
    """The title, and what every arm is and how it is scored."""
    return [
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
    ]


def _curves(s: dict) -> list[str]:
    """Every scored point of every arm."""
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
    return [
        "## The curves",
        "",
        markdown_table(rows, fit=None) if rows else "(no arm scored yet)",
        "",
    ]


def _committed(s: dict) -> list[str]:
    """The committed runs the pilot is read beside."""
    return [
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


def _extrapolation(s: dict) -> list[str]:
    """The maps of BLEU against dev NLL, and how each arm's updates to the floor are estimated."""
    lines = ["## The extrapolation", ""]
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
    return lines


def _floor_estimates(s: dict) -> list[str]:
    """Each arm's dev NLL line and its updates (and core-hours) to the floor."""
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
    return [markdown_table(rows, fit=None), ""]


def _bleu_lines(s: dict) -> list[str]:
    """The arms' BLEU lines, where an arm has enough points for one."""
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
    return ["The BLEU lines:", "", markdown_table(rows, fit=None), ""] if rows else []


def _equal_time(s: dict) -> list[str]:
    """Each arm beside the first at equal core-time, where there are two arms."""
    if not s.get("equal_core_time"):
        return []
    return [
        "## At equal core-time",
        "",
        "Each arm at its last point, beside the first arm after the same core-seconds "
        "(interpolated on its curves, linear in log updates):",
        "",
        markdown_table(s["equal_core_time"], fit=None),
        "",
    ]


def _plan(s: dict) -> list[str]:
    """Whether the plan fits the core-hours, at each arm's estimate."""
    p = s["plan"]
    scale = ", ".join(f"{m} {v:.2f}" for m, v in p["cost_relative_to_RNNencdec_50"].items())
    runs = " + ".join(f"{n} × {m}" for m, n in p["runs"].items())
    hours = f"{p['core_hours']:g}"
    lines = [
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
    return lines + [
        markdown_table(rows, fit=None) if rows else "(no estimate)",
        "",
        "Not included: evaluating the models on the test set (lite's took about half a "
        "minute of beam search each); lite's runs shared their machine two at a time, as the "
        "plan's would.",
        "",
    ]


def figure(s: dict, out: Path):
    """Short-sentence BLEU, greedy and beam (top), and dev NLL (bottom) against updates (log
    scale), each arm, with lite's committed runs, the floor, and each NLL line (dotted) extended to
    the dev NLL at the floor."""
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 7.6), sharex=True)
    colors = _draw_arms(a1, a2, s["curves"], out)
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
    _draw_floor_lines(a2, s, colors)
    a1.set(ylabel=f"BLEU, test < {s['short']} words", xscale="log")
    a2.set(xlabel="updates", ylabel="dev NLL per sentence (nats)", xscale="log")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def _draw_arms(a1, a2, curves: dict, out: Path) -> dict[str, str]:
    """Each arm's BLEU points (greedy and beam, on ``a1``) and dev NLL curve (``a2``); returns
    each arm's colour (lite's recipe: black)."""
    colors = {"lr-1e-3 (lite)": "k"}
    for name, c in curves.items():
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
    return colors


def _draw_floor_lines(a2, s: dict, colors: dict[str, str]) -> None:
    """The dev NLL at the floor (beam map) on ``a2``, and each arm's NLL line extended to it."""
    floor_nll = (s["maps"].get("beam") or {}).get("floor_nll")
    if not floor_nll:
        return
    a2.axhline(floor_nll, color="gray", ls="--", lw=1, label="dev NLL at the floor (beam, pooled)")
    for name, row in s["arms"].items():  # each curve's line in log updates, to the floor
        u, fit = row["updates_to_floor"].get("nll_beam"), row.get("nll_fit")
        if u and fit and name in colors:
            x = np.geomspace(fit["from_update"], u, 20)
            a2.plot(x, fit["a"] + fit["b"] * np.log(x), ":", lw=1, color=colors[name])
