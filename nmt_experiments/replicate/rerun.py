"""Budgets in updates, and the check that a rerun trains what the results hold.

A profile budgeted in minutes trains what the machine and its load allow: two seeds of one model
made different numbers of updates, and a slower CPU makes fewer. ``lite`` budgets each run in
updates, the number its committed run made (:func:`budget_text` says so, with the seeds' spread of
updates beside their spread of BLEU). The check (:func:`check`) trains one committed run again from
the profile for its first ``updates`` updates, into ``results/<profile>/rerun/<run>/``, and
compares its training log, record by record, with the committed run's: identical where the CPU
kind and precision match; elsewhere the measured difference, and the rate of this machine
(:func:`check_text`).

    python -m nmt_experiments.replicate.rerun lite RNNencdec-30 --updates 2000
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import math
from pathlib import Path

import numpy as np

from nmt_lib.config import load_profile
from nmt_lib.data import prepare
from nmt_lib.io import read_json, write_json
from nmt_lib.profile import load_runs
from nmt_lib.runtime import cpu_info
from nmt_lib.train import train_run

from ..core.options import add_out
from ..core.provenance import git_state
from ..core.results import results_path, run_dir, seed_groups, train_log

CHECK = "check.json"


def seed_updates(out: Path) -> dict[str, list[int]]:
    """The updates each seed of each model with several seeds made: ``{model: [updates, ...]}``."""
    return {
        m: [read_json(run_dir(out, r) / "train_summary.json")["updates"] for r in runs]
        for m, runs in seed_groups(out).items()
        if len(runs) > 1
    }


def budget_text(out: Path, profile) -> str:
    """How the runs of ``out`` were budgeted and what the profile budgets now: when the committed
    runs were trained by time, how many updates each model's seeds made (their spread is machine
    load as well as training noise) and that the profile fixes those counts."""
    prof = load_profile(profile) if isinstance(profile, str) else profile
    configs = read_json(out / "manifest.json")["configs"]
    by_time = {
        n: c["train"]["max_hours"] for n, c in configs.items() if not c["train"]["max_updates"]
    }
    if not by_time:
        return ""
    summaries = {n: read_json(run_dir(out, n) / "train_summary.json") for n in by_time}
    fixed = all(  # the updates a run made by time; at least those where early stopping ended it
        (cap := prof.runs[n].train.max_updates) == s["updates"]
        or (s["stopped_by"] == "early_stop" and cap is not None and cap >= s["updates"])
        for n, s in summaries.items()
        if n in prof.runs
    )
    minutes = sorted({round(60 * h) for h in by_time.values()})
    spread = "; ".join(
        f"{m} {min(u):,}–{max(u):,}" for m, u in seed_updates(out).items() if len(set(u)) > 1
    )
    text = (
        f"The committed runs were budgeted by time ({' or '.join(map(str, minutes))} minutes of "
        "one core), so each made as many updates as its machine and its load allowed"
    )
    if spread:
        text += (
            f": the seeds of one model made different numbers of updates ({spread}), so part of "
            "the spread over seeds in Table 1 and in the claims' intervals is machine load, not "
            "training noise"
        )
    if fixed:
        text += (
            f". The `{prof.name}` profile budgets each run by the updates its committed run "
            "made (`train.max_updates`), so a rerun on any machine trains exactly these"
        )
    return text + "."


def pace(log: list[dict]) -> float:
    """Seconds per update of a training log: the median over its windows (the elapsed time between
    two training records over the updates between them), so that the stretches where the machine
    was shared, and the evaluations, do not count."""
    train = [r for r in log if r["kind"] == "train"]
    return float(
        np.median(
            [
                (b["elapsed"] - a["elapsed"]) / b["window_updates"]
                for a, b in itertools.pairwise(train)
            ]
        )
    )


def check(
    profile: str,
    name: str,
    updates: int,
    results_dir=None,
    data_dir=None,
    checkpoint_dir=None,
    **train,
) -> dict:
    """Train ``name`` of ``profile`` again for its first ``updates`` updates into
    ``results/<profile>/rerun/<name>/`` (resumable) and write its ``check.json``: the committed
    run's log records up to ``updates`` beside the new ones (the largest difference of train and
    dev NLL, whether every record is identical), each side's CPU and precision, and this
    machine's seconds per update. ``checkpoint_dir``: the retrained run's (default: the cache's);
    ``train``: settings that the committed run had beside the profile's (its ``config.json``)."""
    prof = load_runs(profile, data_dir)
    out = results_path(prof.name, results_dir)
    committed = run_dir(out, name)
    run = load_runs(profile, data_dir, [name], train={**train, "max_updates": updates}).runs[name]
    d = out / "rerun" / committed.name
    summary = train_run(
        run, d, prep=prepare(run.data), checkpoint_dir=checkpoint_dir, progress=False
    )
    old = {(r["kind"], r["update"]): r for r in train_log(committed) if r["update"] <= updates}
    new = {(r["kind"], r["update"]): r for r in train_log(d)}
    both = sorted(set(old) & set(new), key=lambda k: (k[1], k[0]))
    key = {"train": "train_nll", "eval": "dev_nll"}
    diffs = {k: abs(old[k][key[k[0]]] - new[k][key[k[0]]]) for k in both}
    was = read_json(committed / "train_summary.json")
    made = read_json(committed / "made.json") if (committed / "made.json").is_file() else {}
    if not made.get("cpu_model") and (out / "manifest.json").is_file():  # runs before made.json
        made["cpu_model"] = read_json(out / "manifest.json")["hardware"].get("cpu_model")
    result = {
        "run": name,
        "updates": summary["updates"],
        "records_compared": len(both),
        "identical": bool(both) and all(d == 0 for d in diffs.values()),
        "max_train_nll_diff": max((v for k, v in diffs.items() if k[0] == "train"), default=None),
        "max_dev_nll_diff": max((v for k, v in diffs.items() if k[0] == "eval"), default=None),
        "last_dev_nll": {
            "update": last[1],
            "committed": old[last]["dev_nll"],
            "rerun": new[last]["dev_nll"],
        }
        if (last := max((k for k in both if k[0] == "eval"), default=None))
        else None,
        "committed": {"precision": was["precision"], "cpu_model": made.get("cpu_model")},
        "rerun": {"precision": summary["precision"], "cpu_model": cpu_info("model name") or None},
        "seconds_per_update": {
            "committed": pace(train_log(committed)),
            "rerun": pace(train_log(d)),
        },
        "budget_updates": prof.runs[name].train.max_updates,
        "git": git_state(),
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    write_json(d / CHECK, result)
    return result


def check_text(out: Path) -> str:
    """What the committed checks measured, one sentence each; empty where none is committed."""
    texts = []
    for f in sorted((out / "rerun").glob(f"*/{CHECK}")):
        c = read_json(f)
        a, b = c["committed"], c["rerun"]
        hours = {k: v * c["budget_updates"] / 3600 for k, v in c["seconds_per_update"].items()}
        same = (a["precision"], a["cpu_model"]) == (b["precision"], b["cpu_model"])
        head = (
            f"{c['run']} retrained from the profile for its first {c['updates']:,} updates "
            f"({b['precision']}, {b['cpu_model']}) against the committed run "
            f"({a['precision']}, {a['cpu_model']}): "
        )
        if c["identical"]:
            body = f"all {c['records_compared']} log records identical"
        else:
            last = c["last_dev_nll"]
            body = (
                f"the training NLL differs by at most {c['max_train_nll_diff']:.3f} nats"
                + (
                    f" and the dev NLL by at most {c['max_dev_nll_diff']:.3f} (at update "
                    f"{last['update']:,}: {last['rerun']:.2f} against {last['committed']:.2f})"
                    if last
                    else ""
                )
                + (
                    ", since the precision differs: bf16 and float32 round the same sums "
                    "differently, and the difference grows as training goes on"
                    if a["precision"] != b["precision"]
                    else ""
                )
                + ("" if same else "; identical logs need the same CPU kind and precision")
            )
        rate = (
            f". At the pace of each log (the median over its windows, evaluations aside), the "
            f"whole budget of {c['budget_updates']:,} updates takes about "
            f"{hours['committed']:.1f} hours of one {a['precision']} core and "
            f"{hours['rerun']:.1f} of one {b['precision']} core"
        )
        texts.append(head + body + (rate if math.isfinite(hours["rerun"]) else "") + ".")
    return " ".join(texts)


def pace_ratio(out: Path) -> dict | None:
    """The first committed check of ``out`` where the rerun's precision differs from the committed
    run's: ``ratio`` (its seconds per update over the committed run's), ``precision`` (the
    rerun's), ``run`` and ``cpu_model``; None where there is none."""
    found = sorted((out / "rerun").glob(f"*/{CHECK}"))
    if not found:
        return None
    c = read_json(found[0])
    (a, b), rate = (c["committed"], c["rerun"]), c["seconds_per_update"]
    if a["precision"] == b["precision"]:
        return None
    ratio = rate["rerun"] / rate["committed"]
    return {
        "ratio": ratio,
        "precision": b["precision"],
        "run": c["run"],
        "cpu_model": b["cpu_model"],
    }


def hours_text(out: Path, hours: float) -> str:
    """``hours`` (what the committed runs of ``out`` took) on another core, scaled by the ratio of
    seconds per update that the first committed check measured (:func:`pace_ratio`): "about 21.3
    on one fp32 core, at the ratio of paces ..."; empty where there is no such check."""
    if not (p := pace_ratio(out)):
        return ""
    return (
        f"about {hours * p['ratio']:.1f} on one {p['precision']} core, at the ratio of paces "
        f"that {p['run']}'s rerun check measured on an {p['cpu_model']}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nmt_experiments.replicate.rerun", description=__doc__
    )
    ap.add_argument("profile")
    ap.add_argument("run")
    ap.add_argument("--updates", type=int, required=True, help="the first N updates")
    add_out(ap, help="default: results/<the profile's name>")
    ap.add_argument("--data-dir")
    a = ap.parse_args(argv)
    c = check(a.profile, a.run, a.updates, a.out, a.data_dir)
    print(f"[rerun] {c['run']}: {c['updates']} updates, identical: {c['identical']}")
    print(check_text(results_path(load_profile(a.profile).name, a.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
